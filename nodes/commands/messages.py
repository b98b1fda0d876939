"""messages: talking to the persona's humans and its peers. A sent message is stored as an outgoing note and shown
live; to a person reached on a channel (their preferred one, else where they last wrote) it also goes through that
channel's outbox (exactly once, managers/channels.py), and a message nobody prompted waits past the person's quiet
hours. To a peer (another agent: by name, or any A2A agent's URL) it leaves over A2A (managers/peers.py): it answers
the peer's waiting A2A task, or waits in the outbox until the peer is reachable.

People and peers by name were added with the owner's approval (`users.add`, `agents.add`), so writing to them is the
persona's own act; an agent named only by its URL is one nobody approved: that message is `external` (consent)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StringConstraints

from managers.errors import NotFound, Refused
from managers.peers import is_agent_url
from memory.note_kinds import Door
from nodes.commands.args import Args, Id, Text, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Effect, Family, arg

FAMILY = Family("messages", "talking to my humans and my peers")
Recipient = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=500)]


class MessageArgs(Args):
    text: Text = Field(validation_alias=names("text", "message", "content", "value"))
    to: Recipient = "user"
    note: Id | None = Field(None, description="the note this answers (its author is the recipient)")


def _to_an_unapproved_agent(args: dict[str, Any]) -> Effect | None:
    """A message to an A2A agent known only by its URL leaves this machine for someone nobody approved: external."""
    return "external" if is_agent_url(str(args.get("to") or "")) else None


@FAMILY.command("messages.send", '{"text": "…"}  (to your human; "to": a person or a peer by name, or an A2A '
                "agent's URL)", args=MessageArgs, effect="write_self", escalate=_to_an_unapproved_agent,
                aliases=('message', 'send_message', 'send', 'reply'))
def send_message(cmd: Command, ctx: CommandContext) -> CommandResult:
    text = str(arg(cmd, "text")).strip()
    if not text:
        raise CommandError("messages.send: empty text")
    to = str(arg(cmd, "to", default="user"))
    channels = ctx.managers.channels
    try:
        person, prompted, over_channel = channels.addressee(to, arg(cmd, "note", default=None), ctx.now)
    except NotFound as not_a_person:
        return _to_a_peer(to, text, ctx, not_a_person)
    persona = getattr(ctx.services, "persona", None)
    reached = ctx.managers.people.reach(person) if over_channel else None
    note = ctx.managers.conversation.tell(text, person=person, thread_id=ctx.thread_id, llm_id=ctx.llm_id, now=ctx.now,
                                          door=channels.door_of(reached.channel) if reached is not None else Door.WEB,
                                          speaker=persona.display_name if persona is not None else "")
    queued = channels.send(person, text, now=ctx.now, note_id=note.note_id, unprompted=not prompted) if over_channel \
        else None
    ctx.emit({"event": "message", "to": to, "text": text, "note_id": note.note_id, "tick": ctx.tick})
    if queued is None:
        return CommandResult(f"message sent (note {note.note_id})")
    later = f", held past {person.name}'s quiet hours" if queued.not_before is not None else ""
    return CommandResult(f"message sent (note {note.note_id}) to {person.name} over {queued.channel}{later}")


def _to_a_peer(to: str, text: str, ctx: CommandContext, not_a_person: NotFound) -> CommandResult:
    try:
        note, what = ctx.managers.peers.send(to, text, thread_id=ctx.thread_id, llm_id=ctx.llm_id, now=ctx.now)
    except NotFound:
        raise CommandError(f"messages.send: {not_a_person}; and no peer {to!r} (agents.list shows them; any A2A "
                           "agent is reached by its URL)") from None
    except Refused as exc:
        raise CommandError(f"messages.send: {exc}") from None
    ctx.emit({"event": "message", "to": to, "text": text, "note_id": note.id, "tick": ctx.tick})
    return CommandResult(f"message sent (note {note.id}): {what}")
