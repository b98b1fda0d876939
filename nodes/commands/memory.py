"""memory.search / search.query / kb.search: hybrid retrieval over every tier; memory.archive / restore."""

from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import Field

from managers.memory import SearchUnavailable
from memory import provenance
from memory.retrieval.index import Hit
from memory.updates import version_note, when_label
from nodes.commands.args import Args, Days, Limit, Ref, SearchText, TopK, Word, Words, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg

FAMILY = Family("memory", "searching, archiving and restoring memories")


class SearchArgs(Args):
    query: SearchText = Field(validation_alias=names("query", "text", "q"))
    k: TopK = Field(5, validation_alias=names("k", "limit"))


class MemorySearchArgs(SearchArgs):
    tiers: Words | None = None
    days: Days | None = None
    tags: Words | None = None
    archived: bool = False
    # event time (when it happened; memory/event_time.py), where `days` counts back over record time
    happened_after: date | None = Field(None, description="only memories of what happened on or after this day")
    happened_before: date | None = Field(None, description="only memories of what happened before this day")


class ArchiveArgs(Args):
    tier: Word
    ref: Ref = Field(validation_alias=names("ref", "id"))


class ArchivedListArgs(Args):
    limit: Limit = 10


def hit_line(hit: Hit, versions: dict[int, str] | None = None) -> str:
    """A found memory as the persona reads it: where and when (recorded, and happened when it says), who, what, and
    what it replaced or what replaced it (knowledge updates)."""
    item = hit.item
    title = f" {item.title}" if item.title else ""
    who = f"{item.author}: " if item.author else ""
    return f"[{item.tier} {item.ref}{title} · {when_label(item)}] {who}{item.text}{version_note(item, versions or {})}"


def run_search(
    ctx: CommandContext,
    text: str,
    *,
    k: int = 5,
    tiers: list[str] | None = None,
    days: int | None = None,
    tags: list[str] | None = None,
    include_archived: bool = False,
    happened_after: date | None = None,
    happened_before: date | None = None,
) -> CommandResult:
    try:
        hits = ctx.managers.memory.recall(
            text,
            k=k,
            tiers=tiers,
            days=days,
            tags=tags,
            include_archived=include_archived,
            happened_after=happened_after,
            happened_before=happened_before,
        )
    except SearchUnavailable as exc:
        raise CommandError(str(exc)) from exc
    versions = ctx.managers.memory.versions_of(hits)
    tainted = provenance.of_tainted_items(ctx.managers.consent.taints_of, [h.item for h in hits])
    return CommandResult(
        "\n".join(hit_line(h, versions) for h in hits) or f"nothing found for {text!r}",
        show=True,
        sources=provenance.merged(provenance.of_items(h.item for h in hits), *tainted.values()),
    )


@FAMILY.command(
    "memory.search",
    '{"query": "…", "k": 5, "tiers": ["diary", "message", "kb"], "days": 30, "tags": […]}',
    args=MemorySearchArgs,
    effect="read",
    scoped=True,
)
def search_memory(cmd: Command, ctx: CommandContext) -> CommandResult:
    return run_search(
        ctx,
        str(arg(cmd, "query")),
        k=arg(cmd, "k", default=5, kind=int),
        tiers=arg(cmd, "tiers", default=None, kind=list),
        days=arg(cmd, "days", default=None, kind=int),
        tags=arg(cmd, "tags", default=None, kind=list),
        include_archived=arg(cmd, "archived", default=False, kind=bool),
        happened_after=_day(arg(cmd, "happened_after", default=None)),
        happened_before=_day(arg(cmd, "happened_before", default=None)),
    )


def _day(value: object) -> date | None:
    """An admitted date argument (MemorySearchArgs checked it: YYYY-MM-DD) as a date."""
    return value if isinstance(value, date) or value is None else date.fromisoformat(str(value))


@FAMILY.command(
    "search.query",
    '{"query": "…"}  (Epos `search`: my memories and knowledge base)',
    args=MemorySearchArgs,
    effect="read",
    scoped=True,
    aliases=("search",),
)
def search_query(cmd: Command, ctx: CommandContext) -> CommandResult:
    return search_memory(cmd, ctx)


@FAMILY.command(
    "kb.search", '{"query": "…", "k": 5}  (documents my human gave me)', args=SearchArgs, effect="read", scoped=True
)
def search_kb(cmd: Command, ctx: CommandContext) -> CommandResult:
    return run_search(ctx, str(arg(cmd, "query")), k=arg(cmd, "k", default=5, kind=int), tiers=["kb"])


