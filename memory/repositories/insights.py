"""Nexus Ark dream diary: the insight, strategy and log entry of each dream, retrievable."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Select, select

from memory.clock import utcnow
from memory.models import Insight
from memory.repositories.base import prepared, table_of
from memory.repositories.tiered import TierRepo


@prepared
def _latest() -> Select[Insight]:
    return select(Insight).order_by(Insight.id.desc()).limit(1)


@prepared
def _latest_strategy() -> Select[str]:
    """Core: the latest insight's strategy (the prompt's one line of it)."""
    c = table_of(Insight).c
    return select(c.strategy).order_by(c.id.desc()).limit(1)


class InsightRepo(TierRepo):
    def add(
        self,
        insight: str,
        *,
        strategy: str = "",
        log_entry: str = "",
        trigger_topic: str = "",
        level: int = 1,
        created_at: datetime | None = None,
    ) -> Insight:
        row = Insight(
            insight=insight,
            strategy=strategy,
            log_entry=log_entry,
            trigger_topic=trigger_topic,
            level=level,
            created_at=created_at or utcnow(),
        )
        self.session.add(row)
        self.session.flush()
        self._index(row)
        return row

    def _index(self, row: Insight) -> None:
        self.items.put(
            "insight",
            row.id,
            f"{row.insight}\nStrategy: {row.strategy}".strip(),
            title=row.trigger_topic,
            importance=0.7,
        )

    def get(self, insight_id: int) -> Insight:
        return self._get(Insight, insight_id)

    def update(
        self,
        insight_id: int,
        *,
        insight: str | None = None,
        strategy: str | None = None,
        log_entry: str | None = None,
        trigger_topic: str | None = None,
    ) -> Insight:
        row = self.get(insight_id)
        for name, value in (
            ("insight", insight),
            ("strategy", strategy),
            ("log_entry", log_entry),
            ("trigger_topic", trigger_topic),
        ):
            if value is not None:
                setattr(row, name, value)
        self.session.flush()
        self._index(row)
        return row

    def purge(self, insight_id: int) -> None:
        """Delete the insight and its catalogue item for good (a human's delete)."""
        self.session.delete(self.get(insight_id))
        self.items.remove("insight", insight_id)

    def latest(self) -> Insight | None:
        return self.session.scalars(_latest()).first()

    def latest_strategy(self) -> str | None:
        """The latest insight's strategy (None when there is no insight), read as a plain value."""
        return self.core(_latest_strategy()).scalar()

    def recent(self, limit: int = 10) -> list[Insight]:
        return list(self.session.scalars(select(Insight).order_by(Insight.id.desc()).limit(limit)).all())

    def last_at_level(self, level: int) -> Insight | None:
        """The latest dream of at least this level."""
        return self.session.scalars(
            select(Insight).where(Insight.level >= level).order_by(Insight.id.desc()).limit(1)
        ).first()

    def first(self) -> Insight | None:
        return self.session.scalars(select(Insight).order_by(Insight.id).limit(1)).first()
