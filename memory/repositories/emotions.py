"""Nexus Ark emotion log: the human's (and the persona's) emotions over time."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Unpack

from sqlalchemy import Row, Select, bindparam, select

from memory.clock import utcnow
from memory.models import EmotionLogEntry
from memory.repositories.base import Repo, prepared, table_of


@prepared
def _newest(subject: bool, thread: bool, tick: bool, since: bool) -> Select[Unpack[tuple[Any, ...]]]:
    """Core: the newest entries, as plain rows (every column)."""
    table = table_of(EmotionLogEntry)
    c = table.c
    q = select(table)
    if subject:
        q = q.where(c.subject == bindparam("subject"))
    if thread:
        q = q.where(c.thread_id == bindparam("thread_id"))
    if tick:
        q = q.where(c.tick == bindparam("tick"))
    if since:
        q = q.where(c.created_at >= bindparam("since"))
    return q.order_by(c.id.desc()).limit(bindparam("limit"))


class EmotionLogRepo(Repo):
    def add(
        self,
        emotion: str,
        strength: int = 3,
        *,
        subject: str = "user",
        snippet: str = "",
        thread_id: str | None = None,
        tick: int | None = None,
        created_at: datetime | None = None,
    ) -> EmotionLogEntry:
        row = EmotionLogEntry(
            emotion=emotion,
            strength=strength,
            subject=subject,
            snippet=snippet[:200],
            thread_id=thread_id,
            tick=tick,
            created_at=created_at or utcnow(),
        )
        self.session.add(row)
        self.session.flush()
        return row

    def recent(
        self,
        subject: str | None = None,
        limit: int = 20,
        *,
        thread_id: str | None = None,
        tick: int | None = None,
        since: datetime | None = None,
    ) -> list[Row[Unpack[tuple[Any, ...]]]]:
        """The newest `limit` entries, oldest first, as plain rows (by the same names; read only: the drives weigh
        the human's every tick)."""
        q = _newest(bool(subject), thread_id is not None, tick is not None, since is not None)
        rows = self.core(
            q, {"subject": subject, "thread_id": thread_id, "tick": tick, "since": since, "limit": limit}
        ).all()
        return list(reversed(rows))
