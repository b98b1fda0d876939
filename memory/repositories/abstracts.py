"""HMP `abstracts`: periodic thematic digests, each with the ids of what it was made from."""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import Select, bindparam, select

from memory.models import Abstract, utcnow
from memory.repositories.base import prepared
from memory.repositories.tiered import TierRepo


@prepared
def _newest(since: bool) -> Select[Abstract]:
    q = select(Abstract).where(Abstract.created_at >= bindparam("since")) if since else select(Abstract)
    return q.order_by(Abstract.id.desc()).limit(bindparam("limit"))


class AbstractRepo(TierRepo):
    def add(self, title: str, summary: str, *, tags: Iterable[str] = (), sources: Iterable[str] = (),
            trigger: str = "manual", thread_id: str | None = None) -> Abstract:
        row = Abstract(title=title, summary=summary, tags=list(tags), sources=list(sources), trigger=trigger,
                       thread_id=thread_id)
        self.session.add(row)
        self.session.flush()
        self.items.put("abstract", row.id, summary, title=title, tags=row.tags, importance=0.6, thread_id=thread_id)
        return row

    def get(self, abstract_id: int) -> Abstract:
        return self._get(Abstract, abstract_id)

    def extend(self, abstract_id: int, text: str, sources: Iterable[str] = ()) -> Abstract:
        row = self.get(abstract_id)
        row.summary = f"{row.summary}\n{text}".strip()
        row.sources = list(dict.fromkeys([*row.sources, *sources]))
        row.updated_at = utcnow()
        self.items.put("abstract", row.id, row.summary, title=row.title, tags=row.tags, importance=0.6)
        return row

    def rewrite(self, abstract_id: int, *, title: str, summary: str, tags: Iterable[str]) -> Abstract:
        """Replace an abstract's words (anonymisation), its searchable item with it."""
        row = self.get(abstract_id)
        row.title, row.summary, row.tags, row.updated_at = title, summary, list(tags), utcnow()
        self.items.put("abstract", row.id, row.summary, title=row.title, tags=row.tags, importance=0.6,
                       thread_id=row.thread_id)
        return row

    def list(self, *, tags: Iterable[str] | None = None, since: datetime | None = None, limit: int = 5) -> list[Abstract]:
        rows = list(self.session.scalars(_newest(since is not None),
                                   {"since": since, "limit": limit * 10 if tags else limit}).all())
        if tags:
            wanted = {t.lower() for t in tags}
            rows = [r for r in rows if wanted & {str(t).lower() for t in r.tags or []}][:limit]
        return rows

    def of_thread(self, thread_id: str, limit: int) -> builtins.list[Abstract]:
        """The thread's newest `limit` abstracts, newest first."""
        return list(self.session.scalars(select(Abstract).where(Abstract.thread_id == thread_id)
                                   .order_by(Abstract.id.desc()).limit(limit)).all())

    def latest(self) -> Abstract | None:
        return self.session.scalars(select(Abstract).order_by(Abstract.id.desc()).limit(1)).first()
