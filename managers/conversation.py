"""The conversation: a human's words from every door, in one way; one conversation per person across doors; whom a
tick answers, and what waits for the owner.

**One way in.** Every door — the Talk page, the API, an MCP client, `run.py say`, a voice message, Matrix,
Telegram, e-mail, and another agent over A2A or the mesh — hands a message to `hear(Words(…))`. It becomes a note
with its author, its person (the conversation it belongs to), its door and its thread; the source follows from the
door (memory/note_kinds.py). Unless the settings leave the author's role out (`conversation.remember`), it is also
a conversation memory at once — searchable by `memory.search`, with its author's name, in its conversation's episode
and tagged with it (`person:<id>` or `peer:<name>`), so the tick that answers a guest finds their own words and
nothing else (managers/audience.py). What arrived from someone other than the owner is marked as such (its memory's
`meta.origin`: memory/provenance.py reads it). The persona's messages go out through `tell`, which keeps them in the
same conversation, remembered the same way: the persona remembers what both said.

**Conversations.** A conversation is (persona, person) across doors: `turns` is its last turns (their words and what
the persona sent them, each with its door), `threads` every person's, for the Talk page and the API.

**Whom a tick answers.** `answering(notes)`: the audience of the most urgent waiting note — the owner before
trusted people, then guests, then peers, the oldest first — and its notes; the others wait for the next tick. A
tick with no note from anyone is the persona alone.

**What waits for the owner.** `notify_owner`: a new contact request, a pending approval, a message a channel
refused — once each, on the owner's channel (held past their quiet hours: it is unprompted); the Talk page's badges
show them too."""

from __future__ import annotations

import builtins
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from managers.audience import ALONE, Audience, Role, conversation_tag
from managers.errors import NotFound, Refused
from memory.clock import as_utc
from memory.models import Note, Person
from memory.note_kinds import CHANNEL_DOORS, HUMAN_SOURCES, PEER_DOORS, SOURCE_OF_DOOR, Door, NoteSource, door_of
from memory.repositories.notes import OUTGOING
from memory.store import record_turn

if TYPE_CHECKING:
    from managers import Managers

MAIN_THREAD = "main"  # the loop's thread, which answers every conversation
MAX_TEXT = 100_000  # a door caps its own input below this; a longer text is cut here, never refused
ROLE_ORDER = {Role.OWNER: 0, Role.TRUSTED: 1, Role.GUEST: 2, Role.PEER: 3}
OWNERS_DOORS = (Door.WEB, Door.API, Door.MCP, Door.VOICE, Door.CLI)  # the owner's own page, API and terminal


@dataclass(frozen=True)
class Words:
    """What a door heard, as the conversation takes it."""

    text: str
    door: Door
    person_id: int | None = None  # the author; None at the owner's own doors (the page, the API, MCP, the terminal)
    peer: str | None = None  # another agent's name (A2A, the mesh): its own kind of author, no person
    channel: str | None = None  # the channel's configured name (its `via:` tag; the door is its kind)
    priority: int = 0
    tags: Sequence[str] = ()
    at: datetime | None = None
    thread_id: str = MAIN_THREAD


@dataclass(frozen=True)
class Heard:
    note_id: int
    person_id: int | None
    peer: str | None
    door: Door
    remembered: bool  # a conversation memory too (searchable with its author)


@dataclass(frozen=True)
class Turn:
    """One turn of a conversation: theirs or the persona's."""

    note_id: int
    mine: bool  # the persona's message to them
    author: str  # their name, or the persona's
    text: str
    door: Door | None
    at: datetime
    read: bool
    tags: tuple[str, ...] = ()
    person_id: int | None = None  # the conversation's person (None: a peer's, or a message to nobody known)
    peer: str | None = None
    name: str = ""  # the conversation's person or peer
    role: str | None = None  # owner | trusted | guest | peer
    llm_id: str | None = None  # the model that wrote the persona's message

    @property
    def thread(self) -> str | None:
        """The conversation's key: the person's id, or `peer:<name>`."""
        return str(self.person_id) if self.person_id is not None else f"peer:{self.peer}" if self.peer else None


@dataclass(frozen=True)
class ThreadView:
    """A conversation as the Talk page lists it."""

    person_id: int | None
    peer: str | None
    name: str
    role: str
    door: Door | None  # the door of its newest turn
    last_text: str
    last_at: datetime
    unread: int
    turns: int

    @property
    def key(self) -> str:
        return str(self.person_id) if self.person_id is not None else f"peer:{self.peer}"


