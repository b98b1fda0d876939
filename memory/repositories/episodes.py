"""Nexus Ark episodic memory: one summary per day, rolled up per week and per month."""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Unpack

from sqlalchemy import Row, Select, func, or_, select

from memory.clock import utcnow
from memory.models import Episode
from memory.repositories.base import one_of, prepared, table_of
from memory.repositories.tiered import TierRepo


@prepared
def _latest(counts: tuple[tuple[str, int], ...]) -> Select[Unpack[tuple[Any, ...]]]:
    """Core: the last n summaries of each (period, n), as plain rows (every column)."""
    table = table_of(Episode)
    c = table.c
    rank = func.row_number().over(partition_by=c.period, order_by=c.start.desc()).label("rank")
    ranked = select(c.id, c.period, rank).where(one_of(c.period, [p for p, _ in counts])).subquery()
    wanted = or_(*[(ranked.c.period == period) & (ranked.c.rank <= n) for period, n in counts])
    return select(table).join(ranked, ranked.c.id == c.id).where(wanted).order_by(c.start)


class EpisodeRepo(TierRepo):
    def upsert(
        self,
        period: str,
        start: str,
        summary: str,
        *,
        key_events: Iterable[str] = (),
        emotional_tone: str = "neutral",
        sources: Iterable[str] = (),
    ) -> Episode:
        row = self.get(period, start)
        if row is None:
            row = Episode(period=period, start=start, summary=summary)
            self.session.add(row)
        row.summary, row.key_events, row.emotional_tone = summary, list(key_events), emotional_tone
        row.sources = list(sources)
        self.session.flush()
        self._index(row)
        return row

    def _index(self, row: Episode) -> None:
        self.items.put(
            "episode",
            row.id,
            row.summary,
            title=f"{row.period} of {row.start}",
            tags=[row.period],
            created_at=datetime.fromisoformat(row.start).replace(tzinfo=utcnow().tzinfo),
            importance=0.6,
        )

    def by_id(self, episode_id: int) -> Episode:
        return self._get(Episode, episode_id)

    def list(self, *, period: str | None = None, limit: int = 50) -> list[Episode]:
        """Newest first, every period unless one is asked for."""
        q = select(Episode)
        if period:
            q = q.where(Episode.period == period)
        return list(self.session.scalars(q.order_by(Episode.start.desc(), Episode.id.desc()).limit(limit)).all())

    def update(
        self,
        episode_id: int,
        *,
        summary: str | None = None,
        emotional_tone: str | None = None,
        key_events: builtins.list[str] | None = None,
    ) -> Episode:
        row = self.by_id(episode_id)
        if summary is not None:
            row.summary = summary
        if emotional_tone is not None:
            row.emotional_tone = emotional_tone
        if key_events is not None:
            row.key_events = list(key_events)
        self.session.flush()
        self._index(row)
        return row

    def purge(self, episode_id: int) -> None:
        """Delete the episode and its catalogue item for good (a human's delete)."""
        self.session.delete(self.by_id(episode_id))
        self.items.remove("episode", episode_id)

    def purge_summaries_of(self, refs: Iterable[str]) -> int:
        """Delete for good the day summaries made from any of these items (`message:note:7`) and the week and month
        summaries rolled up from those days: upkeep builds them again from what is left. How many."""
        wanted = set(refs)
        if not wanted:
            return 0
        days = [
            row
            for row in self.session.scalars(select(Episode).where(Episode.period == "day")).all()
            if wanted & set(row.sources or [])
        ]
        rolled = {f"day:{d.start}" for d in days}
        rollups = [
            row
            for row in self.session.scalars(select(Episode).where(Episode.period != "day")).all()
            if rolled & set(row.sources or [])
        ]
        for row in [*days, *rollups]:
            item = self.items.find("episode", row.id)
            if item is not None:  # its words go, not only its place in recall
                item.text, item.title, item.context_before, item.context_after = "", "", "", ""
            self.purge(row.id)
        return len(days) + len(rollups)

    def latest(self, counts: dict[str, int]) -> dict[str, builtins.list[Row[Unpack[tuple[Any, ...]]]]]:
        """The last `counts[period]` summaries of each period, oldest first, in one query (`recent` for several),
        as plain rows (by the same names; read only: the prompt shows them every tick)."""
        found: dict[str, list[Row[Unpack[tuple[Any, ...]]]]] = {period: [] for period in counts}
        for row in self.core(_latest(tuple(counts.items()))).all():
            found[row.period].append(row)
        return found

    def recent(self, period: str = "day", limit: int = 3) -> builtins.list[Episode]:
        rows = self.session.scalars(
            select(Episode).where(Episode.period == period).order_by(Episode.start.desc()).limit(limit)
        ).all()
        return list(reversed(rows))

    def get(self, period: str, start: str) -> Episode | None:
        return self.session.scalars(select(Episode).where(Episode.period == period, Episode.start == start)).first()

    def between(self, period: str, first: str, last: str) -> builtins.list[Episode]:
        return list(
            self.session.scalars(
                select(Episode)
                .where(Episode.period == period, Episode.start >= first, Episode.start <= last)
                .order_by(Episode.start)
            ).all()
        )
