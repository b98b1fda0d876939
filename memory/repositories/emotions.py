"""Nexus Ark emotion log: the human's (and the persona's) emotions over time."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Select, bindparam, select

from memory.models import EmotionLogEntry, utcnow
from memory.repositories.base import Repo, prepared


@prepared
def _newest(subject: bool, thread: bool, tick: bool, since: bool) -> Select[EmotionLogEntry]:
    q = select(EmotionLogEntry)
    if subject:
        q = q.where(EmotionLogEntry.subject == bindparam("subject"))
    if thread:
        q = q.where(EmotionLogEntry.thread_id == bindparam("thread_id"))
    if tick:
        q = q.where(EmotionLogEntry.tick == bindparam("tick"))
    if since:
        q = q.where(EmotionLogEntry.created_at >= bindparam("since"))
    return q.order_by(EmotionLogEntry.id.desc()).limit(bindparam("limit"))


class EmotionLogRepo(Repo):
    def add(self, emotion: str, strength: int = 3, *, subject: str = "user", snippet: str = "",
            thread_id: str | None = None, tick: int | None = None, created_at: datetime | None = None) -> EmotionLogEntry:
        row = EmotionLogEntry(emotion=emotion, strength=strength, subject=subject, snippet=snippet[:200],
                              thread_id=thread_id, tick=tick, created_at=created_at or utcnow())
        self.session.add(row)
        self.session.flush()
        return row

    def recent(self, subject: str | None = None, limit: int = 20, *, thread_id: str | None = None,
               tick: int | None = None, since: datetime | None = None) -> list[EmotionLogEntry]:
        q = _newest(bool(subject), thread_id is not None, tick is not None, since is not None)
        rows = self.session.scalars(q, {"subject": subject, "thread_id": thread_id, "tick": tick, "since": since,
                                  "limit": limit}).all()
        return list(reversed(rows))
