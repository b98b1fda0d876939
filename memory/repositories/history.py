"""The history of every memory tier (`memory_history`): who changed what, when, and the row before and after.

Written by the flush listener in memory/history.py (one place for every tier); read by the web's history views."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import func, insert, select

from memory.models import MemoryChange
from memory.repositories.base import Repo


class HistoryRepo(Repo):
    def record(self, changes: Iterable[dict[str, Any]]) -> None:
        """Insert changes on the flush's own connection (inside a flush, without starting another one)."""
        rows = list(changes)
        if rows:
            self.session.connection().execute(insert(MemoryChange), rows)

    def list(
        self,
        *,
        tier: str | None = None,
        ref: str | int | None = None,
        actor: str | None = None,
        action: str | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[MemoryChange]:
        """Changes, newest first; `before_id` pages back."""
        q = select(MemoryChange)
        if tier:
            q = q.where(MemoryChange.tier == tier)
        if ref is not None:
            q = q.where(MemoryChange.ref == str(ref))
        if actor:
            q = q.where(MemoryChange.actor == actor)
        if action:
            q = q.where(MemoryChange.action == action)
        if before_id is not None:
            q = q.where(MemoryChange.id < before_id)
        return list(self.session.scalars(q.order_by(MemoryChange.id.desc()).limit(limit)).all())

    def table_sizes(self, models: Iterable[type]) -> dict[type, int]:
        """Rows in each of these tables, archived ones included (the memory page's tier sizes)."""
        return {model: int(self.session.scalar(select(func.count()).select_from(model)) or 0) for model in models}

    def ids(self, model: Any) -> builtins.list[int]:
        """Every row id of a memory table, archived rows included, oldest first (anonymisation walks them all)."""
        return [int(i) for i in self.session.scalars(select(model.id).order_by(model.id)).all()]

    def rewrite(self, change: Callable[[Any], Any]) -> int:
        """Every change's before and after passed through `change` (anonymisation: the history keeps no name the
        rows no longer hold); how many changes were rewritten."""
        rewritten = 0
        for row in self.session.scalars(select(MemoryChange).order_by(MemoryChange.id)).all():
            before, after = change(row.before), change(row.after)
            if before != row.before or after != row.after:
                row.before, row.after = before, after
                rewritten += 1
        self.session.flush()
        return rewritten

    def count(self, tier: str | None = None) -> int:
        q = select(func.count(MemoryChange.id))
        if tier:
            q = q.where(MemoryChange.tier == tier)
        return int(self.session.scalar(q) or 0)
