"""The memory rows written from untrusted text (`taints`, memory/taint.py): marked by the session hooks, read by the
prompt (which fences them with their origin), cleared by the owner.

Every statement here runs on the unit's connection without the ORM around it: `mark` is called from inside a flush
(the hooks'), where the session may not flush again."""

from __future__ import annotations

import builtins
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy import inspect as sa_inspect

from memory.clock import utcnow
from memory.models import (
    Abstract,
    AgentRecord,
    AgentTableRow,
    Concept,
    ConceptLink,
    DiaryEntry,
    Entity,
    Episode,
    Goal,
    Insight,
    LLMMemory,
    MemoryBlock,
    MemoryItem,
    Message,
    Note,
    OpenQuestion,
    Taint,
    Task,
    UnverifiedFact,
    table_of,
)
from memory.repositories.base import Repo

TABLE = table_of(Taint)
READS = "anima_taint_reads"  # session.info: the (tier, ref) of the memory rows a unit read, while it tracks them
# the memory tiers a later prompt shows (a block, a recall, a command's result), by the names memory_history uses
TIERS: dict[type, str | None] = {
    Goal: "goal",
    Task: "task",
    Note: "note",
    Message: "message",
    Abstract: "abstract",
    DiaryEntry: "diary",
    Concept: "concept",
    ConceptLink: "link",
    LLMMemory: "llm_memory",
    Entity: "entity",
    UnverifiedFact: "fact",
    OpenQuestion: "question",
    Insight: "insight",
    Episode: "episode",
    AgentTableRow: "table_row",
    AgentRecord: "record",
    MemoryBlock: None,  # a memory block's tier is its name (core, notepad)
}
MAX_SOURCES = 12  # as memory/provenance.py: enough to judge, never unbounded
TEXT_COLUMNS = ("title", "text", "summary", "content", "claim", "insight", "strategy", "description", "name", "topic")


THOUGHT = "my thought"  # how a thought (a `message` row) is named as the row a source came through


def via_of(tier: str, ref: Any) -> str:
    """The name of a tainted row as the row a source reached a prompt through (`via`): "goal 5", "my thought 812"."""
    return f"{THOUGHT} {ref}" if tier == "message" else f"{tier} {ref}"


