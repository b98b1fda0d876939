"""People (HMP `users`): the persona's humans — the owner (the one who answers approvals), trusted people and
guests — each with a name, an identity per channel, a preferred channel, a language and quiet hours.

Rules: there is always an owner (the single human of an older database became it in the v13 migration; a new
database gets one named after `user_name` when first asked); only an owner answers approvals and contact requests;
the persona never adds a person or an identity by itself (its `users.add`/`users.update` are modify_self: they run
after the owner's approval); a message from an unknown sender is held as a contact request — nothing of it reaches
a note, and so memory, until the owner accepts it (refused: its held texts are deleted); so is a sender the channel
could not authenticate, whatever address it claims — a request that claims someone's address cannot be accepted
as them: it is shown as "claims to be <them>, not verified" and can be refused, or, when it claims the owner's own
address, taken in by the owner at their own door ("it was me": `vouch`). A request whose display name looks like a
known person's (the same name, or one that reads the same: Unicode's confusables, case, accents, spacing) or shows
a known address is flagged as an impostor risk (`RequestView.lookalike`), on every channel."""

from __future__ import annotations

import builtins
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from managers.views import frozen, frozen_all
from memory.models import ContactRequest, PeopleGroup, Person, PersonIdentity
from memory.repositories import NotFound
from persona.quiet_hours import in_quiet_hours, parse_hours

if TYPE_CHECKING:
    from managers import Managers

ROLES = ("owner", "trusted", "guest")
WEB = "web"  # the owner's own page and terminal: not a channel, no identity
GROUP_NAME = re.compile(r"^[\w][\w .'-]{0,119}$")

# What each role may do, beyond the owner's own rights (answering approvals and contact requests, vouching; a
# document the owner sends joins the knowledge base at once, anyone else's waits for the owner). Enforced where each
# applies: `priority` (managers/channels.py: their notes come before a guest's), `asks_privileged`
# (managers/consent.py: from a tick that holds their words, a command that reaches outside or changes the
# persona runs by the usual rules — consensus, a standing approval —; without it, it waits for the owner).
RIGHTS: dict[str, dict[str, Any]] = {
    "owner": {"priority": 1, "asks_privileged": True},
    "trusted": {"priority": 1, "asks_privileged": True},
    "guest": {"priority": 0, "asks_privileged": False},
}


def right(role: str, what: str) -> Any:
    """A role's right (`RIGHTS`); an unknown role has a guest's."""
    return RIGHTS.get(role, RIGHTS["guest"])[what]


class PeopleError(ValueError):
    """A refused change to the people (not the owner, unknown role, a name or identity taken)."""


@dataclass
class Forgotten:
    """What deleting a person did: their words deleted for good, their name anonymised elsewhere."""

    name: str
    notes: int = 0  # their notes and the persona's notes to them, deleted
    memories: int = 0  # the conversation memories made of them, forgotten (text, full-text document, vector)
    directory: dict[str, int] = field(default_factory=dict)  # identities, groups, requests, inbox, outbox rows
    sources: int = 0  # excerpts of their words (taints, approvals, process rows) emptied
    anonymised: Any = None  # managers.anonymise.Anonymised: their name elsewhere (the door finishes it: `.change`)


@dataclass(frozen=True)
class PersonView:
    id: int
    name: str
    role: str
    preferred_channel: str | None
    language: str | None
    quiet_hours: str | None
    about: str
    added_by: str
    identities: tuple[tuple[str, str], ...]  # (channel, address)
    last_channel: str | None
    groups: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "role": self.role,
            "preferred_channel": self.preferred_channel,
            "language": self.language,
            "quiet_hours": self.quiet_hours,
            "about": self.about,
            "added_by": self.added_by,
            "identities": [{"channel": c, "address": a} for c, a in self.identities],
            "last_channel": self.last_channel,
            "groups": list(self.groups),
        }


@dataclass(frozen=True)
class GroupView:
    """A named group of the persona's humans."""

    id: int
    name: str
    description: str


@dataclass(frozen=True)
class MemberView:
    """A person as a group lists them."""

    id: int
    name: str
    role: str


