"""llm_memory: the model's own notepad of ideas, hypotheses and plans (always in context)."""

from __future__ import annotations

from nodes.commands.model import Command
from nodes.commands.registry import CommandContext, CommandError, CommandResult, arg, command

MAX_ENTRY_CHARS = 2000


@command("llm_memory.add", '{"text": "…", "title": "…", "tags": ["plan"]}')
def add_memory(cmd: Command, ctx: CommandContext) -> CommandResult:
    text = str(arg(cmd, "text", "content", "value"))
    if len(text) > MAX_ENTRY_CHARS:
        raise CommandError(f"llm_memory.add: {len(text)} chars, over the {MAX_ENTRY_CHARS}-char limit; shorten it")
    row = ctx.repos.llm_memory.add(text, title=str(arg(cmd, "title", default="")), tags=arg(cmd, "tags", default=[], kind=list),
                                   thread_id=ctx.thread_id, llm_id=ctx.llm_id)
    return CommandResult(f"llm_memory {row.id} added")


@command("llm_memory.list", '{"limit": 20}')
def list_memory(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.repos.llm_memory.recent(arg(cmd, "limit", default=20, kind=int))
    return CommandResult("\n".join(f"[{r.id}] {r.title + ': ' if r.title else ''}{r.content}" for r in rows) or "empty",
                         show=True)


@command("llm_memory.delete", '{"id": 3}')
def delete_memory(cmd: Command, ctx: CommandContext) -> CommandResult:
    entry_id = arg(cmd, "id", kind=int)
    if not ctx.repos.llm_memory.delete(entry_id):
        raise CommandError(f"llm_memory.delete: no entry {entry_id}")
    return CommandResult(f"llm_memory {entry_id} deleted")