def merge(*groups: Iterable[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """Sources, each once (origin + ref), at most MAX_SOURCES, the first seen kept."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for group in groups:
        for item in group or ():
            if isinstance(item, Mapping) and item.get("origin"):
                out.setdefault((str(item["origin"]), str(item.get("ref", "")), str(item.get("via", ""))), dict(item))
    return list(out.values())[:MAX_SOURCES]


def item_key(tier: str, ref: str) -> tuple[str, str] | None:
    """The tainted row a retrieval-catalogue item (or a digest's source `tier:ref`) stands for; None for the
    knowledge base (its chunks carry their own origin) and for what is no row of a tier."""
    ref = str(ref)
    if tier == "message":
        kind, _, rest = ref.partition(":")
        if kind in ("msg", "note") and rest:
            return ("message" if kind == "msg" else "note", rest)
        return ("message", ref) if ref.isdigit() else None
    if tier in ("kb", "") or not ref:
        return None
    return tier, ref


def row_key(obj: Any) -> tuple[str, str] | None:
    """(tier, ref) of a row of a tainted tier, else None."""
    model = type(obj)
    if model is MemoryItem:
        return item_key(obj.tier, obj.ref)
    if model not in TIERS:
        return None
    values = sa_inspect(obj).dict
    tier = TIERS[model] or values.get("name")
    ref = values.get("name") if model is MemoryBlock else values.get("id")
    return (str(tier), str(ref)) if tier and ref is not None else None


def note_reads(state: Any) -> Any:
    """The `do_orm_execute` hook (memory/taint.py): while a unit tracks its reads, the memory rows its ORM queries
    return are noted."""
    seen = state.session.info.get(READS)
    if seen is None or not state.is_select or state.is_column_load:
        return None
    frozen = state.invoke_statement().freeze()
    for row in frozen().all():
        for value in row:
            if type(value) in TIERS or type(value) is MemoryItem:
                if (key := row_key(value)) is not None:
                    seen.add(key)
    return frozen()


def _by_tier(keys: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    by_tier: dict[str, list[str]] = defaultdict(list)
    for tier, ref in keys:
        by_tier[str(tier)].append(str(ref))
    return by_tier


class TaintRepo(Repo):
    def _run(self, statement: Any) -> Any:
        return self.session.connection().execute(statement)

    def mark(
        self,
        keys: Iterable[tuple[str, str]],
        sources: Sequence[Mapping[str, Any]],
        *,
        thread_id: str | None,
        tick: int | None,
        now: datetime | None = None,
    ) -> int:
        """Taint these rows with `sources` (an active taint gains them; a cleared one is tainted anew: a new write
        from untrusted text is a new question for the owner). Returns how many rows were marked."""
        wanted = list(dict.fromkeys((str(t)[:32], str(r)[:128]) for t, r in keys))
        if not wanted or not sources:
            return 0
        now = now or utcnow()
        have = {(row.tier, row.ref): row for row in self._rows(wanted)}
        for key in wanted:
            row = have.get(key)
            if row is None:
                self._run(
                    insert(Taint).values(
                        tier=key[0],
                        ref=key[1],
                        sources=merge(sources),
                        thread_id=thread_id,
                        tick=tick,
                        created_at=now,
                        updated_at=now,
                        cleared_reason="",
                    )
                )
            elif row.cleared_at is not None:
                self._run(
                    update(Taint)
                    .where(Taint.id == row.id)
                    .values(
                        sources=merge(sources),
                        thread_id=thread_id,
                        tick=tick,
                        updated_at=now,
                        cleared_at=None,
                        cleared_by=None,
                        cleared_reason="",
                    )
                )
            else:
                self._run(
                    update(Taint).where(Taint.id == row.id).values(sources=merge(row.sources, sources), updated_at=now)
                )
        return len(wanted)

    def _rows(self, keys: list[tuple[str, str]]) -> builtins.list[Any]:
        rows: list[Any] = []
        for tier, refs in _by_tier(keys).items():
            rows += self._run(select(TABLE).where(TABLE.c.tier == tier, TABLE.c.ref.in_(refs))).all()
        return rows

    def day_episodes(self, days: list[str]) -> builtins.list[int]:
        """The ids of the day summaries of these days (a week's or a month's summary names its days)."""
        table = table_of(Episode)
        return [
            int(row.id)
            for row in self._run(select(table.c.id).where(table.c.period == "day", table.c.start.in_(days))).all()
        ]

    def any_active(self) -> bool:
        """Whether any row is tainted now (the prompt skips its look-ups when none is)."""
        return self._run(select(TABLE.c.id).where(TABLE.c.cleared_at.is_(None)).limit(1)).first() is not None

    def of(self, tier: str, refs: Iterable[Any]) -> dict[str, builtins.list[dict[str, Any]]]:
        """The sources of the tainted rows among `refs` of one tier (active taints only), by ref."""
        wanted = list(dict.fromkeys(str(r) for r in refs))
        if not wanted:
            return {}
        rows = self._run(
            select(TABLE.c.ref, TABLE.c.sources).where(
                TABLE.c.tier == tier, TABLE.c.ref.in_(wanted), TABLE.c.cleared_at.is_(None)
            )
        ).all()
        return {row.ref: list(row.sources or []) for row in rows}

    def of_keys(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], builtins.list[dict[str, Any]]]:
        """The sources of the tainted rows among (tier, ref) keys (active taints only)."""
        found: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for tier, refs in _by_tier(keys).items():
            found.update({(tier, ref): sources for ref, sources in self.of(tier, refs).items()})
        return found

    def get(self, taint_id: int) -> Taint | None:
        return self.session.get(Taint, int(taint_id))

    def find(self, tier: str, ref: Any) -> Taint | None:
        return self.session.scalars(select(Taint).where(Taint.tier == tier, Taint.ref == str(ref))).first()

    def active(self, limit: int = 50) -> builtins.list[Taint]:
        """The tainted rows, newest first."""
        return list(
            self.session.scalars(
                select(Taint)
                .where(Taint.cleared_at.is_(None))
                .order_by(Taint.updated_at.desc(), Taint.id.desc())
                .limit(limit)
            ).all()
        )

    def clear_keys(self, keys: Iterable[tuple[str, str]], *, by: str, now: datetime | None = None) -> None:
        """Clear the active taints of these rows (the owner rewrote them)."""
        now = now or utcnow()
        for tier, refs in _by_tier(keys).items():
            self._run(
                update(Taint)
                .where(Taint.tier == tier, Taint.ref.in_(refs), Taint.cleared_at.is_(None))
                .values(cleared_at=now, cleared_by=by[:64], cleared_reason="my owner rewrote it", updated_at=now)
            )

    def clear_derived(self, tier: str, ref: Any, *, by: str, now: datetime) -> int:
        """Clear what was written only through a row the owner trusts (every source of it came `via` that row — or,
        in turn, via a row cleared so), as the trusted row's words are now the owner's. How many were cleared."""
        trusted = [via_of(tier, ref)]
        cleared = 0
        while trusted:
            through = trusted.pop()
            for row in self._run(
                select(TABLE.c.id, TABLE.c.tier, TABLE.c.ref, TABLE.c.sources).where(TABLE.c.cleared_at.is_(None))
            ).all():
                vias = [str(s.get("via", "")) for s in row.sources or [] if isinstance(s, Mapping)]
                if (
                    vias
                    and all(v == through or v.startswith(f"{through},") for v in vias)
                    and self.clear(row.id, by=by, reason=f"written from {through}, which my owner trusted", now=now)
                ):
                    cleared += 1
                    trusted.append(via_of(row.tier, row.ref))
        return cleared

    def row_text(self, tier: str, ref: str) -> str:
        """What the tainted row says now ("" when it is gone): its title, text, summary or content."""
        model = next((m for m, name in TIERS.items() if name == tier), None)
        if model is None or not str(ref).isdigit():
            return ""
        row = self.session.get(model, int(ref))
        if row is None:
            return ""
        return next((str(value) for column in TEXT_COLUMNS if (value := getattr(row, column, None))), "")

    def count_active(self) -> int:
        return int(self._run(select(func.count(TABLE.c.id)).where(TABLE.c.cleared_at.is_(None))).scalar() or 0)

    def clear(self, taint_id: int, *, by: str, reason: str, now: datetime) -> bool:
        """The owner trusts the row: its taint is cleared (kept, with who and why). False when it was not active."""
        result = self._run(
            update(Taint)
            .where(Taint.id == int(taint_id), Taint.cleared_at.is_(None))
            .values(cleared_at=now, cleared_by=by[:64], cleared_reason=reason, updated_at=now)
        )
        if result.rowcount != 1:
            return False
        self.session.get(Taint, int(taint_id), populate_existing=True)  # a held row reads the clearance
        return True