@dataclass(frozen=True)
class Answering:
    """Whom a tick answers and their waiting notes; the notes of anyone else wait for a later tick."""

    audience: Audience = ALONE
    notes: tuple[Any, ...] = ()
    others: tuple[Any, ...] = field(default=())  # the system's and the persona's tasks' notes (its own work)


def _door(note: Note) -> Door | None:
    """A note's door: as it was stored, or (a note from before doors were kept) from its source and `via:` tag."""
    if note.door is not None and note.door in Door._value2member_map_:
        return Door(note.door)
    return door_of(note.source, note.tags)


def peer_of(note: Any) -> str | None:
    """The peer a note came from (`from:<name>`) or went to (`to:<name>`, a peer's message has no person)."""
    tags = [t for t in getattr(note, "tags", None) or [] if isinstance(t, str)]
    if getattr(note, "source", None) == NoteSource.PEER:
        return next((t[5:] for t in tags if t.startswith("from:")), None)
    return None


class ConversationManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    # -- in: the one way ------------------------------------------------------------------------------------------

    def hear(self, words: Words) -> Heard:
        """Store a message as a note from its author, in its conversation, and remember it (module doc). Refused:
        an empty text, a person unknown, a peer's words without its name, a door that is not the author's."""
        text = words.text.strip()[:MAX_TEXT]
        if not text:
            raise Refused("an empty message")
        door = Door(words.door)
        source = SOURCE_OF_DOOR[door]
        people = self.house.people
        person: Person | None = None
        if door in PEER_DOORS:
            if not words.peer:
                raise Refused(f"a message over {door} needs the peer's name")
            role = Role.PEER
        else:
            person = people.owner() if words.person_id is None else people.get(words.person_id)
            if door in OWNERS_DOORS and person.role != Role.OWNER:
                raise Refused(f"{door} is my owner's own door, not {person.name}'s")
            role = Role(person.role)
        tags = list(dict.fromkeys([*self._door_tags(door, words, role), *words.tags]))
        now = as_utc(words.at) if words.at is not None else self.house.deps.clock()
        note = self.repos.notes.add(
            text,
            source=source,
            priority=words.priority,
            tags=tags,
            thread_id=words.thread_id,
            created_at=now,
            author_id=person.id if person is not None else None,
            person_id=person.id if person is not None else None,
            door=door.value,
        )
        remembered = self._remember(
            note,
            person.name if person is not None else str(words.peer),
            role,
            person.id if person is not None else None,
            words.peer,
            origin=self._origin(door, role),
        )
        return Heard(note.id, note.person_id, words.peer, door, remembered)

    @staticmethod
    def _door_tags(door: Door, words: Words, role: Role) -> builtins.list[str]:
        if door in CHANNEL_DOORS:
            return [f"via:{words.channel or door.value}", f"role:{role.value}"]
        if door in PEER_DOORS:  # the door may name the peer better (the mesh: the owner's name for it and its DID)
            named = any(isinstance(t, str) and t.startswith("from:") for t in words.tags)
            return [f"via:{door.value}"] + ([] if named else [f"from:{words.peer}"])
        return ["via:mcp"] if door == Door.MCP else []

    @staticmethod
    def _origin(door: Door, role: Role) -> str | None:
        """What arrived from outside, for provenance (memory/provenance.py UNTRUSTED): None for the owner's words."""
        if role == Role.PEER:
            return "peer"
        if door == Door.MCP:
            return "mcp_client"
        return None if role == Role.OWNER else "channel"

    def _remember(
        self, note: Note, author: str, role: Role, person_id: int | None, peer: str | None, *, origin: str | None = None
    ) -> bool:
        settings = self.house.deps.settings
        if role.value not in settings.conversation.remember:
            return False
        tag = conversation_tag(person_id, peer)
        meta: dict[str, Any] = {"door": note.door, "note": note.id}
        if origin:
            meta["origin"] = origin
        record_turn(
            self.repos,
            ref=f"note:{note.id}",
            text=note.text,
            author=author,
            episode=f"conversation:{tag}",
            thread_id=note.thread_id,
            tags=[tag, *[t for t in note.tags or [] if isinstance(t, str)]],
            created_at=note.created_at,
            meta=meta,
        )
        return True

    def human_words(self, note_ids: Sequence[int]) -> builtins.list[tuple[int, str]]:
        """(id, text) of the notes among `note_ids` a human wrote, in their order."""
        return [(n.id, n.text) for n in self.repos.notes.many(list(note_ids)) if n.source in HUMAN_SOURCES]

    def remember_unrecorded_of(self, note_ids: Sequence[int]) -> int:
        """`remember_unrecorded` for the notes of these ids (a tick's incoming notes)."""
        return self.remember_unrecorded(self.repos.notes.many(list(note_ids))) if note_ids else 0

    def remember_unrecorded(self, notes: Sequence[Note]) -> int:
        """The human's and peers' notes among `notes` that came in by another path than `hear` (written before it
        existed, or straight into the table by a tool) become conversation memories now, as `hear` makes them; how
        many did."""
        done = 0
        for note in notes:
            if (
                note.source not in (*HUMAN_SOURCES, NoteSource.PEER)
                or self.repos.items.find("message", f"note:{note.id}") is not None
            ):
                continue
            audience = self.audience_of(note)
            if audience.role == Role.SELF:
                continue
            door = _door(note) or Door.WEB
            done += self._remember(
                note,
                audience.name,
                audience.role,
                audience.person_id,
                audience.peer,
                origin=self._origin(door, audience.role),
            )
        return done

    # -- out: what the persona says ----------------------------------------------------------------------------------

    def tell(
        self,
        text: str,
        *,
        person: Person | None = None,
        peer: str | None = None,
        door: Door | None = None,
        label: str | None = None,
        speaker: str = "",
        thread_id: str | None = None,
        llm_id: str | None = None,
        now: datetime | None = None,
        tags: Sequence[str] = (),
    ) -> Turn:
        """The persona's message to a person (or a peer), kept in their conversation as an outgoing note and
        remembered with `speaker` (the persona's name) as its author; the turn it is. `label`: the `to:` tag
        (default: the person's name, "user" for the owner as older notes have it)."""
        moment = now or self.house.deps.clock()
        to = label or (
            peer
            if peer
            else (
                "user"
                if person is not None and person.role == Role.OWNER
                else person.name
                if person is not None
                else "user"
            )
        )
        note = self.repos.notes.add(
            text,
            source=NoteSource.PERSONA,
            thread_id=thread_id,
            llm_id=llm_id,
            read=True,
            tags=[OUTGOING, f"to:{to}", *tags],
            created_at=moment,
            person_id=person.id if person is not None else None,
            door=door.value if door is not None else None,
        )
        settings = self.house.deps.settings
        me = speaker or settings.name or "I"
        if person is not None or peer:
            self._remember(
                note, me, Role.SELF, person.id if person is not None else None, None if person is not None else peer
            )
        name = person.name if person is not None else peer or ""
        return self._turn(note, name, me, person.role if person is not None else Role.PEER.value)

    # -- conversations ---------------------------------------------------------------------------------------------

    def turns(
        self, audience: Audience, *, limit: int = 12, before_id: int | None = None, after_id: int | None = None
    ) -> tuple[Turn, ...]:
        """The conversation with `audience` (a person or a peer), oldest first: the newest `limit` turns (below
        `before_id`), or the first `limit` after `after_id`. The persona alone has none."""
        if audience.person_id is not None:
            rows = self.repos.notes.conversation(
                audience.person_id,
                limit=limit,
                before_id=before_id,
                after_id=after_id,
                unaddressed=audience.role == Role.OWNER,
            )
            name = audience.name or self.house.people.get(audience.person_id).name
        elif audience.peer:
            rows = [
                n
                for n in self.repos.notes.peer_conversation(audience.peer, limit=limit, before_id=before_id)
                if after_id is None or n.id > after_id
            ]
            name = audience.peer
        else:
            return ()
        settings = self.house.deps.settings
        me = settings.name or "I"
        return tuple(self._turn(n, name, me, audience.role.value) for n in rows)

    @staticmethod
    def _turn(note: Note, name: str, me: str, role: str | None = None) -> Turn:
        mine = note.source == NoteSource.PERSONA
        door = _door(note)
        tags = tuple(t for t in note.tags or [] if isinstance(t, str))
        peer = peer_of(note) or (
            next((t[3:] for t in tags if t.startswith("to:")), None) if mine and note.person_id is None else None
        )
        return Turn(
            note_id=note.id,
            mine=mine,
            author=me if mine else name,
            text=note.text,
            door=door,
            at=as_utc(note.created_at),
            read=bool(note.read),
            tags=tags,
            person_id=note.person_id,
            peer=None if note.person_id is not None or peer == "user" else peer,
            name=name,
            role=Role.PEER.value if peer and note.person_id is None and peer != "user" else role,
            llm_id=note.llm_id,
        )

    def listing(self, thread: str | None = None, *, limit: int = 50, after_id: int | None = None) -> tuple[Turn, ...]:
        """The turns of one conversation (`thread`: a person's id, or `peer:<name>`), or of every one (None), oldest
        first: the newest `limit`, or the first `limit` after `after_id`. NotFound for an unknown person."""
        if thread is not None:
            audience = self.audience_of_thread(thread)
            return self.turns(audience, limit=limit, after_id=after_id)
        rows = [
            n
            for n in self.repos.notes.list(limit=limit * 4, after_id=after_id)
            if n.source in (*HUMAN_SOURCES, NoteSource.PEER)
            or (n.source == NoteSource.PERSONA and OUTGOING in (n.tags or []))
        ]
        rows = rows[:limit] if after_id is not None else rows[-limit:]
        people = self.house.people.names([n.person_id for n in rows if n.person_id is not None])
        settings = self.house.deps.settings
        me = settings.name or "I"
        out = []
        for note in rows:
            name, role = (
                people.get(note.person_id, ("", None))
                if note.person_id is not None
                else (peer_of(note) or "", Role.PEER.value if note.source == NoteSource.PEER else None)
            )
            out.append(self._turn(note, name, me, role))
        return tuple(out)

    def audience_of_thread(self, thread: str) -> Audience:
        """The audience a thread's key names: a person's id ("3"), or `peer:<name>`; NotFound otherwise."""
        if thread.startswith("peer:") and thread[5:]:
            return Audience(Role.PEER, peer=thread[5:], name=thread[5:])
        if not thread.isdigit():
            raise NotFound(f"no conversation {thread!r}: a person's id, or peer:<name>")
        return self.audience_for(self.house.people.get(int(thread)))

    def unread_count(self) -> int:
        return len(self.repos.notes.unread_human_ids(limit=500))

    def spoken_before(self, note_id: int) -> bool:
        """Whether the human's last note before `note_id` was a voice message (a thread that starts mid-talk)."""
        earlier = self.repos.notes.last_human_before(note_id)
        return earlier is not None and "voice" in (earlier.tags or [])

    def reach_out_windows(self, kept: int = 50) -> builtins.list[tuple[datetime, datetime, dict[str, Any]]]:
        """The ticks in which a drive offered the persona to write unprompted (persona/drives.py): (start, end,
        the offer), so a message sent then is shown as unprompted, with its drive."""
        windows = []
        for offer in self.repos.config.reach_outs[-kept:]:
            tick = self.repos.ticks.get(offer.get("thread") or MAIN_THREAD, int(offer.get("tick") or 0))
            if tick is not None:
                end = tick.finished_at or self.house.deps.clock()
                windows.append((as_utc(tick.started_at), as_utc(end), offer))
        return windows

    def threads(self, *, peers: bool = True) -> builtins.list[ThreadView]:
        """Every conversation, the most recent first: each person's (by every door), then each peer's."""
        owner = self.house.people.owner()
        listed = self.repos.notes.conversations()
        names = self.house.people.names([p for p, *_ in listed])
        newest = {n.id: n for n in self.repos.notes.many([last for _, last, _, _ in listed])}
        out = []
        for person_id, last_id, count, unread in listed:
            note = newest.get(last_id)
            if note is None:
                continue
            name, role = names.get(person_id, (f"person {person_id}", "guest"))
            out.append(
                ThreadView(
                    person_id,
                    None,
                    name,
                    role,
                    self._turn(note, name, "").door,
                    note.text,
                    as_utc(note.created_at),
                    unread,
                    count,
                )
            )
        if not any(t.person_id == owner.id for t in out):  # the owner's page always has its own thread
            out.append(ThreadView(owner.id, None, owner.name, owner.role, None, "", as_utc(owner.created_at), 0, 0))
        if peers:
            out += self._peer_threads()
        return out

    def _peer_threads(self, scan: int = 500) -> builtins.list[ThreadView]:
        seen: dict[str, ThreadView] = {}
        for note in self.repos.notes.list(source=NoteSource.PEER, limit=scan):
            peer = peer_of(note)
            if not peer:
                continue
            known = seen.get(peer)
            unread = (known.unread if known else 0) + (0 if note.read else 1)
            seen[peer] = ThreadView(
                None,
                peer,
                peer,
                Role.PEER.value,
                door_of(note.source, note.tags),
                note.text,
                as_utc(note.created_at),
                unread,
                (known.turns if known else 0) + 1,
            )
        return sorted(seen.values(), key=lambda t: t.last_at, reverse=True)

    def audience_of(self, note: Any) -> Audience:
        """Whom answering `note` speaks to: its author (a person, or a peer), else the persona alone."""
        peer = peer_of(note)
        if peer:
            return Audience(Role.PEER, peer=peer, name=peer)
        person_id = getattr(note, "person_id", None) or getattr(note, "author_id", None)
        if getattr(note, "source", None) not in HUMAN_SOURCES:
            return ALONE
        person = self.repos.people.get(person_id) if person_id is not None else self.house.people.owner()
        if person is None:
            return ALONE
        return self.audience_for(person)

    @staticmethod
    def audience_for(person: Person) -> Audience:
        try:
            role = Role(person.role)
        except ValueError:
            role = Role.GUEST
        return Audience(role, person_id=person.id, name=person.name)

    def answering(self, notes: Sequence[Any]) -> Answering:
        """Whom this tick answers (module doc) among the unread `notes`, and which of them it shows."""
        heard = [(self.audience_of(n), n) for n in notes]
        speaking = [(a, n) for a, n in heard if a.role != Role.SELF]
        if not speaking:
            return Answering(ALONE, (), tuple(notes))
        first, _ = min(speaking, key=lambda pair: (ROLE_ORDER[pair[0].role], -int(pair[1].priority or 0), pair[1].id))
        mine = tuple(n for a, n in speaking if a == first)
        others = tuple(n for a, n in heard if a.role == Role.SELF) if first.private else ()
        return Answering(first, mine, others)

    def newest_note_id(self) -> int:
        """The newest note's id (a later one means someone wrote since)."""
        return self.repos.notes.newest_id()

    def human_wrote_after(self, note_id: int) -> bool:
        """Whether an unread note from a human came after `note_id`."""
        return bool(self.repos.notes.human_after(note_id, read=False, limit=1))

    def waiting(self, exclude: Collection[int] = ()) -> builtins.list[int]:
        """The ids of the human's unread notes other than `exclude` (those a tick is answering now): someone waits."""
        return [i for i in self.repos.notes.unread_human_ids() if i not in exclude]

    def last_heard_at(self) -> datetime | None:
        """When a human last wrote, by any door."""
        at = self.repos.notes.latest_human_at()
        return as_utc(at) if at is not None else None

    # -- what waits for the owner ------------------------------------------------------------------------------------

    def notify_owner(
        self, key: str, text: str, *, now: datetime | None = None
    ) -> Literal["sent", "known", "web", "off"]:
        """Tell the owner once (`key`: what it is about, e.g. "contact:3") on their channel, past their quiet hours:
        `sent` (queued), `known` (told before), `web` (no channel: the page's badges say it), `off` (settings)."""
        settings = self.house.deps.settings
        if not settings.conversation.tell_owner:
            return "off"
        owner = self.house.people.owner()
        if self.house.people.reach(owner) is None:
            return "web"
        idempotency = f"notice:{key}"[:120]
        if self.repos.channels.by_key(idempotency) is not None:
            return "known"
        self.house.channels.send(owner, text, now=now or self.house.deps.clock(), unprompted=True, key=idempotency)
        return "sent"

    def waiting_for_owner(self) -> dict[str, int]:
        """What waits for the owner, for the badges: contact requests, approvals, refused messages, unread notes."""
        return {
            "contacts": len(self.house.people.contact_requests()),
            "approvals": len(self.house.consent.pending()),
            "refused": self.repos.channels.failed_count(),
            "unread": len(self.repos.notes.unread_human_ids(limit=100)),
        }


__all__ = ["MAIN_THREAD", "Answering", "ConversationManager", "Heard", "ThreadView", "Turn", "Words", "peer_of"]
