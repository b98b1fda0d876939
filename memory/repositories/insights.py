"""Nexus Ark dream diary: the insight, strategy and log entry of each dream, retrievable."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from memory.models import Insight, utcnow
from memory.repositories.base import TierRepo


class InsightRepo(TierRepo):
    def add(self, insight: str, *, strategy: str = "", log_entry: str = "", trigger_topic: str = "",
            level: int = 1, created_at: datetime | None = None) -> Insight:
        row = Insight(insight=insight, strategy=strategy, log_entry=log_entry, trigger_topic=trigger_topic, level=level,
                      created_at=created_at or utcnow())
        self.s.add(row)
        self.s.flush()
        self.items.put("insight", row.id, f"{insight}\nStrategy: {strategy}".strip(), title=trigger_topic,
                       importance=0.7)
        return row

    def latest(self) -> Insight | None:
        return self.s.scalars(select(Insight).order_by(Insight.id.desc()).limit(1)).first()

    def recent(self, limit: int = 10) -> list[Insight]:
        return list(self.s.scalars(select(Insight).order_by(Insight.id.desc()).limit(limit)).all())

    def last_at_level(self, level: int) -> Insight | None:
        """The latest dream of at least this level."""
        return self.s.scalars(select(Insight).where(Insight.level >= level).order_by(Insight.id.desc()).limit(1)).first()

    def first(self) -> Insight | None:
        return self.s.scalars(select(Insight).order_by(Insight.id).limit(1)).first()
