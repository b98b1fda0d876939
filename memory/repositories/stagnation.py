"""Anti-stagnation metrics (HMP `anti_stagnation_metrics`): one row per tick's novelty check and its reflex."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Insert, Select, Update, bindparam, insert, select, update

from memory.models import AntiStagnationMetric
from memory.repositories.base import Repo, insert_values, prepared, table_of


@prepared
def _last_two_rows() -> Select[int, int, float | None, list[Any], list[Any]]:
    """Core: a thread's rows up to a tick, newest first (that tick's and the one before), as much as `add` reads."""
    c = table_of(AntiStagnationMetric).c
    return (select(c.id, c.tick, c.novelty_after, c.triggered_actions, c.mechanisms)
            .where(c.thread_id == bindparam("thread_id"), c.tick <= bindparam("tick"))
            .order_by(c.tick.desc(), c.id.desc()).limit(2))


@prepared
def _insert_row() -> Insert:
    return insert(table_of(AntiStagnationMetric))


@prepared
def _update_row(*columns: str) -> Update:
    table = table_of(AntiStagnationMetric)
    return update(table).where(table.c.id == bindparam("row_id")).values({c: bindparam(f"v_{c}") for c in columns})


class AntiStagnationRepo(Repo):
    def add(self, **fields: Any) -> None:
        """One tick's row (a re-run of the same tick, after a kill, replaces its row instead of adding one); the
        thread's previous row learns how novel the output after its reflex was. One query finds both."""
        thread_id, tick = fields["thread_id"], fields["tick"]
        rows = self.core(_last_two_rows(), {"thread_id": thread_id, "tick": tick}).all()  # Core: the rows are only
        current = next((row for row in rows if row.tick == tick), None)  # read, and the table is no memory history
        before = next((row for row in rows if row.tick < tick), None)
        if before is not None and before.novelty_after is None and (before.triggered_actions or before.mechanisms):
            self._update(before.id, novelty_after=fields.get("novelty_score"))
        if current is None:
            self.core(_insert_row(), insert_values(AntiStagnationMetric, fields))
        else:
            self._update(current.id, **fields)

    def _update(self, row_id: int, **values: Any) -> None:
        self.core(_update_row(*values), {"row_id": row_id, **{f"v_{k}": v for k, v in values.items()}})

    def at_ticks(self, thread_id: str, ticks: Iterable[int]) -> list[AntiStagnationMetric]:
        """The rows of these ticks of a thread."""
        return list(self.session.scalars(select(AntiStagnationMetric).where(
            AntiStagnationMetric.thread_id == thread_id, AntiStagnationMetric.tick.in_(list(ticks)))
            .order_by(AntiStagnationMetric.id)).all())

    def recent(self, limit: int = 20, thread_id: str | None = None) -> list[AntiStagnationMetric]:
        q = select(AntiStagnationMetric)
        if thread_id is not None:
            q = q.where(AntiStagnationMetric.thread_id == thread_id)
        return list(reversed(self.session.scalars(q.order_by(AntiStagnationMetric.id.desc()).limit(limit)).all()))
