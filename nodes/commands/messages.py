"""messages: talking to the persona's humans. A sent message is stored as an outgoing note and shown live; to a
person reached on a channel (their preferred one, else where they last wrote) it also goes through that channel's
outbox (exactly once, managers/channels.py). A message nobody prompted waits past the person's quiet hours."""

from __future__ import annotations

from pydantic import Field

from managers.errors import NotFound
from nodes.commands.args import Args, Id, Text, Word, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg

FAMILY = Family("messages", "talking to my human")


class MessageArgs(Args):
    text: Text = Field(validation_alias=names("text", "message", "content", "value"))
    to: Word = "user"
    note: Id | None = Field(None, description="the note this answers (its author is the recipient)")


@FAMILY.command("messages.send", '{"text": "…", "to": "Ann"}  (to your human, or a person by name)',
                args=MessageArgs, effect="write_self", aliases=('message', 'send_message', 'send', 'reply'))
def send_message(cmd: Command, ctx: CommandContext) -> CommandResult:
    text = str(arg(cmd, "text")).strip()
    if not text:
        raise CommandError("messages.send: empty text")
    to = str(arg(cmd, "to", default="user"))
    channels = ctx.managers.channels
    try:
        person, prompted, over_channel = channels.addressee(to, arg(cmd, "note", default=None), ctx.now)
    except NotFound as exc:
        raise CommandError(f"messages.send: {exc}") from None
    note = ctx.managers.notes.outgoing(text, to=to if to == "user" else person.name, thread_id=ctx.thread_id,
                                       llm_id=ctx.llm_id, now=ctx.now)
    queued = channels.send(person, text, now=ctx.now, note_id=note.id, unprompted=not prompted) if over_channel \
        else None
    ctx.emit({"event": "message", "to": to, "text": text, "note_id": note.id, "tick": ctx.tick})
    if queued is None:
        return CommandResult(f"message sent (note {note.id})")
    later = f", held past {person.name}'s quiet hours" if queued.not_before is not None else ""
    return CommandResult(f"message sent (note {note.id}) to {person.name} over {queued.channel}{later}")
