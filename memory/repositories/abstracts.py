"""HMP `abstracts`: periodic thematic digests, each with the ids of what it was made from."""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from datetime import datetime
from typing import Any, TypeVar, Unpack

from sqlalchemy import Row, Select, bindparam, select

from memory.clock import utcnow
from memory.models import Abstract
from memory.repositories.base import prepared, table_of
from memory.repositories.tiered import TierRepo


@prepared
def _newest(since: bool) -> Select[Abstract]:
    q = select(Abstract).where(Abstract.created_at >= bindparam("since")) if since else select(Abstract)
    return q.order_by(Abstract.id.desc()).limit(bindparam("limit"))


@prepared
def _newest_lines(since: bool) -> Select[tuple[int, str, str, list[str]]]:
    """Core: `_newest` as plain rows of what a prompt shows (read only)."""
    c = table_of(Abstract).c
    q = select(c.id, c.title, c.summary, c.tags)
    q = q.where(c.created_at >= bindparam("since")) if since else q
    return q.order_by(c.id.desc()).limit(bindparam("limit"))


R = TypeVar("R", Abstract, Row[Unpack[tuple[Any, ...]]])


def _tagged(rows: builtins.list[R], tags: Iterable[str] | None, limit: int) -> builtins.list[R]:
    """The newest `limit` of `rows` (newest first) with any of `tags` (any tag: all of them)."""
    if not tags:
        return rows
    wanted = {t.lower() for t in tags}
    return [r for r in rows if wanted & {str(t).lower() for t in r.tags or []}][:limit]


class AbstractRepo(TierRepo):
    def add(
        self,
        title: str,
        summary: str,
        *,
        tags: Iterable[str] = (),
        sources: Iterable[str] = (),
        trigger: str = "manual",
        thread_id: str | None = None,
    ) -> Abstract:
        row = Abstract(
            title=title, summary=summary, tags=list(tags), sources=list(sources), trigger=trigger, thread_id=thread_id
        )
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
        self.items.put(
            "abstract", row.id, row.summary, title=row.title, tags=row.tags, importance=0.6, thread_id=row.thread_id
        )
        return row

    def list(
        self, *, tags: Iterable[str] | None = None, since: datetime | None = None, limit: int = 5
    ) -> list[Abstract]:
        rows = list(
            self.session.scalars(
                _newest(since is not None), {"since": since, "limit": limit * 10 if tags else limit}
            ).all()
        )
        return _tagged(rows, tags, limit)

    def newest_lines(
        self, *, tags: Iterable[str] | None = None, since: datetime | None = None, limit: int = 5
    ) -> builtins.list[Row[Unpack[tuple[Any, ...]]]]:
        """`list` as plain rows (id, title, summary, tags; read only: the prompt shows them every tick)."""
        rows = list(
            self.core(_newest_lines(since is not None), {"since": since, "limit": limit * 10 if tags else limit}).all()
        )
        return _tagged(rows, tags, limit)

    def of_thread(self, thread_id: str, limit: int) -> builtins.list[Abstract]:
        """The thread's newest `limit` abstracts, newest first."""
        return list(
            self.session.scalars(
                select(Abstract).where(Abstract.thread_id == thread_id).order_by(Abstract.id.desc()).limit(limit)
            ).all()
        )

    def latest(self) -> Abstract | None:
        return self.session.scalars(select(Abstract).order_by(Abstract.id.desc()).limit(1)).first()
