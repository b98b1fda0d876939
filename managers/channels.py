"""Channels' inbox and outbox: exactly once, both ways (the channels themselves are doors: channels/).

In: every message is recorded once per (channel, platform id) — a repeat (a fetch again after a crash before its
cursor was stored) is dropped. A known person's message goes the one way in (managers/conversation.py `hear`): a
note from them in their conversation, its door the channel's kind, tagged with the channel and their role (the
prompt fences it as data), and a conversation memory; an unknown sender's is held for a
contact request (nothing of it in a note, so nothing in memory, until the owner accepts; the owner is told once,
and the stranger gets one polite automatic line unless `conversation.stranger_reply` is off) — and so is a sender the
channel cannot vouch for (an e-mail whose From failed authentication: `Arrival.unverified`), whatever address it
claims, the request saying so ("claims to be ann@example.org (Ann's address, owner) but failed authentication"); a
sender over the
channel's rate limit is dropped, a text over its size cap is cut. What is held is capped (`max_held_per_sender`,
`max_held_total`, `max_contact_requests` of the channel's entry): past a cap a message is dropped without its text,
counted where the owner sees the contact requests, and the first drop of each kind is logged. A message the channel
could not read (`Arrival.quarantined`) — or that the rules below cannot record — is set aside: an inbox row saying
why, shown to the owner, nothing of it kept, no one's; the batch around it and the cursor go on. Attachments are kept by
reference; a text document
within the channel's size cap that the owner sent goes to the knowledge base (their sending it is their consent),
anyone else's waits for the owner's approval (`kb.add_document`: approved, it joins the knowledge base with its
sender as its source; refused, its bytes are deleted and it stays a reference).

Out: a message to a person is an outbox row with an idempotency key given before the first attempt; the runner marks
it `sending` (committed) before it calls the platform, and a row found `sending` later (the process was killed
between sending and recording) is first looked up on the platform (`already_sent`, Matrix's transaction id), so it
is neither lost nor sent twice. An unprompted message waits past the person's quiet hours (`not_before`). A message
goes only where its person alone (with the persona) reads it: the last conversation of theirs the channel said was
private (`Arrival.private`), else the channel's own direct conversation with them (a direct Matrix room, the
Telegram chat with them, a mail to their address) — never a room they share with others because they last wrote
there. A message the channel refused for good is told to the owner."""

from __future__ import annotations

import builtins
import hashlib
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from managers import notices
from managers.consent import DOCUMENT_APPROVAL
from managers.conversation import Words
from managers.memory import MAIN_THREAD
from managers.people import right
from managers.speech import VOICE_TAG
from memory.models import ChannelInbox, ChannelOutbox, ContactRequest, Note, Person
from memory.note_kinds import CHANNEL_DOORS, HUMAN_SOURCES, Door, NoteSource
from persona.quiet_hours import parse_hours

if TYPE_CHECKING:
    from managers import Managers
    from persona.settings import ChannelEntry

log = logging.getLogger(__name__)
TEXT_MIMES = ("text/plain", "text/markdown", "text/csv", "application/json")
POSSIBLE_DUPLICATE = "possible duplicate"
ID_CHARS = 300  # the inbox's and the identities' columns: a longer platform id or address is stored hashed
RECENT_NOTES = 20  # a reply goes to the author of the latest human note among these
PROMPTED_WITHIN = timedelta(hours=1)  # a message later than this after the note it answers is unprompted


@dataclass(frozen=True)
class Arrival:
    """What a channel delivered, as the manager needs it (the door converts its `Incoming`)."""

    channel: str
    platform_id: str
    sender: str
    sender_name: str
    conversation: str
    text: str
    sent_at: datetime
    attachments: Sequence[dict[str, Any]] = field(default_factory=tuple)  # kind, name, mime, size, ref, data?
    unverified: str = ""  # why the channel cannot vouch that `sender` sent it ("" = it can): held, never theirs
    quarantined: str = ""  # why the channel could not read it ("" = it could): set aside, nothing of it kept
    private: bool = False  # only the sender and the persona read `conversation` (a direct room, a private chat, a mail)