@dataclass(frozen=True)
class RequestView:
    """A contact request as the owner should see it (the People page, the API)."""

    request: ContactRequest
    claims: Person | None  # the known person whose address an unverified sender used (None: no claim)
    unverified: str  # why the channel could not vouch for the sender ("" = it could)
    lookalike: str  # why the sender may pose as someone known ("" = no sign of it)
    dropped: int  # their messages dropped over the hold caps
    held: tuple[str, ...] = field(default_factory=tuple)  # the held texts, oldest first, for the owner to read

    @property
    def can_accept(self) -> bool:
        return self.claims is None

    @property
    def can_vouch(self) -> bool:
        """The owner may take it in as their own: it claims an owner's address."""
        return self.claims is not None and self.claims.role == "owner"


def name_key(text: str) -> str:
    """A name as it reads: compatibility forms folded (NFKC: full-width, ligatures), accents, format characters
    (zero-width joiners…) and everything but letters and digits left out, case folded."""
    decomposed = unicodedata.normalize("NFKD", text)
    kept = "".join(c for c in decomposed if unicodedata.category(c)[0] in "LN")
    return unicodedata.normalize("NFKC", kept).casefold()


def _name_words(text: str) -> list[str]:
    return [key for word in re.split(r"[\s\W_]+", unicodedata.normalize("NFKC", text)) if (key := name_key(word))]


def reads_as(display_name: str, name: str) -> bool:
    """Whether `display_name` reads as `name`: the whole of it, or a run of its words (so "Ada (owner)" reads as Ada,
    "Adam" does not), compared as `name_key`s or as Unicode confusables (UTS #39: a Cyrillic "Аda" reads as "Ada")."""
    want = _name_words(name)
    if not want:
        return False
    words = _name_words(display_name)
    runs = {"".join(words)} | {"".join(words[i : i + len(want)]) for i in range(len(words) - len(want) + 1)}
    target = "".join(want)
    if target in runs:
        return True
    import confusables  # its Unicode data loads on first use

    return any(len(run) == len(target) and confusables.is_confusable(run, target) for run in runs if run)


class PeopleManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    # -- who is who ------------------------------------------------------------------------------------------------

    def owner(self) -> Person:
        """The (first) owner; made from the settings' `user_name` when the database has none yet."""
        owners = self.repos.people.owners()
        if owners:
            return owners[0]
        settings = self.house.deps.settings
        name = settings.user_name
        return self.repos.people.add(name, role="owner", added_by="operator")

    def get(self, person_id: int) -> Person:
        person = self.repos.people.get(person_id)
        if person is None:
            raise NotFound(f"no person {person_id}")
        return person

    def find(self, who: str | int) -> Person:
        """A person by id ("3"), by name, or "user"/"owner" for the owner; NotFound otherwise."""
        text = str(who).strip()
        if text.lower() in ("user", "owner", "human", "my human"):
            return self.owner()
        if text.isdigit():
            return self.get(int(text))
        person = self.repos.people.by_name(text)
        if person is None:
            raise NotFound(f"no person named {text!r} (users.list shows who I know)")
        return person

    def identify(self, channel: str, address: str) -> Person | None:
        identity = self.repos.people.identity(channel, address)
        return self.repos.people.get(identity.person_id) if identity is not None else None

    def view(self, person: Person) -> PersonView:
        identities = self.repos.people.identities(person.id)
        last = self.repos.people.last_identity(person.id)
        return PersonView(
            id=person.id,
            name=person.name,
            role=person.role,
            preferred_channel=person.preferred_channel,
            language=person.language,
            quiet_hours=person.quiet_hours,
            about=person.about,
            added_by=person.added_by,
            identities=tuple((i.channel, i.address) for i in identities),
            last_channel=last.channel if last is not None else None,
            groups=tuple(self.repos.people.groups_of([person.id])[person.id]),
        )

    def list(self) -> builtins.list[PersonView]:
        self.owner()
        return [self.view(p) for p in self.repos.people.all()]

    def names(self, person_ids: builtins.list[int]) -> dict[int, tuple[str, str]]:
        return self.repos.people.names(person_ids)

    def is_owner(self, person_id: int | None) -> bool:
        if person_id is None:
            return False
        person = self.repos.people.get(person_id)
        return person is not None and person.role == "owner"

    def require_owner(self, person_id: int | None, what: str) -> None:
        """PeopleError unless `person_id` is an owner (None: the operator at the web page or terminal — the
        owner's own door)."""
        if person_id is not None and not self.is_owner(person_id):
            raise PeopleError(f"only an owner {what}")

    # -- changes (the operator's doors, or the persona's after the owner's approval) ---------------------------------

    def add(
        self,
        name: str,
        *,
        role: str = "guest",
        preferred_channel: str | None = None,
        language: str | None = None,
        quiet_hours: str | None = None,
        about: str = "",
        by: str = "operator",
    ) -> Person:
        self.owner()  # the owner comes first (a new database's first person)
        name = " ".join(str(name).split())
        if not 1 <= len(name) <= 120:
            raise PeopleError("a name is 1 to 120 characters")
        self._check(role=role, quiet_hours=quiet_hours)
        if self.repos.people.by_name(name) is not None:
            raise PeopleError(f"there is already a person named {name!r}")
        if role == "owner" and not by.startswith(("operator", "web", "cli")):
            raise PeopleError("only the operator makes another owner")
        return self.repos.people.add(
            name,
            role=role,
            added_by=by,
            preferred_channel=preferred_channel,
            language=language,
            quiet_hours=quiet_hours,
            about=about,
        )

    def update(self, who: str | int, *, by: str = "operator", **changes: Any) -> Person:
        person = self.find(who)
        allowed = {"name", "role", "preferred_channel", "language", "quiet_hours", "about"}
        unknown = set(changes) - allowed
        if unknown:
            raise PeopleError(f"unknown field(s) {sorted(unknown)}; one of {sorted(allowed)}")
        changes = {k: v for k, v in changes.items() if v is not None}
        self._check(role=changes.get("role"), quiet_hours=changes.get("quiet_hours") or None)
        if "role" in changes and changes["role"] != person.role:
            if not by.startswith(("operator", "web", "cli")) and "owner" in (changes["role"], person.role):
                raise PeopleError("only the operator changes who is an owner")
            if person.role == "owner" and len(self.repos.people.owners()) == 1:
                raise PeopleError("the last owner stays an owner (make another owner first)")
        if changes.get("quiet_hours") == "":
            changes["quiet_hours"] = None
        for key, value in changes.items():
            setattr(person, key, value)
        self.repos.session.flush()
        return person

    def add_identity(self, who: str | int, channel: str, address: str) -> PersonIdentity:
        person = self.find(who)
        channel, address = channel.strip(), address.strip()
        if not channel or not address:
            raise PeopleError("an identity needs a channel and an address")
        taken = self.repos.people.identity(channel, address)
        if taken is not None:
            if taken.person_id == person.id:
                return taken
            raise PeopleError(f"{address} on {channel} is person {taken.person_id} already")
        return self.repos.people.add_identity(person.id, channel, address)

    # -- groups (HMP `users_group`) ---------------------------------------------------------------------------------

    def groups(self) -> builtins.list[tuple[GroupView, builtins.list[MemberView]]]:
        """Every group with its members."""
        return [
            (frozen(GroupView, g), frozen_all(MemberView, self.repos.people.members(g.id)))
            for g in self.repos.people.groups()
        ]

    def _group(self, name: str) -> PeopleGroup:
        found = self.repos.people.group(name)
        if found is None:
            raise NotFound(f"no group named {name!r} (users.groups shows them)")
        return found

    def group(self, name: str) -> GroupView:
        return frozen(GroupView, self._group(name))

    def add_group(self, name: str, description: str = "") -> GroupView:
        name = " ".join(str(name).split())
        if not GROUP_NAME.match(name):
            raise PeopleError("a group's name is 1 to 120 letters, digits, spaces, '.', '-' or \"'\"")
        if self.repos.people.group(name) is not None:
            raise PeopleError(f"there is already a group named {name!r}")
        return frozen(GroupView, self.repos.people.add_group(name, str(description)[:2000]))

    def delete_group(self, name: str) -> GroupView:
        """The group goes; its members stay who they are."""
        group = self._group(name)
        gone = frozen(GroupView, group)
        self.repos.people.delete_group(group)
        return gone

    def join(self, who: str | int, group: str) -> bool:
        """The person into the group (True: they were not in it)."""
        return self.repos.people.join(self.group(group).id, self.find(who).id)

    def leave(self, who: str | int, group: str) -> bool:
        return self.repos.people.leave(self.group(group).id, self.find(who).id)

    # -- forgetting a person ----------------------------------------------------------------------------------------

    def delete(self, who: str | int, *, by: str = "operator") -> Forgotten:
        """Forget a person: they leave the directory (identities, groups, contact requests, the channels' inbox and
        outbox rows of theirs); their notes — and the persona's notes to them — are deleted for good with the
        conversation memories made of them (text, full-text document, vector, and the neighbours' copies);
        excerpts of their words kept as provenance are emptied; and their name, wherever else it is (what others
        said of them, the persona's thoughts, the tiers, the history), becomes a placeholder — the anonymisation the
        owner can undo with their key (their words cannot come back). The door finishes what is outside this unit
        of work: checkpoints, vectors, files (graph/forgetting.py, with `Forgotten.anonymised.change`).
        An owner is never deleted by the persona, and the last owner by no one."""
        person = self.find(who)
        operator = by.startswith(("operator", "web", "cli"))
        if person.role == "owner" and (not operator or len(self.repos.people.owners()) == 1):
            raise PeopleError("the last owner cannot be deleted" if operator else "only the operator deletes an owner")
        name, person_id = person.name, person.id
        # their name first, while the directory still says they are a person ([PERSON_n])
        anonymised = self.house.anonymise.anonymise(names=[name, *name.split()], auto=False)
        notes = self.repos.notes.by_author(person_id)
        directory = self.repos.people.delete_person(person)
        notes += directory.pop("notes")
        done = Forgotten(name=name, directory=directory, anonymised=anonymised)
        done.memories = self.repos.items.forget(f"note:{n}" for n in notes)
        self.repos.episodes.purge_summaries_of(f"message:note:{n}" for n in notes)  # rebuilt without their words
        done.notes = self.repos.notes.purge(notes)
        done.sources = sum(self.repos.scrub.sweep(_forgetting_words_of(person_id)).rows.values())
        return done

    @staticmethod
    def _check(*, role: str | None, quiet_hours: str | None) -> None:
        if role is not None and role not in ROLES:
            raise PeopleError(f"role is one of {', '.join(ROLES)}, not {role!r}")
        if quiet_hours:
            try:
                parse_hours(quiet_hours)
            except ValueError as exc:
                raise PeopleError(str(exc)) from None

    # -- where and when to reach them ---------------------------------------------------------------------------

    def reach(self, person: Person) -> PersonIdentity | None:
        """Where to write to them: their preferred channel, else where they last wrote; None: only the web page."""
        if person.preferred_channel and person.preferred_channel != WEB:
            for identity in self.repos.people.identities(person.id):
                if identity.channel == person.preferred_channel:
                    return identity
        if person.preferred_channel == WEB:
            return None
        return self.repos.people.last_identity(person.id)

    def quiet_now(self, person: Person, now: datetime) -> bool:
        if not person.quiet_hours:
            return False
        settings = self.house.deps.settings
        zone = settings.zone()
        assert zone is not None
        return in_quiet_hours(now, zone, person.quiet_hours)

    # -- contact requests ---------------------------------------------------------------------------------------

    def contact_requests(self, status: str | None = "pending") -> builtins.list[ContactRequest]:
        return self.repos.people.contact_requests(status)

    def lookalike(self, channel: str, address: str, display_name: str) -> str:
        """Why a sender's display name may pose as someone known ("" when it does not): it reads as a known person's
        name, or it shows a known person's address; a person's own identity is never their impostor."""
        own = self.identify(channel, address)
        shown = unicodedata.normalize("NFKC", display_name).casefold()
        for person in self.repos.people.all():
            if own is not None and person.id == own.id:
                continue
            if reads_as(display_name, person.name):
                return f"its name reads as {person.name}'s ({person.role})"
            for identity in self.repos.people.identities(person.id):
                if identity.address.casefold() in shown and identity.address.casefold() != address.casefold():
                    return f"its name shows {identity.address}, {person.name}'s address ({person.role})"
        return ""

    def request_views(self, status: str | None = "pending") -> builtins.list[RequestView]:
        dropped = self.repos.channels.dropped_over_caps()
        views = []
        for request in self.contact_requests(status):
            claims = self.identify(request.channel, request.address) if request.warning else None
            reason = next(
                (
                    r.removeprefix("unverified: ")
                    for r in self.repos.channels.reasons(request.id)
                    if r.startswith("unverified: ")
                ),
                "",
            )
            held = tuple(row.held_text or "" for row in self.repos.channels.held(request.id))
            views.append(
                RequestView(
                    request=request,
                    claims=claims,
                    unverified=reason if request.warning else "",
                    lookalike=self.lookalike(request.channel, request.address, request.sender_name),
                    dropped=dropped.get(request.id, (0, 0))[0],
                    held=held,
                )
            )
        return views

    def dropped_before_requests(self) -> tuple[int, int]:
        """(messages, senders) dropped because the channel's waiting contact requests were at their cap."""
        return self.repos.channels.dropped_over_caps().get(None, (0, 0))

    def accept(
        self,
        request_id: int,
        *,
        by_person: int | None = None,
        name: str | None = None,
        role: str = "guest",
        now: datetime,
    ) -> Person:
        """The owner lets the sender in: a person (or `name`, an existing one, gets this identity) and their held
        messages become notes from them."""
        self.require_owner(by_person, "accepts a contact request")
        request = self._pending(request_id)
        taken = self.repos.people.identity(request.channel, request.address)
        if request.warning and taken is not None:
            claimed = self.get(taken.person_id)
            whose = claimed.name
            mine = " or, if it was you, take it in as your own (vouch)" if claimed.role == "owner" else ""
            raise PeopleError(
                f"{request.address} on {request.channel} is {whose}'s, and this sender failed "
                f"authentication: it cannot be let in as {whose} (refuse it{mine}; {whose}'s own "
                "authenticated mail arrives as theirs)"
            )
        existing = self.repos.people.by_name(name) if name else None
        person = existing or self.add(
            name or request.sender_name or request.address, role=role, by=f"contact request {request.id}"
        )
        if self.repos.people.identity(request.channel, request.address) is None:
            identity = self.repos.people.add_identity(person.id, request.channel, request.address, request.conversation)
            identity.last_seen_at = now
        request.status, request.person_id, request.decided_at = "accepted", person.id, now
        request.decided_by = "operator" if by_person is None else f"person {by_person}"
        self.house.channels.release_held(request, person)
        return person

    def vouch(self, request_id: int, *, by_person: int | None = None, now: datetime) -> Person:
        """ "It was me": an owner, at their own door (the web page, the terminal), takes in a held request that
        claims their own address but failed authentication — its messages become notes from them, as if they had
        typed them there. Only for an owner's own address: no one vouches for someone else's mail."""
        self.require_owner(by_person, "vouches for a message")
        request = self._pending(request_id)
        taken = self.repos.people.identity(request.channel, request.address)
        claimed = self.get(taken.person_id) if taken is not None else None
        if claimed is None or claimed.role != "owner" or (by_person is not None and by_person != claimed.id):
            raise PeopleError(f"contact request {request_id} does not claim your own address: only refuse or accept it")
        request.status, request.person_id, request.decided_at = "accepted", claimed.id, now
        request.decided_by = ("operator" if by_person is None else f"person {by_person}") + " (vouched)"
        self.house.channels.release_held(request, claimed, vouched=True)
        return claimed

    def refuse(self, request_id: int, *, by_person: int | None = None, now: datetime) -> ContactRequest:
        """The owner refuses: the held texts are deleted; later messages from that sender are dropped."""
        self.require_owner(by_person, "refuses a contact request")
        request = self._pending(request_id)
        request.status, request.decided_at = "refused", now
        request.decided_by = "operator" if by_person is None else f"person {by_person}"
        self.house.channels.drop_held(request)
        return request

    def _pending(self, request_id: int) -> ContactRequest:
        request = self.repos.people.contact_request(request_id)
        if request is None:
            raise NotFound(f"no contact request {request_id}")
        if request.status != "pending":
            raise PeopleError(f"contact request {request_id} was {request.status} already")
        return request


def _forgetting_words_of(person_id: int) -> Any:
    """A change for the sweep: a provenance source (taints, approvals, process rows) quoting this person keeps that
    it came from someone, not what they said."""

    def change(value: Any) -> Any:
        if isinstance(value, list):
            return [change(v) for v in value]
        if isinstance(value, dict):
            if value.get("person") == person_id and value.get("excerpt"):
                return {**value, "excerpt": "", "ref": "a forgotten person's words"}
            return {k: change(v) for k, v in value.items()}
        return value

    return change


__all__ = [
    "RIGHTS",
    "ROLES",
    "Forgotten",
    "PeopleError",
    "right",
    "PeopleManager",
    "PersonView",
    "RequestView",
    "name_key",
    "reads_as",
]
