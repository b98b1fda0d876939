"""messages: talking to the human. A sent message is stored as an outgoing note and shown live."""

from __future__ import annotations

from pydantic import Field

from nodes.commands.args import Args, Text, Word, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg

FAMILY = Family("messages", "talking to my human")


class MessageArgs(Args):
    text: Text = Field(validation_alias=names("text", "message", "content", "value"))
    to: Word = "user"


@FAMILY.command("messages.send", '{"text": "…"}  (to your human)', args=MessageArgs, effect="write_self", aliases=('message', 'send_message', 'send', 'reply'))
def send_message(cmd: Command, ctx: CommandContext) -> CommandResult:
    text = str(arg(cmd, "text")).strip()
    if not text:
        raise CommandError("messages.send: empty text")
    to = str(arg(cmd, "to", default="user"))
    note = ctx.managers.notes.outgoing(text, to=to, thread_id=ctx.thread_id, llm_id=ctx.llm_id, now=ctx.now)
    ctx.emit({"event": "message", "to": to, "text": text, "note_id": note.id, "tick": ctx.tick})
    return CommandResult(f"message sent (note {note.id})")
