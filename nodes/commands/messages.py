"""messages: talking to the persona's humans. A sent message is stored as an outgoing note and shown live; to a
person reached on a channel (their preferred one, else where they last wrote) it also goes through that channel's
outbox (exactly once, managers/channels.py). A message nobody prompted waits past the person's quiet hours."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from pydantic import Field

from memory.models import Note

from memory.repositories import NotFound
from memory.repositories.notes import HUMAN_SOURCES
from nodes.commands.args import Args, Id, Text, Word, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg

FAMILY = Family("messages", "talking to my human")
RECENT_NOTES = 20  # a reply goes to the author of the latest human note among these
PROMPTED_WITHIN = timedelta(hours=1)  # a message later than this after the note it answers is unprompted


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


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
    people = ctx.managers.people
    answered = _answered_note(ctx, arg(cmd, "note", default=None), to)
    try:
        if answered is not None and answered.author_id is not None:
            person = people.get(answered.author_id)
        else:
            person = people.find(to)
    except NotFound as exc:
        raise CommandError(f"messages.send: {exc}") from None
    note = ctx.managers.notes.outgoing(text, to=person.name if to != "user" else to, thread_id=ctx.thread_id,
                                       llm_id=ctx.llm_id, now=ctx.now)
    prompted = answered is not None and ctx.now - _aware(answered.created_at) <= PROMPTED_WITHIN
    queued = ctx.managers.channels.send(person, text, now=ctx.now, note_id=note.id, unprompted=not prompted)
    ctx.emit({"event": "message", "to": to, "text": text, "note_id": note.id, "tick": ctx.tick})
    if queued is None:
        return CommandResult(f"message sent (note {note.id})")
    later = f", held past {person.name}'s quiet hours" if queued.not_before is not None else ""
    return CommandResult(f"message sent (note {note.id}) to {person.name} over {queued.channel}{later}")


def _answered_note(ctx: CommandContext, note_id: int | None, to: str) -> Note | None:
    """The human note this message answers: the one named, else (to "user") the latest human note — a reply goes
    back to whoever wrote it, where they wrote it."""
    repos = ctx.repos
    if note_id is not None:
        note = repos.notes.get(int(note_id))
        return note if note is not None and note.source in HUMAN_SOURCES else None
    if to != "user":
        return None
    for note in reversed(repos.notes.list(limit=RECENT_NOTES, include_hidden=False)):
        if note.source in HUMAN_SOURCES:
            return note
    return None
