"""People (HMP `users`): the persona's humans — the owner (the one who answers approvals), trusted people and
guests — each with a name, an identity per channel, a preferred channel, a language and quiet hours.

Rules: there is always an owner (the single human of an older database became it in the v13 migration; a new
database gets one named after `user_name` when first asked); only an owner answers approvals and contact requests;
the persona never adds a person or an identity by itself (its `users.add`/`users.update` are modify_self: they run
after the owner's approval); a message from an unknown sender is held as a contact request — nothing of it reaches
a note, and so memory, until the owner accepts it (refused: its held texts are deleted); so is a sender the channel
could not authenticate, whatever address it claims — a request that claims someone's address cannot be accepted
as them."""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memory.models import ContactRequest, Person, PersonIdentity
from memory.repositories import NotFound
from persona.quiet_hours import in_quiet_hours, parse_hours

if TYPE_CHECKING:
    from managers import Managers

ROLES = ("owner", "trusted", "guest")
WEB = "web"  # the owner's own page and terminal: not a channel, no identity


class PeopleError(ValueError):
    """A refused change to the people (not the owner, unknown role, a name or identity taken)."""


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

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "role": self.role, "preferred_channel": self.preferred_channel,
                "language": self.language, "quiet_hours": self.quiet_hours, "about": self.about,
                "added_by": self.added_by, "identities": [{"channel": c, "address": a} for c, a in self.identities],
                "last_channel": self.last_channel}


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
        name = settings.user_name if settings is not None else "User"
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
        return PersonView(id=person.id, name=person.name, role=person.role, preferred_channel=person.preferred_channel,
                          language=person.language, quiet_hours=person.quiet_hours, about=person.about,
                          added_by=person.added_by, identities=tuple((i.channel, i.address) for i in identities),
                          last_channel=last.channel if last is not None else None)

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

    def add(self, name: str, *, role: str = "guest", preferred_channel: str | None = None,
            language: str | None = None, quiet_hours: str | None = None, about: str = "",
            by: str = "operator") -> Person:
        self.owner()  # the owner comes first (a new database's first person)
        name = " ".join(str(name).split())
        if not 1 <= len(name) <= 120:
            raise PeopleError("a name is 1 to 120 characters")
        self._check(role=role, quiet_hours=quiet_hours)
        if self.repos.people.by_name(name) is not None:
            raise PeopleError(f"there is already a person named {name!r}")
        if role == "owner" and not by.startswith(("operator", "web", "cli")):
            raise PeopleError("only the operator makes another owner")
        return self.repos.people.add(name, role=role, added_by=by, preferred_channel=preferred_channel,
                                     language=language, quiet_hours=quiet_hours, about=about)

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
        zone = settings.zone() if settings is not None else now.tzinfo
        assert zone is not None
        return in_quiet_hours(now, zone, person.quiet_hours)

    # -- contact requests ---------------------------------------------------------------------------------------

    def contact_requests(self, status: str | None = "pending") -> builtins.list[ContactRequest]:
        return self.repos.people.contact_requests(status)

    def accept(self, request_id: int, *, by_person: int | None = None, name: str | None = None,
               role: str = "guest", now: datetime) -> Person:
        """The owner lets the sender in: a person (or `name`, an existing one, gets this identity) and their held
        messages become notes from them."""
        self.require_owner(by_person, "accepts a contact request")
        request = self._pending(request_id)
        taken = self.repos.people.identity(request.channel, request.address)
        if request.warning and taken is not None:
            whose = self.get(taken.person_id).name
            raise PeopleError(f"{request.address} on {request.channel} is {whose}'s, and this sender failed "
                              f"authentication: it cannot be let in as {whose} (refuse it; {whose}'s own "
                              "authenticated mail arrives as theirs)")
        existing = self.repos.people.by_name(name) if name else None
        person = existing or self.add(name or request.sender_name or request.address, role=role,
                                      by=f"contact request {request.id}")
        if self.repos.people.identity(request.channel, request.address) is None:
            identity = self.repos.people.add_identity(person.id, request.channel, request.address,
                                                      request.conversation)
            identity.last_seen_at = now
        request.status, request.person_id, request.decided_at = "accepted", person.id, now
        request.decided_by = "operator" if by_person is None else f"person {by_person}"
        self.house.channels.release_held(request, person)
        return person

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


__all__ = ["ROLES", "PeopleError", "PeopleManager", "PersonView"]