def archive_one(ctx: CommandContext, cmd_type: str, tier: str, ref: str | int) -> CommandResult:
    """The persona's delete: the thing is archived, out of every list and search, and restorable."""
    if not ctx.managers.memory.set_aside(tier, ref, by=cmd_type, thread_id=ctx.thread_id):
        raise CommandError(f"{cmd_type}: no {tier} {ref} to archive (already archived, or unknown)")
    return CommandResult(f'{tier} {ref} archived; memory.restore {{"tier": "{tier}", "ref": "{ref}"}} brings it back')


@FAMILY.command(
    "memory.archive",
    '{"tier": "diary|concept|link|llm_memory|goal|task|message", "ref": "3"}  '
    "(sets it aside, restorable; needs my human's approval)",
    args=ArchiveArgs,
    effect="modify_self",
)
def archive(cmd: Command, ctx: CommandContext) -> CommandResult:
    return archive_one(ctx, cmd.type, str(arg(cmd, "tier")), str(arg(cmd, "ref")))


@FAMILY.command(
    "memory.restore",
    '{"tier": "diary", "ref": "3"}  (brings an archived memory, or a replaced core/notepad '
    "version, back — that one needs my human's approval)",
    args=ArchiveArgs,
    effect="write_self",
    escalate=lambda args: "modify_self" if str(args.get("tier")) in ("core", "notepad") else None,
)
def restore(cmd: Command, ctx: CommandContext) -> CommandResult:
    tier, ref = str(arg(cmd, "tier")), str(arg(cmd, "ref"))
    if not ctx.managers.memory.bring_back(tier, ref, by=cmd.type, thread_id=ctx.thread_id):
        raise CommandError(f"{cmd.type}: no archived {tier} {ref} to restore")
    return CommandResult(f"{tier} {ref} restored")


@FAMILY.command(
    "memory.archived",
    '{"limit": 10}  (what the memory manager or I archived, newest first)',
    args=ArchivedListArgs,
    effect="read",
)
def list_archived(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.managers.memory.archived(limit=arg(cmd, "limit", default=10, kind=int))
    lines = [
        f"[{r.tier} {r.ref} · archived {r.archived_at:%Y-%m-%d}] {(r.title + ': ') if r.title else ''}{r.text[:160]}"
        for r in rows
    ]
    return CommandResult("\n".join(lines) or "nothing is archived", show=True)


class ToolsUsedArgs(Args):
    kind: Literal["tool", "link"] | None = None
    limit: Limit = 10


@FAMILY.command(
    "tools.used",
    '{"kind": "tool|link", "limit": 10}  (the tools and links I use most, with their counts)',
    args=ToolsUsedArgs,
    effect="read",
)
def tools_used(cmd: Command, ctx: CommandContext) -> CommandResult:
    kind = arg(cmd, "kind", default=None)
    lines = ctx.managers.tool_uses.lines(kind=kind, limit=arg(cmd, "limit", default=10, kind=int))
    return CommandResult("\n".join(lines) or "no tool or link used yet", show=True)


class AnonymiseArgs(Args):
    tiers: Words | None = None


@FAMILY.command(
    "memory.anonymise",
    '{"tiers": ["diary", "entity"]}  (my human asked: names and places in my memory '
    "become placeholders — found offline, none named here; changes my memory: needs my human's approval; "
    "only my human can undo it)",
    args=AnonymiseArgs,
    effect="modify_self",
)
def anonymise(cmd: Command, ctx: CommandContext) -> CommandResult:
    persona = ctx.services.persona
    try:
        result = ctx.managers.anonymise.anonymise(
            tiers=arg(cmd, "tiers", default=None, kind=list), keep=[persona.name, persona.display_name]
        )
    except ValueError as exc:
        raise CommandError(f"memory.anonymise: {exc}") from None
    if not result.mapping:
        return CommandResult("nothing to anonymise: no names or places found", show=True)
    # the originals never reach a result, a log or a prompt: only the placeholders and the counts
    return CommandResult(
        f"anonymised {len(result.mapping)} name(s) in {result.rows} memories: "
        f"{', '.join(result.placeholders())}; {result.history} history entries rewritten; "
        "the key to undo it is my human's alone",
        show=True,
    )
