"""Anti-stagnation metrics (HMP `anti_stagnation_metrics`): one row per tick's novelty check and its reflex."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Select, bindparam, select

from memory.models import AntiStagnationMetric
from memory.repositories.base import Repo, prepared


@prepared
def _last_two() -> Select[AntiStagnationMetric]:
    """A thread's rows up to a tick, newest first: that tick's and the one before."""
    return (select(AntiStagnationMetric).where(AntiStagnationMetric.thread_id == bindparam("thread_id"),
                                               AntiStagnationMetric.tick <= bindparam("tick"))
            .order_by(AntiStagnationMetric.tick.desc(), AntiStagnationMetric.id.desc()).limit(2))


class AntiStagnationRepo(Repo):
    def add(self, **fields: Any) -> AntiStagnationMetric:
        """One tick's row (a re-run of the same tick, after a kill, replaces its row instead of adding one); the
        thread's previous row learns how novel the output after its reflex was. One query finds both."""
        thread_id, tick = fields["thread_id"], fields["tick"]
        rows = self.session.scalars(_last_two(), {"thread_id": thread_id, "tick": tick}).all()
        current = next((row for row in rows if row.tick == tick), None)
        before = next((row for row in rows if row.tick < tick), None)
        if before is not None and before.novelty_after is None and (before.triggered_actions or before.mechanisms):
            before.novelty_after = fields.get("novelty_score")
        return self._upsert(current, AntiStagnationMetric, fields)

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
