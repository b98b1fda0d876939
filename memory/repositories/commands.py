"""Executed commands: one row per command seen; its unique `cmd_key` makes a command's effect commit at most once."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import select

from memory.models import ExecutedCommand
from memory.repositories.base import Repo


class CommandRepo(Repo):
    def get(self, cmd_key: str) -> ExecutedCommand | None:
        return self.session.scalars(select(ExecutedCommand).where(ExecutedCommand.cmd_key == cmd_key)).first()

    def record(self, **fields: Any) -> ExecutedCommand:
        row = ExecutedCommand(**fields)
        self.session.add(row)
        self.session.flush()  # raises IntegrityError on a duplicate cmd_key
        return row

    def set_status(self, cmd_key: str, status: str, result: str) -> bool:
        """A parked command's later fate (approved and run, denied, failed); False when there is no such row."""
        row = self.get(cmd_key)
        if row is None:
            return False
        row.status, row.result = status, result
        self.session.flush()
        return True

    def at_ticks(self, thread_id: str, ticks: Iterable[int]) -> list[ExecutedCommand]:
        """The commands seen in these ticks of a thread, in the order they were recorded."""
        return list(
            self.session.scalars(
                select(ExecutedCommand)
                .where(ExecutedCommand.thread_id == thread_id, ExecutedCommand.tick.in_(list(ticks)))
                .order_by(ExecutedCommand.id)
            ).all()
        )

    def recent(self, limit: int = 50, thread_id: str | None = None) -> list[ExecutedCommand]:
        q = select(ExecutedCommand)
        if thread_id:
            q = q.where(ExecutedCommand.thread_id == thread_id)
        return list(reversed(self.session.scalars(q.order_by(ExecutedCommand.id.desc()).limit(limit)).all()))
