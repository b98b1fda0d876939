"""Ticks (HMP `agent_log`): one row per tick of a thread, with its LLM accounting."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Insert, Select, Update, bindparam, func, insert, select, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from memory.clock import utcnow
from memory.models import Tick
from memory.repositories.base import Repo, insert_values, prepared, table_of


@prepared
def _finished_from() -> Select[tuple[int, datetime | None]]:
    """Core: a thread's ticks from one on, by number, with when they finished (all `next_unfinished` needs)."""
    c = table_of(Tick).c
    return select(c.tick, c.finished_at).where(c.thread_id == bindparam("thread_id"), c.tick >= bindparam("tick"))


@prepared
def _of_tick() -> Select[Tick]:
    return select(Tick).where(Tick.thread_id == bindparam("thread_id"), Tick.tick == bindparam("tick"))


@prepared
def _insert_tick() -> Insert:
    return insert(table_of(Tick))


@prepared
def _update_tick(*columns: str) -> Update:
    """Core: a tick's row (by thread and tick) set to the values given for `columns` when it runs."""
    table = table_of(Tick)
    return (
        update(table)
        .where(table.c.thread_id == bindparam("w_thread_id"), table.c.tick == bindparam("w_tick"))
        .values({name: bindparam(f"v_{name}") for name in columns})
    )


class TickRepo(Repo):
    def __init__(self, session: Session):
        super().__init__(session)
        # thread -> (first tick, the ticks from there on that have a row): read by next_unfinished (a tick not in
        # it has no row, so starting it reads nothing), kept up as this unit adds rows
        self._from: dict[str, tuple[int, set[int]]] = {}
        self._held: dict[tuple[str, int], Tick] = {}  # the rows this unit loaded or added

    def start(self, thread_id: str, tick: int, mode: str) -> Tick:
        """The tick's row, counting its starts: a tick started again was cut short (a kill, a crash). A new row is
        one Core INSERT (every tick writes one)."""
        row = self.get(thread_id, tick)
        if row is None:
            row = self._add(thread_id, tick, mode=mode, summary={"attempts": 1})
        else:
            row.summary = {**(row.summary or {}), "attempts": int((row.summary or {}).get("attempts") or 0) + 1}
            self.session.flush()
        return row

    def fail(self, thread_id: str, tick: int, *, step: str | None, error: str, trace: str = "") -> Tick:
        """Close a tick that could not finish: the reason is kept, and the model's answer is quarantined — stored
        for `inspect`, never reused (a kept answer is reused only by an unfinished tick)."""
        row = self.get(thread_id, tick)
        if row is None:
            row = self._add(thread_id, tick)
        summary = dict(row.summary or {})
        answer = summary.pop("answer", None)
        row.summary = {
            **summary,
            "error": error,
            "step": step,
            "trace": trace[-4000:],
            **({"quarantined": answer} if answer is not None else {}),
        }
        row.status, row.finished_at = "failed", utcnow()
        self.session.flush()
        return row

    def _add(self, thread_id: str, tick: int, **fields: Any) -> Tick:
        row = self._inserted(
            Tick, _insert_tick(), insert_values(Tick, {"thread_id": thread_id, "tick": tick, **fields})
        )
        self._held[(thread_id, tick)] = row
        known = self._from.get(thread_id)
        if known is not None and tick >= known[0]:
            known[1].add(tick)
        return row

    def get(self, thread_id: str, tick: int) -> Tick | None:
        held = self._held.get((thread_id, tick))
        if held is not None:
            return held
        known = self._from.get(thread_id)
        if known is not None and tick >= known[0] and tick not in known[1]:  # next_unfinished found no row
            return None
        row = self.session.scalars(_of_tick(), {"thread_id": thread_id, "tick": tick}).first()
        if row is not None:
            self._held[(thread_id, tick)] = row
        return row

    def next_unfinished(self, thread_id: str, tick: int) -> int:
        """`tick`, or the first tick after it not yet finished (a finished tick whose checkpoint a kill lost). The
        ticks that have rows stay known to this unit of work: starting a tick that has none reads nothing more."""
        rows = dict(self.core(_finished_from(), {"thread_id": thread_id, "tick": tick}).tuples().all())
        self._from[thread_id] = (tick, set(rows))
        while tick in rows and rows[tick] is not None:
            tick += 1
        return tick

    def keep_answer(
        self, thread_id: str, tick: int, answer: dict[str, Any], summary: dict[str, Any] | None = None
    ) -> None:
        """The model's answer for a tick, kept until the tick finishes: a tick run again after a kill reuses it.
        `summary`: the row's summary as read earlier in the tick (then the row is written without reading it)."""
        if summary is not None:
            self._set(thread_id, tick, summary={**summary, "answer": answer})
            return
        row = self.get(thread_id, tick)
        if row is not None:
            row.summary = {**(row.summary or {}), "answer": answer}
            self.session.flush()

    def kept_answer(self, thread_id: str, tick: int) -> dict[str, Any] | None:
        row = self.get(thread_id, tick)
        return (row.summary or {}).get("answer") if row is not None and row.finished_at is None else None

    def finish(
        self,
        thread_id: str,
        tick: int,
        *,
        status: str,
        summary: dict[str, Any],
        llm_calls: int,
        prompt_tokens: int,
        completion_tokens: int,
        llm_ms: float,
    ) -> None:
        self._set(
            thread_id,
            tick,
            status=status,
            summary=summary,
            llm_calls=llm_calls,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            llm_ms=llm_ms,
            finished_at=utcnow(),
        )

    def _set(self, thread_id: str, tick: int, **values: Any) -> None:
        """The tick's row updated in one Core statement; a row this unit holds (loaded or added) sees the new
        values, as the ORM's UPDATE would have synchronised it."""
        self.core(
            _update_tick(*values),
            {"w_thread_id": thread_id, "w_tick": tick, **{f"v_{name}": value for name, value in values.items()}},
        )
        held = self._held.get((thread_id, tick))
        if held is not None:
            for name, value in values.items():
                set_committed_value(held, name, value)

    def recent(self, limit: int = 20, thread_id: str | None = None, *, before_id: int | None = None) -> list[Tick]:
        """The last `limit` ticks (of a thread; older than row `before_id` for paging), oldest first."""
        q = select(Tick)
        if thread_id:
            q = q.where(Tick.thread_id == thread_id)
        if before_id is not None:
            q = q.where(Tick.id < before_id)
        return list(reversed(self.session.scalars(q.order_by(Tick.id.desc()).limit(limit)).all()))

    def count(self) -> int:
        return self.session.scalar(select(func.count(Tick.id))) or 0

    def count_by_status(self) -> dict[str, int]:
        """Ticks recorded, by status (running, ok, degraded, failed)."""
        rows = self.session.execute(select(Tick.status, func.count(Tick.id)).group_by(Tick.status)).all()
        return {str(status): int(n) for status, n in rows}
