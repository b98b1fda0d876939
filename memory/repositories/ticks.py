"""Ticks (HMP `agent_log`): one row per tick of a thread, with its LLM accounting."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select, update

from memory.models import Tick, utcnow
from memory.repositories.base import Repo


class TickRepo(Repo):
    def start(self, thread_id: str, tick: int, mode: str) -> Tick:
        row = self.s.scalars(select(Tick).where(Tick.thread_id == thread_id, Tick.tick == tick)).first()
        if row is None:
            row = Tick(thread_id=thread_id, tick=tick, mode=mode)
            self.s.add(row)
            self.s.flush()
        return row

    def get(self, thread_id: str, tick: int) -> Tick | None:
        return self.s.scalars(select(Tick).where(Tick.thread_id == thread_id, Tick.tick == tick)).first()

    def next_unfinished(self, thread_id: str, tick: int) -> int:
        """`tick`, or the first tick after it not yet finished (a finished tick whose checkpoint a kill lost)."""
        finished = set(self.s.scalars(select(Tick.tick).where(Tick.thread_id == thread_id, Tick.tick >= tick,
                                                              Tick.finished_at.is_not(None))).all())
        while tick in finished:
            tick += 1
        return tick

    def keep_answer(self, thread_id: str, tick: int, answer: dict[str, Any]) -> None:
        """The model's answer for a tick, kept until the tick finishes: a tick run again after a kill reuses it."""
        row = self.get(thread_id, tick)
        if row is not None:
            row.summary = {**(row.summary or {}), "answer": answer}
            self.s.flush()

    def kept_answer(self, thread_id: str, tick: int) -> dict[str, Any] | None:
        row = self.get(thread_id, tick)
        return (row.summary or {}).get("answer") if row is not None and row.finished_at is None else None

    def finish(self, thread_id: str, tick: int, *, status: str, summary: dict[str, Any],
               llm_calls: int, prompt_tokens: int, completion_tokens: int, llm_ms: float) -> None:
        self.s.execute(
            update(Tick)
            .where(Tick.thread_id == thread_id, Tick.tick == tick)
            .values(status=status, summary=summary, llm_calls=llm_calls, prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens, llm_ms=llm_ms, finished_at=utcnow())
        )

    def recent(self, limit: int = 20, thread_id: str | None = None) -> list[Tick]:
        q = select(Tick)
        if thread_id:
            q = q.where(Tick.thread_id == thread_id)
        return list(reversed(self.s.scalars(q.order_by(Tick.id.desc()).limit(limit)).all()))

    def count(self) -> int:
        return self.s.scalar(select(func.count(Tick.id))) or 0
