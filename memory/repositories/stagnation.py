"""Anti-stagnation metrics (HMP `anti_stagnation_metrics`): one row per tick's novelty check and its reflex."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import select

from memory.models import AntiStagnationMetric
from memory.repositories.base import Repo


class AntiStagnationRepo(Repo):
    def add(self, **fields: Any) -> AntiStagnationMetric:
        """One tick's row; a re-run of the same tick (after a kill) replaces its row instead of adding one."""
        row = self.s.scalars(select(AntiStagnationMetric).where(
            AntiStagnationMetric.thread_id == fields["thread_id"], AntiStagnationMetric.tick == fields["tick"])).first()
        return self._upsert(row, AntiStagnationMetric, fields)

    def record_after(self, thread_id: str, tick: int, novelty_score: float | None) -> None:
        """The previous tick's row learns how novel the output after its reflex was."""
        row = self.s.scalars(select(AntiStagnationMetric).where(
            AntiStagnationMetric.thread_id == thread_id, AntiStagnationMetric.tick < tick)
            .order_by(AntiStagnationMetric.tick.desc()).limit(1)).first()
        if row is not None and row.novelty_after is None and (row.triggered_actions or row.mechanisms):
            row.novelty_after = novelty_score

    def at_ticks(self, thread_id: str, ticks: Iterable[int]) -> list[AntiStagnationMetric]:
        """The rows of these ticks of a thread."""
        return list(self.s.scalars(select(AntiStagnationMetric).where(
            AntiStagnationMetric.thread_id == thread_id, AntiStagnationMetric.tick.in_(list(ticks)))
            .order_by(AntiStagnationMetric.id)).all())

    def recent(self, limit: int = 20, thread_id: str | None = None) -> list[AntiStagnationMetric]:
        q = select(AntiStagnationMetric)
        if thread_id is not None:
            q = q.where(AntiStagnationMetric.thread_id == thread_id)
        return list(reversed(self.s.scalars(q.order_by(AntiStagnationMetric.id.desc()).limit(limit)).all()))
