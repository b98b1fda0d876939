"""messages: talking to the human — and to a peer (`"to": "<peer>"`, or any A2A agent's URL): that message leaves
this machine over A2A (managers/peers.py), an `external` effect my human approves (consent); it answers the peer's
waiting A2A task, or waits in the outbox until the peer is reachable. To the human it is stored as an outgoing note
and shown live."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StringConstraints

from managers.errors import NotFound, Refused
from nodes.commands.args import Args, Text, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Effect, Family, arg

FAMILY = Family("messages", "talking to my human and my peers")
Recipient = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=500)]


class MessageArgs(Args):
    text: Text = Field(validation_alias=names("text", "message", "content", "value"))
    to: Recipient = "user"


OWNER = ("user", "human", "owner")


def _to_a_peer(args: dict[str, Any]) -> Effect | None:
    """A message to anyone but my human leaves this machine: external."""
    to = str(args.get("to") or "user").strip()
    return None if to in OWNER else "external"


@FAMILY.command("messages.send", '{"text": "…"}  (to your human; "to": a peer or an A2A agent\'s URL)', args=MessageArgs,
                effect="write_self", escalate=_to_a_peer, aliases=('message', 'send_message', 'send', 'reply'))
def send_message(cmd: Command, ctx: CommandContext) -> CommandResult:
    text = str(arg(cmd, "text")).strip()
    if not text:
        raise CommandError("messages.send: empty text")
    to = str(arg(cmd, "to", default="user"))
    if to not in OWNER:
        try:
            note, what = ctx.managers.peers.send(to, text, thread_id=ctx.thread_id, llm_id=ctx.llm_id, now=ctx.now)
        except (NotFound, Refused) as exc:
            raise CommandError(f"messages.send: {exc}") from None
        ctx.emit({"event": "message", "to": to, "text": text, "note_id": note.id, "tick": ctx.tick})
        return CommandResult(f"message sent (note {note.id}): {what}")
    note = ctx.managers.notes.outgoing(text, to=to, thread_id=ctx.thread_id, llm_id=ctx.llm_id, now=ctx.now)
    ctx.emit({"event": "message", "to": to, "text": text, "note_id": note.id, "tick": ctx.tick})
    return CommandResult(f"message sent (note {note.id})")
