"""The live journal (`live_events`): what a running loop did, step by step, for any process that streams it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete, func, select

from memory.models import LiveEvent
from memory.repositories.base import Repo


class LiveEventRepo(Repo):
    def add_many(self, events: Iterable[dict[str, Any]]) -> int:
        rows = [LiveEvent(**event) for event in events]
        self.s.add_all(rows)
        self.s.flush()
        return len(rows)

    def after(self, cursor: int, limit: int = 200, kinds: Iterable[str] | None = None) -> list[LiveEvent]:
        query = select(LiveEvent).where(LiveEvent.id > cursor)
        if kinds:
            query = query.where(LiveEvent.kind.in_(list(kinds)))
        return list(self.s.scalars(query.order_by(LiveEvent.id).limit(limit)).all())

    def newest_id(self) -> int:
        return int(self.s.scalar(select(func.max(LiveEvent.id))) or 0)

    def trim(self, keep: int) -> int:
        """Keep the newest `keep` events."""
        newest = self.newest_id()
        if newest <= keep:
            return 0
        return self.s.execute(delete(LiveEvent).where(LiveEvent.id <= newest - keep)).rowcount or 0
