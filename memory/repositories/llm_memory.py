"""HMP `llm_memory`: the model's own notepad of ideas; its active entries are searchable like any memory."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Unpack

from sqlalchemy import Row, Select, bindparam, select

from memory.clock import utcnow
from memory.models import LLMMemory
from memory.repositories.base import prepared, table_of
from memory.repositories.tiered import StatusTierRepo


@prepared
def _newest(include_archived: bool) -> Select[LLMMemory]:
    q = select(LLMMemory) if include_archived else select(LLMMemory).where(LLMMemory.status == "active")
    return q.order_by(LLMMemory.id.desc()).limit(bindparam("limit"))


@prepared
def _newest_lines() -> Select[Unpack[tuple[Any, ...]]]:
    """Core: the newest active entries' ids, titles and texts (what the prompt shows of them)."""
    c = table_of(LLMMemory).c
    return select(c.id, c.title, c.content).where(c.status == "active").order_by(c.id.desc()).limit(bindparam("limit"))


class LLMMemoryRepo(StatusTierRepo[LLMMemory]):
    model, tier = LLMMemory, "llm_memory"

    def _index(self, row: LLMMemory) -> None:
        self._put_item(
            row,
            row.content,
            title=row.title,
            tags=row.tags,
            thread_id=row.thread_id,
            importance=0.6,
            created_at=row.created_at,
        )

    def index_all(self) -> None:
        """Give every entry its catalogue item (the v4 migration: entries made before they were searchable)."""
        for row in self.session.scalars(select(LLMMemory)).all():
            self._index(row)
        self.session.flush()

    def add(
        self,
        content: str,
        *,
        title: str = "",
        tags: Iterable[str] = (),
        thread_id: str | None = None,
        llm_id: str | None = None,
    ) -> LLMMemory:
        row = LLMMemory(
            content=content, title=title, tags=list(tags), thread_id=thread_id, llm_id=llm_id, status="active"
        )
        return self._insert(row)

    def recent(self, limit: int = 20, include_archived: bool = False) -> list[LLMMemory]:
        return list(reversed(self.session.scalars(_newest(include_archived), {"limit": limit}).all()))

    def recent_lines(self, limit: int = 20) -> list[Row[Unpack[tuple[Any, ...]]]]:
        """`recent` (active entries, oldest first) as plain rows of `id`, `title` and `content`, for the prompt."""
        return list(reversed(self.core(_newest_lines(), {"limit": limit}).all()))

    def update(
        self, entry_id: int, *, content: str | None = None, title: str | None = None, tags: list[str] | None = None
    ) -> LLMMemory:
        row = self.get(entry_id)
        if content is not None:
            row.content = content
        if title is not None:
            row.title = title
        if tags is not None:
            row.tags = list(tags)
        row.updated_at = utcnow()
        self._index(row)
        return row
