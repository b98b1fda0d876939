"""messages: talking to the persona's humans and its peers. A sent message is stored as an outgoing note and shown
live; to a person reached on a channel (their preferred one, else where they last wrote) it also goes through that
channel's outbox (exactly once, managers/channels.py), and a message nobody prompted waits past the person's quiet
hours. To a peer (another agent: by name, or any A2A agent's URL) it leaves over A2A (managers/peers.py): it answers
the peer's waiting A2A task, or waits in the outbox until the peer is reachable.

People and peers by name were added with the owner's approval (`users.add`, `agents.add`), so writing to them is the
persona's own act; an agent named only by its URL is one nobody approved: that message is `external` (consent).
From a tick that read untrusted text, a message goes at once only as a reply — to someone who wrote in that tick or
wrote that text; to anyone else the owner decides, the source shown (`relay`, managers/consent.py).

An answer to a peer's waiting A2A task may ask back (`ask`: the task waits for the peer's answer), decline the task
(`decline`), be a plain message rather than a task's result (`plain`), and carry a structured result (`data`, JSON) and
a file (`file`: its name, media type, and its text or a URL)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StringConstraints, model_validator

from managers.errors import NotFound, Refused
from managers.peers import is_agent_url
from memory.note_kinds import Door
from nodes.commands.args import MAX_TEXT, Args, Id, Text, names
from nodes.commands.model import Command
from nodes.commands.spec import Addressee, CommandContext, CommandError, CommandResult, Effect, Family, arg

FAMILY = Family("messages", "talking to my humans and my peers")
Recipient = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=500)]


FileName = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200, pattern=r"^[^/\\\x00-\x1f]+$")
]
MediaType = Annotated[
    str, StringConstraints(strip_whitespace=True, max_length=100, pattern=r"^[A-Za-z0-9.+-]+/[A-Za-z0-9.+-]+$")
]
FileUrl = Annotated[str, StringConstraints(strip_whitespace=True, max_length=2000, pattern=r"^https?://\S+$")]


class FileArgs(Args):
    name: FileName
    media_type: MediaType = "text/plain"
    text: Annotated[str, StringConstraints(max_length=MAX_TEXT)] | None = None
    url: FileUrl | None = None

    @model_validator(mode="after")
    def _one_content(self) -> FileArgs:
        if (self.text is None) == (self.url is None):
            raise ValueError("a file has its text or its url (one of them)")
        return self


class MessageArgs(Args):
    text: Text = Field(validation_alias=names("text", "message", "content", "value"))
    to: Recipient = "user"
    note: Id | None = Field(None, description="the note this answers (its author is the recipient)")
    ask: bool = Field(False, description="to a peer's A2A task: a question; the task waits for its answer")
    decline: bool = Field(False, description="to a peer's A2A task: I decline it")
    plain: bool = Field(False, description="to a peer's A2A task: a plain message, not the task's result")
    data: dict[str, Any] | list[Any] | None = Field(
        None, description="to a peer's A2A task: a structured result (JSON)"
    )
    file: FileArgs | None = Field(None, description="to a peer's A2A task: a file: name, media_type, text or url")

    @model_validator(mode="after")
    def _one_way(self) -> MessageArgs:
        if sum((self.ask, self.decline, self.plain)) > 1:
            raise ValueError("ask, decline and plain: at most one")
        if (self.data is not None or self.file is not None) and (self.ask or self.decline):
            raise ValueError("data and files go with an answer, not with a question or a refusal")
        return self


PEER_ONLY = ("ask", "decline", "plain", "data", "file")


def _reply_kind(cmd: Command) -> str:
    if arg(cmd, "ask", default=False, kind=bool):
        return "question"
    if arg(cmd, "decline", default=False, kind=bool):
        return "decline"
    return "plain" if arg(cmd, "plain", default=False, kind=bool) else "answer"


def _attachments(cmd: Command) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    data = arg(cmd, "data", default=None)
    if data is not None:
        parts.append({"kind": "data", "name": "data", "data": data})
    file = arg(cmd, "file", default=None)
    if isinstance(file, dict):
        parts.append({"kind": "file", **{k: v for k, v in file.items() if v is not None}})
    return parts


def _to_an_unapproved_agent(args: dict[str, Any]) -> Effect | None:
    """A message to an A2A agent known only by its URL leaves this machine for someone nobody approved: external."""
    return "external" if is_agent_url(str(args.get("to") or "")) else None


def recipient(cmd: Command, ctx: CommandContext) -> Addressee | None:
    """Whom messages.send speaks to, as the handler will resolve it (None: nobody; the handler says why)."""
    to = str(cmd.args.get("to") or "user")
    if is_agent_url(to):
        return {"label": f"the A2A agent at {to}", "peer": to}
    try:
        person, _, _ = ctx.managers.channels.addressee(to, cmd.args.get("note"), ctx.now)
    except NotFound:
        return {"label": f"peer {to}", "peer": to}
    return {"label": f"{person.name} ({person.role})", "person": person.id}


@FAMILY.command(
    "messages.send",
    '{"text": "…"}  (to your human; "to": a person or a peer by name, or an A2A '
    'agent\'s URL; answering a peer\'s task: "ask": true asks back, "decline": true, "data": {…}, '
    '"file": {"name", "text" or "url"})',
    args=MessageArgs,
    effect="write_self",
    escalate=_to_an_unapproved_agent,
    aliases=("message", "send_message", "send", "reply"),
    relay=recipient,
)
def send_message(cmd: Command, ctx: CommandContext) -> CommandResult:
    text = str(arg(cmd, "text")).strip()
    if not text:
        raise CommandError("messages.send: empty text")
    to = str(arg(cmd, "to", default="user"))
    channels = ctx.managers.channels
    try:
        person, prompted, over_channel = channels.addressee(to, arg(cmd, "note", default=None), ctx.now)
    except NotFound as not_a_person:
        return _to_a_peer(to, text, cmd, ctx, not_a_person)
    if any(arg(cmd, name, default=None) not in (None, False) for name in PEER_ONLY):
        raise CommandError(
            f"messages.send: {', '.join(PEER_ONLY)} are for an answer to a peer's A2A task, and "
            f"{person.name} is a person"
        )
    persona = getattr(ctx.services, "persona", None)
    reached = ctx.managers.people.reach(person) if over_channel else None
    note = ctx.managers.conversation.tell(
        text,
        person=person,
        thread_id=ctx.thread_id,
        llm_id=ctx.llm_id,
        now=ctx.now,
        door=channels.door_of(reached.channel) if reached is not None else Door.WEB,
        speaker=persona.display_name if persona is not None else "",
    )
    queued = (
        channels.send(person, text, now=ctx.now, note_id=note.note_id, unprompted=not prompted)
        if over_channel
        else None
    )
    ctx.emit({"event": "message", "to": to, "text": text, "note_id": note.note_id, "tick": ctx.tick})
    if queued is None:
        return CommandResult(f"message sent (note {note.note_id})")
    later = f", held past {person.name}'s quiet hours" if queued.not_before is not None else ""
    return CommandResult(f"message sent (note {note.note_id}) to {person.name} over {queued.channel}{later}")


def _to_a_peer(to: str, text: str, cmd: Command, ctx: CommandContext, not_a_person: NotFound) -> CommandResult:
    try:
        note, what = ctx.managers.peers.send(
            to,
            text,
            thread_id=ctx.thread_id,
            llm_id=ctx.llm_id,
            now=ctx.now,
            kind=_reply_kind(cmd),
            parts=_attachments(cmd),
            note_id=arg(cmd, "note", default=None),
        )
    except NotFound:
        raise CommandError(
            f"messages.send: {not_a_person}; and no peer {to!r} (agents.list shows them; any A2A "
            "agent is reached by its URL)"
        ) from None
    except Refused as exc:
        raise CommandError(f"messages.send: {exc}") from None
    ctx.emit({"event": "message", "to": to, "text": text, "note_id": note.id, "tick": ctx.tick})
    return CommandResult(f"message sent (note {note.id}): {what}")
