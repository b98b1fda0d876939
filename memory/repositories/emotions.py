"""Nexus Ark emotion log: the human's (and the persona's) emotions over time."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from memory.models import EmotionLogEntry, utcnow
from memory.repositories.base import Repo


class EmotionLogRepo(Repo):
    def add(self, emotion: str, strength: int = 3, *, subject: str = "user", snippet: str = "",
            thread_id: str | None = None, tick: int | None = None, created_at: datetime | None = None) -> EmotionLogEntry:
        row = EmotionLogEntry(emotion=emotion, strength=strength, subject=subject, snippet=snippet[:200],
                              thread_id=thread_id, tick=tick, created_at=created_at or utcnow())
        self.s.add(row)
        self.s.flush()
        return row

    def recent(self, subject: str | None = None, limit: int = 20, *, thread_id: str | None = None,
               tick: int | None = None, since: datetime | None = None) -> list[EmotionLogEntry]:
        q = select(EmotionLogEntry)
        if subject:
            q = q.where(EmotionLogEntry.subject == subject)
        if thread_id is not None:
            q = q.where(EmotionLogEntry.thread_id == thread_id)
        if tick is not None:
            q = q.where(EmotionLogEntry.tick == tick)
        if since is not None:
            q = q.where(EmotionLogEntry.created_at >= since)
        return list(reversed(self.s.scalars(q.order_by(EmotionLogEntry.id.desc()).limit(limit)).all()))
