"""diary: the cognitive diary (HMP `diary_entries`), written only by explicit commands."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from memory.models import DiaryEntry
from nodes.commands.args import Args, Id, Limit, Priority, SearchText, TopK, Word, Words, names
from nodes.commands.memory import archive_one, run_search
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandResult, Family, arg

FAMILY = Family("diary", "the cognitive diary")
MAX_ENTRY_CHARS = 4000
Entry = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_ENTRY_CHARS)]


class DiaryAddArgs(Args):
    text: Entry = Field(validation_alias=names("text", "content"))
    tags: Words = []
    emotions: Words = []
    priority: Priority = 0


class DiaryListArgs(Args):
    limit: Limit = 10
    tag: Word | None = None
    archived: bool = False
    pinned: bool = False
    debug: bool = False


class DiaryIdArgs(Args):
    id: Id


class DiarySearchArgs(Args):
    query: SearchText = Field(validation_alias=names("query", "text", "q"))
    k: TopK = Field(5, validation_alias=names("k", "limit"))
    archived: bool = False


class DiaryUpdateArgs(DiaryIdArgs):
    text: Entry | None = Field(None, validation_alias=names("text", "content"))
    tags: Words | None = None
    priority: Priority | None = None


def diary_line(entry: DiaryEntry) -> str:
    flags = "".join([" pinned" if entry.pinned else "", " archived" if entry.status == "archived" else ""])
    tags = f" #{' #'.join(entry.tags)}" if entry.tags else ""
    return f"[diary {entry.id} {entry.created_at:%Y-%m-%d}{flags}]{tags} {entry.text}"


@FAMILY.command("diary.add", '{"text": "…", "tags": ["sea"], "priority": 0}', args=DiaryAddArgs, effect="write_self")
def add_entry(cmd: Command, ctx: CommandContext) -> CommandResult:
    entry = ctx.managers.diary.add(
        str(arg(cmd, "text")),
        tags=arg(cmd, "tags", default=[], kind=list),
        emotions=arg(cmd, "emotions", default=[], kind=list),
        priority=arg(cmd, "priority", default=0, kind=int),
        thread_id=ctx.thread_id,
        tick=ctx.tick,
    )
    return CommandResult(f"diary {entry.id} added")


@FAMILY.command(
    "diary.list",
    '{"limit": 10, "tag": "sea", "archived": false, "pinned": false, "debug": false}  '
    "(debug: only the entries tagged debug:*, which are otherwise left out)",
    args=DiaryListArgs,
    effect="read",
)
def list_entries(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.managers.diary.list(
        limit=arg(cmd, "limit", default=10, kind=int),
        tag=arg(cmd, "tag", default=None),
        include_archived=arg(cmd, "archived", default=False, kind=bool),
        pinned_only=arg(cmd, "pinned", default=False, kind=bool),
        debug=arg(cmd, "debug", default=False, kind=bool),
    )
    return CommandResult("\n".join(diary_line(r) for r in rows) or "the diary is empty", show=True)


@FAMILY.command("diary.read", '{"id": 3}  (shown in the next tick\'s context)', args=DiaryIdArgs, effect="read")
def read_entry(cmd: Command, ctx: CommandContext) -> CommandResult:
    entry = ctx.managers.diary.read(arg(cmd, "id", kind=int))  # reading an archived entry brings it back
    return CommandResult(diary_line(entry), show=True)


@FAMILY.command("diary.search", '{"query": "the sea", "k": 5, "archived": false}', args=DiarySearchArgs, effect="read")
def search_entries(cmd: Command, ctx: CommandContext) -> CommandResult:
    return run_search(
        ctx,
        str(arg(cmd, "query")),
        k=arg(cmd, "k", default=5, kind=int),
        tiers=["diary"],
        include_archived=arg(cmd, "archived", default=False, kind=bool),
    )


@FAMILY.command("diary.update", '{"id": 3, "text": "…", "tags": ["sea"]}', args=DiaryUpdateArgs, effect="write_self")
def update_entry(cmd: Command, ctx: CommandContext) -> CommandResult:
    entry_id = arg(cmd, "id", kind=int)
    text = str(arg(cmd, "text")) if "text" in cmd.args else None
    ctx.managers.diary.update(
        entry_id,
        text=text,
        tags=arg(cmd, "tags", default=None, kind=list),
        priority=arg(cmd, "priority", default=None, kind=int),
    )
    return CommandResult(f"diary {entry_id} updated")


@FAMILY.command(
    "diary.delete", '{"id": 3}  (archives it; needs my human\'s approval)', args=DiaryIdArgs, effect="modify_self"
)
def delete_entry(cmd: Command, ctx: CommandContext) -> CommandResult:
    return archive_one(ctx, cmd.type, "diary", arg(cmd, "id", kind=int))


@FAMILY.command("diary.pin", '{"id": 3}', args=DiaryIdArgs, effect="write_self")
@FAMILY.command("diary.unpin", '{"id": 3}', args=DiaryIdArgs, effect="write_self")
def pin_entry(cmd: Command, ctx: CommandContext) -> CommandResult:
    entry = ctx.managers.diary.set_pinned(arg(cmd, "id", kind=int), cmd.type.endswith(".pin"))
    return CommandResult(f"diary {entry.id} {'pinned' if entry.pinned else 'unpinned'}")
