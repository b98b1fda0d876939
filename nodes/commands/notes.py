"""notes: the shared notepad between the human, the persona, tasks and the system (HMP `notes`)."""

from __future__ import annotations

from pydantic import Field, model_validator

from managers.errors import NotFound
from memory import provenance
from memory.models import Note
from memory.tiers import TierError
from nodes.commands.args import Args, Id, Ids, Limit, Priority, Text, Word, Words, names
from nodes.commands.mesh import mesh_off
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg

FAMILY = Family("notes", "the notes between my human, me, my tasks and the system")


class NotesListArgs(Args):
    unread: bool = False
    source: Word | None = None
    limit: Limit = 10


class NoteArgs(Args):
    id: Id = Field(validation_alias=names("id", "note_id"))


class NoteAddArgs(Args):
    text: Text = Field(validation_alias=names("text", "content"))
    tags: Words = []
    priority: Priority = 0


class NoteTagArgs(NoteArgs):
    tags: Words


class NoteUpdateArgs(NoteArgs):
    text: Text | None = Field(None, validation_alias=names("text", "content"))
    tags: Words | None = None
    priority: Priority | None = None

    @model_validator(mode="after")
    def _something(self) -> NoteUpdateArgs:
        if self.text is None and self.tags is None and self.priority is None:
            raise ValueError("give text, tags or priority")
        return self


class ReadmarkArgs(Args):
    ids: Ids | None = None
    id: Id | None = Field(None, validation_alias=names("id", "note_id"))
    read: bool = True

    @model_validator(mode="after")
    def _some(self) -> ReadmarkArgs:
        if self.ids is None and self.id is None:
            raise ValueError("give ids (a list) or id")
        return self


class CleanupArgs(Args):
    days: float = Field(30.0, ge=0, le=36_500)


def _line(note: Note) -> str:
    flag = "" if note.read else " (unread)"
    tags = f" #{' #'.join(note.tags)}" if note.tags else ""
    return f"[note {note.id} from {note.source}, priority {note.priority}{flag}]{tags} {note.text}"


@FAMILY.command("notes.list", '{"unread": true, "source": "user", "limit": 10}', args=NotesListArgs, effect="read")
def list_notes(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.managers.notes.list(
        source=arg(cmd, "source", default=None),
        unread_only=arg(cmd, "unread", default=False, kind=bool),
        limit=arg(cmd, "limit", default=10, kind=int),
    )
    return CommandResult("\n".join(_line(n) for n in rows) or "no notes", show=True, sources=provenance.of_notes(rows))


@FAMILY.command("notes.read", '{"id": 12}  (marks it read)', args=NoteArgs, effect="read")
def read_note(cmd: Command, ctx: CommandContext) -> CommandResult:
    note_id = arg(cmd, "id", kind=int)
    try:
        note = ctx.managers.notes.read(note_id)
    except NotFound as exc:
        raise CommandError(f"notes.read: {exc}") from exc
    return CommandResult(_line(note), show=True, sources=provenance.of_notes([note]))


@FAMILY.command(
    "notes.add",
    '{"text": "…", "tags": ["idea"], "priority": 0}',
    args=NoteAddArgs,
    effect="write_self",
    aliases=("note",),
)
def add_note(cmd: Command, ctx: CommandContext) -> CommandResult:
    # a task sub-cycle's notes go to the main loop, unread (HMP `llm:task`)
    note = ctx.managers.notes.add(
        arg(cmd, "text", kind=str),
        tags=arg(cmd, "tags", default=[], kind=list),
        task_id=ctx.task_id,
        priority=arg(cmd, "priority", default=0, kind=int),
        thread_id=ctx.thread_id,
        llm_id=ctx.llm_id,
        now=ctx.now,
    )
    return CommandResult(f"note {note.id} added")


@FAMILY.command("notes.tag", '{"id": 12, "tags": ["todo"]}', args=NoteTagArgs, effect="write_self")
def tag_note(cmd: Command, ctx: CommandContext) -> CommandResult:
    note_id = arg(cmd, "id", kind=int)
    try:
        ctx.managers.notes.tag(note_id, arg(cmd, "tags", kind=list))
    except NotFound as exc:
        raise CommandError(f"notes.tag: {exc}") from exc
    return CommandResult(f"note {note_id} tagged")


@FAMILY.command("notes.readmark", '{"ids": [12, 13], "read": true}', args=ReadmarkArgs, effect="write_self")
def readmark_notes(cmd: Command, ctx: CommandContext) -> CommandResult:
    ids = arg(cmd, "ids", default=None, kind=list) or [arg(cmd, "id")]
    changed = ctx.managers.notes.mark_read([int(i) for i in ids], read=arg(cmd, "read", default=True, kind=bool))
    return CommandResult(f"{changed} note(s) marked")


@FAMILY.command(
    "notes.update",
    '{"id": 12, "text": "…", "tags": ["idea"], "priority": 1}  (the text only of my own notes)',
    args=NoteUpdateArgs,
    effect="write_self",
)
def update_note(cmd: Command, ctx: CommandContext) -> CommandResult:
    note_id = arg(cmd, "id", kind=int)
    try:  # the text only of my own notes (managers.notes.OWN_SOURCES); another's words are never rewritten
        ctx.managers.notes.update(
            note_id,
            text=arg(cmd, "text", default=None),
            tags=arg(cmd, "tags", default=None, kind=list),
            priority=arg(cmd, "priority", default=None, kind=int),
        )
    except (NotFound, TierError) as exc:
        raise CommandError(f"notes.update: {exc}") from exc
    return CommandResult(f"note {note_id} updated")


@FAMILY.command(
    "notes.delete",
    '{"id": 12}  (hides it, restorable; needs my human\'s approval)',
    args=NoteArgs,
    effect="modify_self",
)
def delete_note(cmd: Command, ctx: CommandContext) -> CommandResult:
    note_id = arg(cmd, "id", kind=int)
    if not ctx.managers.notes.hide(note_id):
        raise CommandError(f"notes.delete: no note {note_id} (or it is deleted already)")
    return CommandResult(
        f'note {note_id} deleted; memory.restore {{"tier": "note", "ref": "{note_id}"}} brings it back'
    )


@FAMILY.command(
    "notes.cleanup",
    '{"days": 30}  (hides the read notes older than this — never a human\'s words, my '
    "messages to them or an unread note; restorable; needs my human's approval)",
    args=CleanupArgs,
    effect="modify_self",
)
def cleanup_notes(cmd: Command, ctx: CommandContext) -> CommandResult:
    days = float(arg(cmd, "days", default=30.0, kind=float))
    hidden = ctx.managers.notes.cleanup(days=days)
    return CommandResult(f"{hidden} read note(s) older than {days:g} days hidden (memory.restore brings one back)")


@FAMILY.command(
    "notes.share",
    '{"id": 12}  (one of my own notes made public: it goes to my friends — peers tagged '
    '"friend" — and on to theirs; my human approves, unless notes.share is approved in advance)',
    args=NoteArgs,
    effect="external",
    unavailable=mesh_off,
)
def share_note(cmd: Command, ctx: CommandContext) -> CommandResult:
    note_id = arg(cmd, "id", kind=int)
    try:
        sent = ctx.managers.notes.share(note_id)
    except (NotFound, TierError, ValueError) as exc:
        raise CommandError(f"notes.share: {exc}") from exc
    return CommandResult(f"note {note_id} is public: queued for {len(sent)} friend(s)")
