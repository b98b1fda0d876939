"""The use counts of tools and links (HMP's frequently used tools and links). All their SQL lives here."""

from __future__ import annotations

import builtins
from datetime import datetime

from sqlalchemy import select

from memory.models import ToolUse
from memory.repositories.base import Repo


class ToolUseRepo(Repo):
    def count(self, kind: str, name: str, now: datetime) -> ToolUse:
        """One more use of `name` (created at its first use)."""
        row = self.session.scalar(select(ToolUse).where(ToolUse.kind == kind, ToolUse.name == name))
        if row is None:
            row = ToolUse(kind=kind, name=name, uses=0, first_used_at=now, last_used_at=now)
            self.session.add(row)
        row.uses += 1
        row.last_used_at = now
        self.session.flush()
        return row

    def most_used(self, *, kind: str | None = None, limit: int = 10) -> builtins.list[ToolUse]:
        query = select(ToolUse)
        if kind is not None:
            query = query.where(ToolUse.kind == kind)
        return builtins.list(
            self.session.scalars(
                query.order_by(ToolUse.uses.desc(), ToolUse.last_used_at.desc(), ToolUse.id).limit(limit)
            )
        )
