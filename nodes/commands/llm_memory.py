"""llm_memory: the model's own notepad of ideas, hypotheses and plans (always in context)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from nodes.commands.args import Args, Id, Label, Limit, Words, names
from nodes.commands.memory import archive_one
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandResult, Family, arg

FAMILY = Family("llm_memory", "my notepad of ideas")
MAX_ENTRY_CHARS = 2000
Entry = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_ENTRY_CHARS)]


class MemoryAddArgs(Args):
    text: Entry = Field(validation_alias=names("text", "content", "value"))
    title: Label = ""
    tags: Words = []


class MemoryListArgs(Args):
    limit: Limit = 20


class MemoryIdArgs(Args):
    id: Id


@FAMILY.command(
    "llm_memory.add",
    '{"text": "…", "title": "…", "tags": ["plan"]}',
    args=MemoryAddArgs,
    effect="write_self",
    aliases=("remember",),
    prompt_tier="notepad of ideas",
)
def add_memory(cmd: Command, ctx: CommandContext) -> CommandResult:
    row = ctx.managers.llm_memory.add(
        str(arg(cmd, "text")),
        title=str(arg(cmd, "title", default="")),
        tags=arg(cmd, "tags", default=[], kind=list),
        thread_id=ctx.thread_id,
        llm_id=ctx.llm_id,
    )
    return CommandResult(f"llm_memory {row.id} added")


@FAMILY.command("llm_memory.list", '{"limit": 20}', args=MemoryListArgs, effect="read")
def list_memory(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.managers.llm_memory.recent(arg(cmd, "limit", default=20, kind=int))
    return CommandResult(
        "\n".join(f"[{r.id}] {r.title + ': ' if r.title else ''}{r.content}" for r in rows) or "empty", show=True
    )


@FAMILY.command(
    "llm_memory.delete", '{"id": 3}  (archives it; needs my human\'s approval)', args=MemoryIdArgs, effect="modify_self"
)
def delete_memory(cmd: Command, ctx: CommandContext) -> CommandResult:
    return archive_one(ctx, cmd.type, "llm_memory", arg(cmd, "id", kind=int))