@dataclass(frozen=True)
class Received:
    state: str  # noted | held | dropped | quarantined | repeat
    note_id: int | None = None
    person_id: int | None = None
    contact_request_id: int | None = None
    reason: str = ""


class ChannelManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    # -- in -----------------------------------------------------------------------------------------------------

    def receive_isolated(self, arrival: Arrival, limits: ChannelEntry, *, now: datetime) -> Received:
        """`receive` in a savepoint of its own: a message the rules fail on (a value the database refuses, a bug) is
        set aside with the error instead of failing the batch — the channel's other messages and its cursor go on."""
        try:
            with self.repos.session.begin_nested():
                return self.receive(arrival, limits, now=now)
        except Exception as exc:  # noqa: BLE001 - one message must not stop the channel (the runner logs nothing else)
            log.warning(
                "channel %s: message %s set aside: %s", arrival.channel, arrival.platform_id[:80], exc, exc_info=True
            )
            return self._set_aside(arrival, f"could not be recorded ({type(exc).__name__}: {str(exc)[:300]})", now)

    def receive(self, arrival: Arrival, limits: ChannelEntry, *, now: datetime) -> Received:
        repos, people = self.repos, self.house.people
        arrival = _bounded(arrival)
        if repos.channels.seen(arrival.channel, arrival.platform_id) is not None:
            return Received("repeat")
        if arrival.quarantined:
            return self._set_aside(arrival, arrival.quarantined, now)
        text = arrival.text[: limits.max_message_chars]
        refs = [{k: v for k, v in a.items() if k != "data"} for a in arrival.attachments]
        # a sender the channel cannot vouch for (an e-mail whose From failed authentication) is nobody we know,
        # whatever address it claims: a contact request, nothing in memory, no privilege
        person = None if arrival.unverified else people.identify(arrival.channel, arrival.sender)
        if person is None and not arrival.unverified and arrival.sender in limits.allowed_senders:
            person = people.add(
                self._free_name(arrival.sender_name or arrival.sender),
                role="guest",
                by=f"channel {arrival.channel} allowed_senders",
            )
            people.add_identity(person.id, arrival.channel, arrival.sender)
        base = {
            "channel": arrival.channel,
            "platform_id": arrival.platform_id,
            "sender": arrival.sender,
            "attachments": refs,
            "received_at": now,
        }
        if person is None:
            return self._hold(arrival, text, base, now, limits)
        since = now - timedelta(minutes=1)
        if repos.channels.recent_from(arrival.channel, arrival.sender, since) >= limits.rate_per_minute:
            repos.channels.record_incoming(**base, person_id=person.id, state="dropped", reason="rate limit")
            return Received("dropped", person_id=person.id, reason="rate limit")
        row = repos.channels.record_incoming(**base, person_id=person.id, state="noted")
        if row is None:
            return Received("repeat")
        identity = repos.people.identity(arrival.channel, arrival.sender)
        if identity is not None:
            identity.last_seen_at, identity.conversation = now, arrival.conversation
            if arrival.private:
                identity.private_conversation = arrival.conversation
        lines = [text] + self._attachment_lines(person, arrival, limits, now)
        spoken = any(a.get("transcribed") for a in arrival.attachments)
        note_id = self._note(
            person, arrival.channel, "\n".join(line for line in lines if line), now, spoken=spoken, kind=limits.kind
        )
        row.note_id = note_id
        return Received("noted", note_id=note_id, person_id=person.id)

    def _set_aside(self, arrival: Arrival, reason: str, now: datetime) -> Received:
        arrival = _bounded(arrival)
        row = self.repos.channels.record_incoming(
            channel=arrival.channel,
            platform_id=arrival.platform_id,
            sender=arrival.sender,
            attachments=[],
            received_at=now,
            state="quarantined",
            reason=reason[:1000],
        )
        if row is None:
            return Received("repeat")
        log.warning(
            "channel %s: a message (%s) from %r was set aside: %s",
            arrival.channel,
            arrival.platform_id,
            arrival.sender,
            reason,
        )
        return Received("quarantined", reason=reason)

    def _hold(self, arrival: Arrival, text: str, base: dict[str, Any], now: datetime, limits: ChannelEntry) -> Received:
        repos = self.repos
        request = repos.people.contact_request_of(arrival.channel, arrival.sender)
        if request is not None and request.status == "refused":
            repos.channels.record_incoming(
                **base, state="dropped", reason="refused contact", contact_request_id=request.id
            )
            return Received("dropped", contact_request_id=request.id, reason="refused contact")
        if request is None and repos.people.pending_count(arrival.channel) >= limits.max_contact_requests:
            return self._over_cap(base, None, f"over the cap of {limits.max_contact_requests} waiting contact requests")
        if request is not None and request.status == "pending":
            if repos.channels.held_count(arrival.channel, request.id) >= limits.max_held_per_sender:
                return self._over_cap(
                    base, request, f"over the cap of {limits.max_held_per_sender} held messages per sender"
                )
        if repos.channels.held_count(arrival.channel) >= limits.max_held_total:
            return self._over_cap(base, request, f"over the cap of {limits.max_held_total} held messages")
        new = request is None
        if request is None:
            request = repos.people.add_contact_request(
                arrival.channel, arrival.sender, arrival.sender_name[:200], arrival.conversation, now
            )
        elif request.status == "accepted":  # an unverified mail from a known address: the owner decides again
            request.status, request.decided_at, request.decided_by = "pending", None, None
        reason = ""
        if arrival.unverified:
            request.warning = self._claim(arrival)[:1000]
            reason = f"unverified: {arrival.unverified}"[:1000]
        row = repos.channels.record_incoming(
            **base, state="held", contact_request_id=request.id, held_text=text, reason=reason
        )
        if row is None:
            return Received("repeat")
        request.messages = (request.messages or 0) + 1
        request.conversation = arrival.conversation
        if new:
            self._tell_of_request(request, arrival, now)
        return Received("held", contact_request_id=request.id)

    def _over_cap(self, base: dict[str, Any], request: ContactRequest | None, reason: str) -> Received:
        """A stranger's message past a cap: dropped without its text or attachments, counted for the owner (the
        People page), the first of its kind logged."""
        channels = self.repos.channels
        request_id = request.id if request is not None else None
        before = channels.dropped_count(base["channel"], request_id, over_cap=True)
        row = channels.record_incoming(
            **{**base, "attachments": []}, state="dropped", reason=reason, contact_request_id=request_id
        )
        if row is None:
            return Received("repeat")
        if before == 0 or (before + 1) % 100 == 0:
            whose = f"{base['sender']} (contact request {request_id})" if request_id else "new senders"
            log.warning("channel %s: %s dropped from %s: %s", base["channel"], before + 1, whose, reason)
        return Received("dropped", contact_request_id=request_id, reason=reason)

    def _tell_of_request(self, request: ContactRequest, arrival: Arrival, now: datetime) -> None:
        """A new contact request: the owner is told once; a stranger the channel vouches for gets one polite line
        (an unverified sender is not answered: the address it claims may be someone else's)."""
        owner = self.house.people.owner()
        language = owner.language or self._language()
        name = request.sender_name or request.address
        text = (
            notices.say(
                notices.CONTACT_REQUEST_CLAIM,
                language,
                name=request.address,
                channel=arrival.channel,
                why=arrival.unverified[:200],
            )
            if arrival.unverified
            else notices.say(notices.CONTACT_REQUEST, language, name=name, channel=arrival.channel)
        )
        self.house.conversation.notify_owner(f"contact:{request.id}", text, now=now)
        settings = self.house.deps.settings
        if arrival.unverified or not settings.conversation.stranger_reply:
            return
        key = f"stranger:{request.id}"
        if self.repos.channels.by_key(key) is None:
            self.repos.channels.enqueue(
                idempotency_key=key,
                channel=arrival.channel,
                person_id=None,
                recipient=arrival.sender,
                conversation=arrival.conversation if arrival.private else None,
                text=notices.say(notices.STRANGER, i18n_of(arrival.text) or language),
                state="queued",
                created_at=now,
            )

    def _language(self) -> str | None:
        settings = self.house.deps.settings
        return settings.prompt_language

    def _claim(self, arrival: Arrival) -> str:
        """What the owner reads on the contact request: the address claimed, whose it is, and why it is not
        believed."""
        known = self.house.people.identify(arrival.channel, arrival.sender)
        whose = f" ({known.name}'s address, {known.role})" if known is not None else ""
        return f"claims to be {arrival.sender}{whose} but failed authentication: {arrival.unverified}"

    def _free_name(self, name: str) -> str:
        base = " ".join(name.split())[:100] or "guest"
        candidate, n = base, 2
        while self.repos.people.by_name(candidate) is not None:
            candidate, n = f"{base} ({n})", n + 1
        return candidate

    def _note(
        self,
        person: Person,
        channel: str,
        text: str,
        now: datetime,
        *,
        spoken: bool = False,
        kind: str | None = None,
        extra_tags: Sequence[str] = (),
    ) -> int:
        """The one way in (managers/conversation.py): a note from them in their conversation, remembered."""
        heard = self.house.conversation.hear(
            Words(
                text,
                door=self.door_of(channel, kind),
                person_id=person.id,
                channel=channel,
                priority=right(person.role, "priority"),
                tags=([VOICE_TAG] if spoken else []) + list(extra_tags),
                at=now,
            )
        )
        return heard.note_id

    def door_of(self, channel: str, kind: str | None = None) -> Door:
        """The door of a configured channel: its kind (matrix, telegram, email; another kind: `Door.CHANNEL`)."""
        if kind is None:
            settings = self.house.deps.settings
            kind = next((e.kind for e in settings.channels.entries if e.name == channel), None)
        door = Door._value2member_map_.get(kind or channel)
        return Door(door) if door is not None and door in CHANNEL_DOORS else Door.CHANNEL

    def _attachment_lines(self, person: Person, arrival: Arrival, limits: ChannelEntry, now: datetime) -> list[str]:
        lines = []
        for index, item in enumerate(arrival.attachments):
            name, mime, size = str(item.get("name", "file")), str(item.get("mime", "")), int(item.get("size", 0))
            data = item.get("data")
            if item.get("transcribed"):
                lines.append(f"[voice message {name}: transcribed above; the recording kept by reference]")
                continue
            if item.get("kind") == "text" or mime in TEXT_MIMES:
                if isinstance(data, bytes | bytearray) and size <= limits.max_attachment_bytes:
                    lines.append(self._document(person, arrival, index, name, bytes(data), now))
                    continue
                lines.append(
                    f"[attachment {name} ({mime or 'text'}, {size} bytes): over the channel's "
                    f"{limits.max_attachment_bytes}-byte cap, kept by reference "
                    f"{str(item.get('ref', ''))[:200]}]"
                )
                continue
            lines.append(
                f"[attachment {name} ({mime or 'unknown type'}, {size} bytes): kept by reference "
                f"{str(item.get('ref', ''))[:200]}]"
            )
        return lines

    def _document(self, person: Person, arrival: Arrival, index: int, name: str, data: bytes, now: datetime) -> str:
        """A text document within the cap: the owner's goes to the knowledge base (their sending it is their
        consent); anyone else's is kept under the data dir and waits for the owner's approval (`kb.add_document`,
        answered on the Approvals page, `/api/approvals`, `run.py approve|deny`; managers/consent.py adds or drops
        it). The note says which."""
        memory = self.house.memory
        source = f"{person.name} ({person.role}, via {arrival.channel})"
        try:
            if person.role == "owner":
                upload = memory.upload_kb(name, data, source=source, author=person.name)
                return f"[attachment {name}: added to my knowledge base (doc {upload.doc_id}, {upload.chunks} chunks)]"
            path = memory.keep_document(name, data)
        except Exception as exc:  # noqa: BLE001 - an unreadable document stays a reference
            return f"[attachment {name}: not added to the knowledge base: {str(exc)[:120]}]"
        args = {
            "document": name,
            "size": len(data),
            "from": source,
            "person_id": person.id,
            "channel": arrival.channel,
            "message": arrival.platform_id,
            "path": str(path),
            "excerpt": "" if data.startswith(b"%PDF") else " ".join(data.decode("utf-8", "replace").split())[:300],
        }
        approval, _ = self.house.consent.request(
            cmd_key=f"document:{arrival.channel}:{arrival.platform_id}:{index}",
            cmd_id="",
            type=DOCUMENT_APPROVAL,
            args=args,
            effect="modify_self",
            description=f"{person.name} sent {name} ({_size(len(data))}) — add to the knowledge base?",
            reason=f"a document from {source} joins my knowledge base only with my owner's consent",
            thread_id=MAIN_THREAD,
            root_thread=MAIN_THREAD,
            tick=0,
            now=now,
        )
        return (
            f"[attachment {name} ({_size(len(data))}): waits for my owner's consent to join my knowledge base "
            f"(approval {approval.id})]"
        )

    def release_held(self, request: ContactRequest, person: Person, *, vouched: bool = False) -> builtins.list[int]:
        """The accepted contact's held messages, as notes from them (in the order they came); their attachments as
        references only (their content was never kept: a document is sent again to be offered to the knowledge
        base). `vouched`: the owner took unverified mail in as their own (the notes say so in a tag)."""
        ids = []
        for row in self.repos.channels.held(request.id):
            lines = [row.held_text or ""] + [
                f"[attachment {a.get('name', 'file')} ({a.get('mime') or 'unknown type'}, {a.get('size', 0)} bytes): "
                f"kept by reference {str(a.get('ref', ''))[:200]}]"
                for a in row.attachments or []
                if isinstance(a, dict)
            ]
            note_id = self._note(
                person,
                row.channel,
                "\n".join(line for line in lines if line),
                row.received_at,
                extra_tags=["vouched"] if vouched else [],
            )
            row.state, row.note_id, row.person_id, row.held_text = "noted", note_id, person.id, None
            ids.append(note_id)
        return ids

    def drop_held(self, request: ContactRequest) -> None:
        for row in self.repos.channels.held(request.id):
            row.state, row.held_text, row.reason = "dropped", None, "refused contact"

    def inbox(self, limit: int = 50) -> builtins.list[ChannelInbox]:
        return self.repos.channels.inbox(limit)

    def set_aside(self, limit: int = 20) -> tuple[builtins.list[ChannelInbox], int]:
        """The newest messages set aside (a channel could not read them), and how many there are in all."""
        return self.repos.channels.set_aside(limit), self.repos.channels.set_aside_count()

    # -- out ----------------------------------------------------------------------------------------------------

    def addressee(self, to: str, note_id: int | None, now: datetime) -> tuple[Person, bool, bool]:
        """Who a message goes to, whether it answers something, and whether it goes over a channel: the author of
        the note it names, else (to "user") of the latest human note — in a unit that answers someone (its audience),
        their latest — a reply goes back to whoever wrote, by the door they wrote through (a note from the web page or
        the terminal is answered there) — else the person named (reached
        on their channel). Prompted: it answers a note of the last hour — the one named, the latest human one, or
        the named person's own latest message (an unprompted one waits past their quiet hours).
        NotFound for an unknown person."""
        notes = self.repos.notes
        answered: Note | None = None
        audience = self.house.actor
        if note_id is not None:
            named = notes.get(int(note_id))
            answered = named if named is not None and named.source in HUMAN_SOURCES else None
        elif to == "user" and audience.person_id is not None:  # the tick answers someone: "user" is them
            recent = notes.conversation(audience.person_id, limit=RECENT_NOTES)
            answered = next((n for n in reversed(recent) if n.source in HUMAN_SOURCES), None)
            if answered is None:
                return self.house.people.get(audience.person_id), False, True
        elif to == "user":
            answered = next(
                (
                    n
                    for n in reversed(notes.list(limit=RECENT_NOTES, include_hidden=False))
                    if n.source in HUMAN_SOURCES
                ),
                None,
            )
        if answered is not None and answered.author_id is not None:
            person = self.house.people.get(answered.author_id)
        else:
            person = self.house.people.find(to)
        if answered is None and to != "user":  # to a person by name: it answers their own latest message, if any
            answered = notes.last_from(person.id, source=NoteSource.HUMAN_CHANNEL)
        if answered is None:
            return person, False, True
        created = answered.created_at if answered.created_at.tzinfo else answered.created_at.replace(tzinfo=UTC)
        return person, now - created <= PROMPTED_WITHIN, answered.source == NoteSource.HUMAN_CHANNEL

    def send(
        self,
        person: Person,
        text: str,
        *,
        now: datetime,
        note_id: int | None = None,
        unprompted: bool = False,
        key: str | None = None,
    ) -> ChannelOutbox | None:
        """Queue `text` for `person` where they are reached (people.reach), in a conversation only they read (the
        module doc); None: they have no channel (the web page shows the outgoing note). Unprompted, it waits past
        their quiet hours. `key`: the idempotency key (default: a new one)."""
        identity = self.house.people.reach(person)
        if identity is None:
            return None
        not_before = self._after_quiet(person, now) if unprompted else None
        return self.repos.channels.enqueue(
            idempotency_key=key or uuid.uuid4().hex,
            channel=identity.channel,
            person_id=person.id,
            recipient=identity.address,
            conversation=identity.private_conversation,
            text=text,
            state="queued",
            note_id=note_id,
            not_before=not_before,
            created_at=now,
        )

    def _after_quiet(self, person: Person, now: datetime) -> datetime | None:
        if not self.house.people.quiet_now(person, now):
            return None
        assert person.quiet_hours is not None
        _, end = parse_hours(person.quiet_hours)
        settings = self.house.deps.settings
        local = now.astimezone(settings.zone())
        at = local.replace(hour=end.hour, minute=end.minute, second=0, microsecond=0)
        return at if at > local else at + timedelta(days=1)

    def due(self, channel: str, now: datetime, limit: int = 20) -> builtins.list[ChannelOutbox]:
        return self.repos.channels.pending(channel, now, limit)

    def begin_send(self, row_id: int) -> ChannelOutbox | None:
        """Mark the row `sending` (commit before the platform call); None if it is not due any more."""
        row = self.repos.channels.outbox_row(row_id)
        if row is None or row.state not in ("queued", "sending"):
            return None
        row.state, row.attempts = "sending", (row.attempts or 0) + 1
        return row

    def spoken_reply(self, row_id: int) -> bytes | None:
        """The outbox row's reply spoken, when speech answers are on for it (`speech.answer_in_speech`: always, or
        when the person's last message before it was a voice message); None: text only."""
        row = self.repos.channels.outbox_row(row_id)
        if row is None:
            return None
        last = (
            self.repos.notes.last_from(row.person_id, source=NoteSource.HUMAN_CHANNEL, before_id=row.note_id)
            if row.person_id is not None
            else None
        )
        spoken_to = last is not None and VOICE_TAG in (last.tags or [])
        return self.house.speech.reply_for_channel(row.text, spoken_to=spoken_to)

    def mark_sent(self, row_id: int, platform_id: str, now: datetime) -> None:
        """Sent: an earlier try's error is cleared, but a `possible duplicate` note stays — the row is where a
        message that may have arrived twice shows it (with its attempts, under its one idempotency key)."""
        row = self.repos.channels.outbox_row(row_id)
        kept = row.last_error if row is not None and (row.last_error or "").startswith(POSSIBLE_DUPLICATE) else None
        self.repos.channels.set_state(row_id, "sent", platform_id=platform_id, sent_at=now, last_error=kept)

    def mark_possible_duplicate(self, row_id: int) -> None:
        """A resend the platform could not rule out as a second copy (it keeps no key): the row says so."""
        row = self.repos.channels.outbox_row(row_id)
        if row is not None:
            row.last_error = (
                f"{POSSIBLE_DUPLICATE}: an earlier attempt (of {row.attempts}) was cut off after it "
                "began and the platform cannot say whether it arrived; sent again under the same key"
            )

    def mark_failed(self, row_id: int, error: str) -> None:
        """The channel refused the message for good; the owner is told (once), unless it was to them."""
        self.repos.channels.set_state(row_id, "failed", last_error=error[:500])
        row = self.repos.channels.outbox_row(row_id)
        if row is None or row.idempotency_key.startswith(("notice:", "stranger:")):
            return
        owner = self.house.people.owner()
        if row.person_id == owner.id:
            return
        person = self.repos.people.get(row.person_id) if row.person_id is not None else None
        text = notices.say(
            notices.REFUSED,
            owner.language or self._language(),
            name=person.name if person is not None else row.recipient,
            channel=row.channel,
            error=error[:300],
        )
        self.house.conversation.notify_owner(f"refused:{row_id}", text)

    def note_error(self, row_id: int, error: str) -> None:
        """A try that hit a channel that is down: the row stays due (looked up on the platform before a resend)."""
        row = self.repos.channels.outbox_row(row_id)
        if row is not None:
            row.last_error = error[:500]

    def outbox(self, limit: int = 50) -> builtins.list[ChannelOutbox]:
        return self.repos.channels.outbox(limit)

    # -- cursors and state --------------------------------------------------------------------------------------

    def cursor(self, channel: str) -> str | None:
        return self.repos.channels.cursor(channel)

    def store_cursor(self, channel: str, cursor: str | None) -> None:
        self.repos.channels.store_cursor(channel, cursor)

    def set_status(
        self, channel: str, state: str, *, error: str | None = None, retry_at: datetime | None = None
    ) -> None:
        self.repos.channels.set_status(channel, state, error=(error or None) and error[:500], retry_at=retry_at)

    def states(self, configured: Sequence[str] = ()) -> builtins.list[dict[str, Any]]:
        """Every channel's state as its runner last recorded it, with its outbox depth (configured ones that never
        ran are `stopped`)."""
        rows = {r.channel: r for r in self.repos.channels.statuses()}
        out = []
        for name in sorted(set(rows) | set(configured)):
            row = rows.get(name)
            out.append(
                {
                    "channel": name,
                    "state": row.state if row else "stopped",
                    "last_error": row.last_error if row else None,
                    "retry_at": row.retry_at.isoformat() if row and row.retry_at else None,
                    "outbox_depth": self.repos.channels.depth(name),
                }
            )
        return out


def _bounded_id(value: str) -> str:
    """An id the inbox's columns hold: as it is within ID_CHARS, else its head and a hash of the whole (still one
    per message, so a repeat is still recognised)."""
    if len(value) <= ID_CHARS:
        return value
    return f"{value[:200]}…sha256:{hashlib.sha256(value.encode('utf-8', 'replace')).hexdigest()}"


def _bounded(arrival: Arrival) -> Arrival:
    fitted = replace(
        arrival,
        platform_id=_bounded_id(arrival.platform_id),
        sender=_bounded_id(arrival.sender),
        conversation=_bounded_id(arrival.conversation),
        sender_name=arrival.sender_name[:200],
    )
    return arrival if fitted == arrival else fitted


def i18n_of(text: str) -> str | None:
    """The language a stranger wrote in (their letters' script), for the one line they get back."""
    import i18n

    return i18n.of_text(text)


def _size(size: int) -> str:
    return (
        f"{size} bytes"
        if size < 1024
        else f"{size / 1024:.0f} KB"
        if size < 1024 * 1024
        else f"{size / (1024 * 1024):.1f} MB"
    )


__all__ = ["Arrival", "ChannelManager", "Received"]
