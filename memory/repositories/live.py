"""The live journal (`live_events`): what a running loop did, step by step, for any process that streams it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

from sqlalchemy import delete, func, select, text

from memory.models import LiveEvent
from memory.repositories.base import Repo, matched

CHANNEL = "anima_live"  # PostgreSQL: a NOTIFY with the persona's schema when its journal grows


class LiveEventRepo(Repo):
    def add_many(self, events: Iterable[dict[str, Any]]) -> int:
        rows = [LiveEvent(**event) for event in events]
        self.session.add_all(rows)
        self.session.flush()
        bind = self.session.get_bind()
        if rows and bind.dialect.name == "postgresql":  # delivered when this transaction commits; the schema the
            self.session.execute(
                text("SELECT pg_notify(:channel, current_schema())"),  # unit runs in (its persona's)
                {"channel": CHANNEL},
            )
        return len(rows)

    def after(self, cursor: int, limit: int = 200, kinds: Iterable[str] | None = None) -> list[LiveEvent]:
        query = select(LiveEvent).where(LiveEvent.id > cursor)
        if kinds:
            query = query.where(LiveEvent.kind.in_(list(kinds)))
        return list(self.session.scalars(query.order_by(LiveEvent.id).limit(limit)).all())

    def newest(self, limit: int, kinds: Iterable[str] | None = None) -> list[LiveEvent]:
        """The newest `limit` events (of these kinds), newest first."""
        query = select(LiveEvent)
        if kinds:
            query = query.where(LiveEvent.kind.in_(list(kinds)))
        return list(self.session.scalars(query.order_by(LiveEvent.id.desc()).limit(limit)).all())

    def newest_id(self) -> int:
        return int(self.session.scalar(select(func.max(LiveEvent.id))) or 0)

    def trim(self, keep: int) -> int:
        """Keep the newest `keep` events."""
        newest = self.newest_id()
        if newest <= keep:
            return 0
        return matched(self.session.execute(delete(LiveEvent).where(LiveEvent.id <= newest - keep))) or 0


async def journal_notifications(conninfo: str) -> AsyncIterator[str]:
    """The schemas whose journal grew, as PostgreSQL announces them (LISTEN on its own connection, until cancelled)."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True, connect_timeout=5) as conn:
        await conn.execute(f"LISTEN {CHANNEL}")
        async for notification in conn.notifies():
            yield notification.payload
