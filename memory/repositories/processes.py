"""The process log (HMP `process_log`): results of commands and external processes, shown until `close`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Unpack

from sqlalchemy import ColumnElement, Insert, Row, Select, bindparam, func, insert, select, update

from memory.clock import utcnow
from memory.models import ProcessLog
from memory.repositories.base import Repo, insert_values, matched, one_of, prepared, table_of


@prepared
def _insert_row() -> Insert:
    return insert(table_of(ProcessLog))


@prepared
def _open() -> Select[Unpack[tuple[Any, ...]]]:
    """Core: a thread's processes not closed, as plain rows (every column)."""
    table = table_of(ProcessLog)
    c = table.c
    return (
        select(table)
        .where(c.thread_id == bindparam("thread_id"), c.status != "close")
        .order_by(c.priority.desc(), c.id)
        .limit(bindparam("limit"))
    )


def _stale_criteria() -> tuple[ColumnElement[bool], ...]:
    """A thread's processes still running or pending since before the bound `cutoff` (what `time_out_stale` times
    out, and its Core check)."""
    c = table_of(ProcessLog).c
    return (
        c.thread_id == bindparam("thread_id"),
        one_of(c.status, ("in_progress", "pending")),
        c.updated_at < bindparam("cutoff"),
    )


@prepared
def _stale() -> Select[ProcessLog]:
    return select(ProcessLog).where(*_stale_criteria())


@prepared
def _any_stale() -> Select[int]:
    """Core: whether `_stale` finds anything (its first id)."""
    return select(table_of(ProcessLog).c.id).where(*_stale_criteria()).limit(1)


class ProcessLogRepo(Repo):
    def add(
        self,
        name: str,
        value: str = "",
        status: str = "ok",
        *,
        thread_id: str | None = None,
        tags: list[str] | None = None,
        priority: int = 0,
        llm_id: str | None = None,
        task_id: int | None = None,
        sources: Sequence[Mapping[str, Any]] | None = None,
    ) -> ProcessLog:
        """`sources`: the untrusted text `value` holds (memory/provenance.py), shown with the row's provenance."""
        row = ProcessLog(
            name=name,
            value=value,
            status=status,
            thread_id=thread_id,
            tags=list(tags or []),
            priority=priority,
            llm_id=llm_id,
            task_id=task_id,
            sources=[dict(s) for s in sources or []],
        )
        self.session.add(row)
        self.session.flush()
        return row

    def note(self, name: str, value: str = "", status: str = "ok", *, thread_id: str | None = None) -> None:
        """`add` in one Core INSERT, for a writer that needs no row back (the tick's own reports)."""
        self.core(
            _insert_row(),
            insert_values(
                ProcessLog,
                {
                    "name": name,
                    "value": value,
                    "status": status,
                    "thread_id": thread_id,
                    "tags": [],
                    "priority": 0,
                    "llm_id": None,
                    "task_id": None,
                    "sources": [],
                },
            ),
        )

    def open(self, thread_id: str, limit: int = 20) -> list[Row[Unpack[tuple[Any, ...]]]]:
        """The thread's processes not closed, most urgent first, as plain rows (by the same names; read only: the
        prompt shows them every tick — `close` takes their ids)."""
        return list(self.core(_open(), {"thread_id": thread_id, "limit": limit}).all())

    def get(self, process_id: int) -> ProcessLog | None:
        return self.session.get(ProcessLog, process_id)

    def latest_named(self, name: str) -> ProcessLog | None:
        return self.session.scalars(
            select(ProcessLog).where(ProcessLog.name == name).order_by(ProcessLog.id.desc()).limit(1)
        ).first()

    def close(self, ids: Iterable[int]) -> int:
        ids = list(ids)
        if not ids:
            return 0
        return (
            matched(
                self.session.execute(
                    update(ProcessLog)
                    .where(ProcessLog.id.in_(ids), ProcessLog.status.notin_(("in_progress", "pending")))
                    .values(status="close", updated_at=utcnow())
                )
            )
            or 0
        )

    def time_out_stale(self, thread_id: str, older_than: timedelta, now: datetime) -> list[ProcessLog]:
        """Processes still in progress after `older_than` become `timeout` (HMP status)."""
        cutoff = now - older_than
        bound = {"thread_id": thread_id, "cutoff": cutoff}
        if self.core(_any_stale(), bound).first() is None:  # the usual answer: a plain Core query says so
            return []
        rows = self.session.scalars(_stale(), bound).all()
        for row in rows:
            row.status = "timeout"
            row.updated_at = now
        return list(rows)

    def set_status(
        self,
        process_id: int,
        status: str,
        value: str | None = None,
        now: datetime | None = None,
        sources: Sequence[Mapping[str, Any]] | None = None,
    ) -> ProcessLog:
        row = self.session.get(ProcessLog, process_id)
        if row is None:
            raise LookupError(f"no process {process_id}")
        row.status, row.updated_at = status, now or utcnow()
        if value is not None:
            row.value = value
        if sources is not None:
            row.sources = [dict(s) for s in sources]
        self.session.flush()
        return row

    def finished_since(self, thread_id: str, since: datetime, *, tag: str = "background") -> list[ProcessLog]:
        """Background processes of the thread that finished at `since` or later (an idle loop wakes for them)."""
        rows = self.session.scalars(
            select(ProcessLog)
            .where(
                ProcessLog.thread_id == thread_id,
                ProcessLog.updated_at >= since,
                ProcessLog.status.notin_(("in_progress", "pending")),
            )
            .order_by(ProcessLog.id.desc())
            .limit(50)
        ).all()
        return [r for r in rows if tag in (r.tags or [])]

    def count_named(self, name: str, *, thread_id: str | None = None, since: datetime | None = None) -> int:
        """How many rows of this name (a thread's, written at `since` or later)."""
        q = select(func.count(ProcessLog.id)).where(ProcessLog.name == name)
        if thread_id is not None:
            q = q.where(ProcessLog.thread_id == thread_id)
        if since is not None:
            q = q.where(ProcessLog.created_at >= since)
        return int(self.session.scalar(q) or 0)

    def listing(self, thread_id: str | None = None, *, open_only: bool = False, limit: int = 20) -> list[ProcessLog]:
        q = select(ProcessLog)
        if thread_id is not None:
            q = q.where(ProcessLog.thread_id == thread_id)
        if open_only:
            q = q.where(ProcessLog.status != "close")
        return list(reversed(self.session.scalars(q.order_by(ProcessLog.id.desc()).limit(limit)).all()))

    def delete_closed(self, older_than: datetime) -> list[int]:
        """Closed rows last changed before `older_than`, deleted (HMP `process cleanup`); their ids."""
        rows = self.session.scalars(
            select(ProcessLog).where(ProcessLog.status == "close", ProcessLog.updated_at < older_than)
        ).all()
        ids = [r.id for r in rows]
        for row in rows:
            self.session.delete(row)
        self.session.flush()
        return ids

    def of_thread(self, thread_id: str) -> list[ProcessLog]:
        return list(
            self.session.scalars(
                select(ProcessLog).where(ProcessLog.thread_id == thread_id).order_by(ProcessLog.id)
            ).all()
        )

    def recent(self, limit: int = 50) -> list[ProcessLog]:
        return list(
            reversed(self.session.scalars(select(ProcessLog).order_by(ProcessLog.id.desc()).limit(limit)).all())
        )
