"""Nexus Ark episodic memory: one summary per day, rolled up per week and per month."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import select

from memory.models import Episode, utcnow
from memory.repositories.base import TierRepo


class EpisodeRepo(TierRepo):
    def upsert(self, period: str, start: str, summary: str, *, key_events: Iterable[str] = (),
               emotional_tone: str = "neutral", sources: Iterable[str] = ()) -> Episode:
        row = self.get(period, start)
        if row is None:
            row = Episode(period=period, start=start, summary=summary)
            self.s.add(row)
        row.summary, row.key_events, row.emotional_tone = summary, list(key_events), emotional_tone
        row.sources = list(sources)
        self.s.flush()
        self.items.put("episode", row.id, summary, title=f"{period} of {start}", tags=[period],
                       created_at=datetime.fromisoformat(start).replace(tzinfo=utcnow().tzinfo), importance=0.6)
        return row

    def recent(self, period: str = "day", limit: int = 3) -> list[Episode]:
        rows = self.s.scalars(select(Episode).where(Episode.period == period)
                              .order_by(Episode.start.desc()).limit(limit)).all()
        return list(reversed(rows))

    def get(self, period: str, start: str) -> Episode | None:
        return self.s.scalars(select(Episode).where(Episode.period == period, Episode.start == start)).first()

    def between(self, period: str, first: str, last: str) -> list[Episode]:
        return list(self.s.scalars(select(Episode).where(Episode.period == period, Episode.start >= first,
                                                         Episode.start <= last).order_by(Episode.start)).all())
