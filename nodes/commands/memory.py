"""memory.search / search.query / kb.search: hybrid retrieval over every tier; memory.archive / restore."""

from __future__ import annotations

from datetime import timedelta

from nodes.commands.model import Command
from nodes.commands.registry import CommandContext, CommandError, CommandResult, arg, command


def hit_line(hit) -> str:
    item = hit.item
    title = f" {item.title}" if item.title else ""
    who = f"{item.author}: " if item.author else ""
    return f"[{item.tier} {item.ref}{title} · {item.created_at:%Y-%m-%d}] {who}{item.text}"


def run_search(ctx: CommandContext, text: str, *, k: int = 5, tiers: list[str] | None = None, days: int | None = None,
               tags: list[str] | None = None, include_archived: bool = False) -> CommandResult:
    from memory.index import Query

    index = getattr(ctx.services, "memory", None)
    if index is None:
        raise CommandError("memory search is not available in this run (no memory index)")
    hits = index.search(Query(text=text, k=max(1, min(k, 20)), tiers=tiers, tags=tags, include_archived=include_archived,
                              since=ctx.now - timedelta(days=days) if days else None))
    ctx.repos.items.touch([h.item.id for h in hits], ctx.now)
    return CommandResult("\n".join(hit_line(h) for h in hits) or f"nothing found for {text!r}", show=True)


@command("memory.search", '{"query": "…", "k": 5, "tiers": ["diary", "message", "kb"], "days": 30, "tags": […]}')
def search_memory(cmd: Command, ctx: CommandContext) -> CommandResult:
    return run_search(ctx, str(arg(cmd, "query", "text", "q")), k=arg(cmd, "k", "limit", default=5, kind=int),
                      tiers=arg(cmd, "tiers", default=None, kind=list), days=arg(cmd, "days", default=None, kind=int),
                      tags=arg(cmd, "tags", default=None, kind=list), include_archived=arg(cmd, "archived", default=False, kind=bool))


@command("search.query", '{"query": "…"}  (Epos `search`: my memories and knowledge base)')
def search_query(cmd: Command, ctx: CommandContext) -> CommandResult:
    return search_memory(cmd, ctx)


@command("kb.search", '{"query": "…", "k": 5}  (documents my human gave me)')
def search_kb(cmd: Command, ctx: CommandContext) -> CommandResult:
    return run_search(ctx, str(arg(cmd, "query", "text", "q")), k=arg(cmd, "k", "limit", default=5, kind=int), tiers=["kb"])


@command("memory.archive", '{"tier": "diary", "ref": "3"}')
@command("memory.restore", '{"tier": "diary", "ref": "3"}  (brings an archived memory back)')
def archive_or_restore(cmd: Command, ctx: CommandContext) -> CommandResult:
    from memory.manager import set_memory_status

    tier, ref = str(arg(cmd, "tier")), str(arg(cmd, "ref", "id"))
    status, done = ("archived", "archived") if cmd.type == "memory.archive" else ("active", "restored")
    if not set_memory_status(ctx.repos, tier, ref, status):
        raise CommandError(f"{cmd.type}: no {tier} {ref} to change (already {status}, or unknown)")
    ctx.repos.processes.add(cmd.type, f"{tier} {ref} {done} on request", thread_id=ctx.thread_id)
    return CommandResult(f"{tier} {ref} {done}")


@command("memory.archived", '{"limit": 10}  (what the memory manager or I archived, newest first)')
def list_archived(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.repos.items.archived(limit=arg(cmd, "limit", default=10, kind=int))
    lines = [f"[{i.tier} {i.ref} · archived {i.updated_at:%Y-%m-%d}] {i.text[:160]}" for i in rows]
    return CommandResult("\n".join(lines) or "nothing is archived", show=True)
