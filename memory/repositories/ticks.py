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
