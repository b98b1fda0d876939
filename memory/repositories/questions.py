"""Open questions (Nexus Ark): the curiosity drive's source. A resolved question stays visible for a while, then
goes."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Unpack

from sqlalchemy import ColumnElement, Row, Select, bindparam, func, select

from memory.clock import utcnow
from memory.models import OpenQuestion
from memory.repositories.base import Repo, prepared, table_of


@prepared
def _open(limited: bool) -> Select[OpenQuestion]:
    q = (
        select(OpenQuestion)
        .where(OpenQuestion.status == "open")
        .order_by(OpenQuestion.priority.desc(), OpenQuestion.id.desc())
    )
    return q.limit(bindparam("limit")) if limited else q


@prepared
def _open_lines(limited: bool) -> Select[Unpack[tuple[Any, ...]]]:
    """Core: `_open` as plain rows (every column)."""
    table = table_of(OpenQuestion)
    q = select(table).where(table.c.status == "open").order_by(table.c.priority.desc(), table.c.id.desc())
    return q.limit(bindparam("limit")) if limited else q


def _resolved_before_criteria() -> tuple[ColumnElement[bool], ...]:
    """The questions resolved before the bound `before` (what `purge_resolved` deletes, and its Core check)."""
    c = table_of(OpenQuestion).c
    return c.status == "resolved", c.resolved_at < bindparam("before")


@prepared
def _resolved_before() -> Select[OpenQuestion]:
    return select(OpenQuestion).where(*_resolved_before_criteria())


@prepared
def _any_resolved_before() -> Select[int]:
    """Core: whether `_resolved_before` finds anything (its first id)."""
    return select(table_of(OpenQuestion).c.id).where(*_resolved_before_criteria()).limit(1)


class QuestionRepo(Repo):
    def add(
        self,
        topic: str,
        *,
        context: str = "",
        priority: float = 0.5,
        source: str = "dream",
        created_at: datetime | None = None,
    ) -> OpenQuestion:
        existing = self.session.scalars(
            select(OpenQuestion).where(
                OpenQuestion.status == "open", func.lower(OpenQuestion.topic) == topic.strip().lower()
            )
        ).first()
        if existing is not None:  # asked again: it matters more, and it is fresh again
            existing.priority = max(existing.priority, float(priority))
            existing.created_at = created_at or utcnow()
            return existing
        row = OpenQuestion(
            topic=topic.strip(),
            context=context.strip(),
            priority=min(1.0, max(0.0, float(priority))),
            source=source,
            created_at=created_at or utcnow(),
        )
        self.session.add(row)
        self.session.flush()
        return row

    def get(self, question_id: int) -> OpenQuestion:
        return self._get(OpenQuestion, question_id)

    def update(
        self, question_id: int, *, topic: str | None = None, context: str | None = None, priority: float | None = None
    ) -> OpenQuestion:
        row = self.get(question_id)
        if topic is not None and topic.strip():
            row.topic = topic.strip()
        if context is not None:
            row.context = context.strip()
        if priority is not None:
            row.priority = min(1.0, max(0.0, float(priority)))
        self.session.flush()
        return row

    def open(self, limit: int | None = None) -> list[OpenQuestion]:
        return list(self.session.scalars(_open(bool(limit)), {"limit": limit}).all())

    def open_lines(self, limit: int | None = None) -> list[Row[Unpack[tuple[Any, ...]]]]:
        """`open` as plain rows (by the same names; read only: the drives weigh them every tick)."""
        return list(self.core(_open_lines(bool(limit)), {"limit": limit}).all())

    def list(self, limit: int = 50) -> list[OpenQuestion]:
        return list(self.session.scalars(select(OpenQuestion).order_by(OpenQuestion.id.desc()).limit(limit)).all())

    def resolve(self, question_id: int, resolution: str, now: datetime) -> OpenQuestion:
        row = self.get(question_id)
        row.status, row.resolution, row.resolved_at = "resolved", resolution.strip()[:1000], now
        return row

    def purge(self, question_id: int) -> None:
        """Delete the question for good (a human's delete)."""
        self.session.delete(self.get(question_id))
        self.session.flush()

    def purge_resolved(self, before: datetime) -> int:
        """Delete the questions resolved before `before` (the drives ask every tick; a plain Core query says when
        there are none, the usual answer)."""
        if self.core(_any_resolved_before(), {"before": before}).first() is None:
            return 0
        rows = self.session.scalars(_resolved_before(), {"before": before}).all()
        for row in rows:
            self.session.delete(row)
        return len(rows)
