"""Messages: a thread's own outputs (HMP `llm_recent_responses`) with every reflex column."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, TypeAlias, Unpack

from sqlalchemy import Column, Insert, Row, Select, bindparam, func, insert, select
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.orm import aliased

from memory.models import Message
from memory.repositories.base import Repo, insert_values, one_of, prepared, table_of

# A message as the tick reads it (recent thoughts, the timeline): a plain row of the columns a `Message` loads at
# once (not the deferred reflex details), by the same names — read only, never changed through it.
MessageLine: TypeAlias = "Row[Unpack[tuple[Any, ...]]]"

# What a thread's history shows, oldest first. Anchors stand for whole child threads.
TIMELINE_KINDS = ("response", "stagnation_record", "step", "stelis_anchor")
# Rendered at read time from another row: never embedded or indexed for retrieval.
NON_INDEXED_KINDS = ("stelis_anchor",)


def anchor_key(child_id: str) -> str:
    return f"stelis_anchor:{child_id}"


@prepared
def _insert_message() -> Insert:
    return insert(table_of(Message))


@prepared
def _keyed() -> Select[Message]:
    return select(Message).where(Message.dedup_key == bindparam("key"))


@prepared
def _newest(kinds: tuple[str, ...]) -> Select[Message]:
    """A thread's newest messages of these kinds."""
    return (
        select(Message)
        .where(Message.thread_id == bindparam("thread_id"), one_of(Message.kind, kinds))
        .order_by(Message.id.desc())
        .limit(bindparam("limit"))
    )


@prepared
def _thread_log(upto: bool, kinds: tuple[str, ...] | None, last: bool) -> Select[Message]:
    """A thread's messages (up to an id; of these kinds), oldest first, or its `last` newest."""
    q = select(Message).where(Message.thread_id == bindparam("thread_id"))
    if upto:
        q = q.where(Message.id <= bindparam("upto_id"))
    if kinds is not None:
        q = q.where(one_of(Message.kind, kinds))
    return q.order_by(Message.id.desc()).limit(bindparam("last")) if last else q.order_by(Message.id)


def _line_columns() -> list[Column[Any]]:
    deferred = {prop.key for prop in sa_inspect(Message).column_attrs if prop.deferred}
    return [column for column in table_of(Message).columns if column.key not in deferred]


@prepared
def _newest_lines(kinds: tuple[str, ...], columns: tuple[str, ...] | None) -> Select[Unpack[tuple[Any, ...]]]:
    """Core: `_newest` as plain rows (of these columns only, when named)."""
    c = table_of(Message).c
    shown = _line_columns() if columns is None else [c[name] for name in columns]
    return (
        select(*shown)
        .where(c.thread_id == bindparam("thread_id"), one_of(c.kind, kinds))
        .order_by(c.id.desc())
        .limit(bindparam("limit"))
    )


@prepared
def _log_lines(
    upto: bool, kinds: tuple[str, ...] | None, last: bool, columns: tuple[str, ...] | None = None
) -> Select[Unpack[tuple[Any, ...]]]:
    """Core: `_thread_log` as plain rows (of these columns only, when named)."""
    c = table_of(Message).c
    shown = _line_columns() if columns is None else [c[name] for name in columns]
    q = select(*shown).where(c.thread_id == bindparam("thread_id"))
    if upto:
        q = q.where(c.id <= bindparam("upto_id"))
    if kinds is not None:
        q = q.where(one_of(c.kind, kinds))
    return q.order_by(c.id.desc()).limit(bindparam("last")) if last else q.order_by(c.id)


@prepared
def _lines_by_id() -> Select[Unpack[tuple[Any, ...]]]:
    """Core: messages by id as plain rows."""
    c = table_of(Message).c
    return select(*_line_columns()).where(c.id.in_(bindparam("ids", expanding=True)))


class MessageRepo(Repo):
    def upsert(self, dedup_key: str, **fields: Any) -> Message:
        """Insert, or update the row with this key (a node re-run after a kill writes once)."""
        row = self.session.scalars(_keyed(), {"key": dedup_key}).first()
        return self._upsert(row, Message, {"dedup_key": dedup_key, **fields})

    def add_keyed(self, dedup_key: str, **fields: Any) -> int:
        """Insert a row under this key when none can exist yet (`upsert` when one may: a re-run after a kill); its
        id. One Core INSERT (the tick writes its thought with it; the table is no memory history)."""
        result = self.core(_insert_message(), insert_values(Message, {"dedup_key": dedup_key, **fields}))
        key = result.inserted_primary_key
        assert key is not None  # an INSERT of one row
        return int(key[0])

    def add(self, **fields: Any) -> Message:
        row = Message(**fields)
        self.session.add(row)
        self.session.flush()
        return row

    def recent(self, thread_id: str, limit: int, kinds: Iterable[str] = ("response",)) -> list[Message]:
        """The last `limit` messages of these kinds, oldest first."""
        rows = self.session.scalars(_newest(tuple(kinds)), {"thread_id": thread_id, "limit": limit}).all()
        return list(reversed(rows))

    def recent_lines(
        self, thread_id: str, limit: int, kinds: Iterable[str] = ("response",), columns: tuple[str, ...] | None = None
    ) -> list[MessageLine]:
        """`recent` as plain rows (`MessageLine`), for a reader of the tick's hot path; `columns`: only these (a
        JSON column costs a decode per row)."""
        rows = self.core(_newest_lines(tuple(kinds), columns), {"thread_id": thread_id, "limit": limit}).all()
        return list(reversed(rows))

    def newest_id(self) -> int:
        return self.session.scalar(select(func.max(Message.id))) or 0

    def log_recent(self, limit: int, kinds: Iterable[str] = ("response",)) -> list[Message]:
        """The last `limit` messages of these kinds across every thread, oldest first."""
        rows = self.session.scalars(
            select(Message).where(Message.kind.in_(tuple(kinds))).order_by(Message.id.desc()).limit(limit)
        ).all()
        return list(reversed(rows))

    def outdated(self, before: datetime, *, keep: int, limit: int) -> list[int]:
        """The ids of the own thoughts (responses, continuations, stagnation records) written before `before`, of
        every thread but its newest `keep` of them: the oldest first, at most `limit`."""
        kinds = ("response", "continuation", "stagnation_record")
        newer = aliased(Message)
        kept_from = (
            select(newer.id)
            .where(newer.thread_id == Message.thread_id, newer.kind.in_(kinds))
            .order_by(newer.id.desc())
            .offset(keep)
            .limit(1)
            .scalar_subquery()
        )
        return [
            int(i)
            for i in self.session.scalars(
                select(Message.id)
                .where(Message.kind.in_(kinds), Message.created_at < before, Message.id <= kept_from)
                .order_by(Message.id)
                .limit(limit)
            ).all()
        ]

    def validations(self, limit: int) -> list[Row[Unpack[tuple[Any, ...]]]]:
        """The validation of the last `limit` outputs across every thread, oldest first: (id, tick, rating,
        auto_pass, self_validation, validators) — what the validator metrics are computed from."""
        c = table_of(Message).c
        rows = self.core(
            select(c.id, c.tick, c.rating, c.auto_pass, c.self_validation, c.validators)
            .where(c.kind.in_(("response", "continuation", "stagnation_record")))
            .order_by(c.id.desc())
            .limit(limit)
        ).all()
        return list(reversed(rows))

    def since(self, thread_id: str, after_id: int, kinds: Iterable[str], last: int | None = None) -> list[Message]:
        """A thread's messages of these kinds after `after_id`, oldest first: all of them, or the `last` N."""
        q = select(Message).where(Message.thread_id == thread_id, Message.id > after_id, Message.kind.in_(tuple(kinds)))
        return self._oldest_first(q, last)

    def last_of_kind(self, thread_id: str, kind: str) -> Message | None:
        return self.session.scalars(_newest((kind,)), {"thread_id": thread_id, "limit": 1}).first()

    def at_ticks(self, thread_id: str, ticks: Iterable[int], kinds: Iterable[str] = ("response",)) -> list[Message]:
        """A thread's messages of these kinds written in these ticks, oldest first."""
        return list(
            self.session.scalars(
                select(Message)
                .where(Message.thread_id == thread_id, Message.tick.in_(list(ticks)), Message.kind.in_(tuple(kinds)))
                .order_by(Message.id)
            ).all()
        )

    def count(self, thread_id: str | None = None) -> int:
        q = select(func.count(Message.id))
        if thread_id is not None:
            q = q.where(Message.thread_id == thread_id)
        return self.session.scalar(q) or 0

    def log(
        self, thread_id: str, upto_id: int | None = None, kinds: Iterable[str] | None = None, last: int | None = None
    ) -> list[Message]:
        """A thread's messages oldest first: all of them, or those up to `upto_id`, or the `last` N."""
        q = _thread_log(upto_id is not None, tuple(kinds) if kinds is not None else None, last is not None)
        rows = self.session.scalars(q, {"thread_id": thread_id, "upto_id": upto_id, "last": last}).all()
        return list(reversed(rows)) if last is not None else list(rows)

    def log_lines(
        self,
        thread_id: str,
        upto_id: int | None = None,
        kinds: Iterable[str] | None = None,
        last: int | None = None,
        columns: tuple[str, ...] | None = None,
    ) -> list[MessageLine]:
        """`log` as plain rows (`MessageLine`), for a reader of the tick's hot path; `columns`: only these (each
        row's JSON columns and time cost a decode)."""
        q = _log_lines(upto_id is not None, tuple(kinds) if kinds is not None else None, last is not None, columns)
        rows = self.core(q, {"thread_id": thread_id, "upto_id": upto_id, "last": last}).all()
        return list(reversed(rows)) if last is not None else list(rows)

    def lines_by_id(self, ids: Iterable[int]) -> list[MessageLine]:
        """These messages as plain rows (`MessageLine`), in the order of `ids` (an id without a row is left out)."""
        wanted = list(ids)
        if not wanted:
            return []
        found = {row.id: row for row in self.core(_lines_by_id(), {"ids": wanted}).all()}
        return [found[i] for i in wanted if i in found]

    def _oldest_first(self, q: Select[Message], last: int | None) -> list[Message]:
        """The rows of `q` oldest first: all of them, or the `last` N."""
        if last is not None:
            return list(reversed(self.session.scalars(q.order_by(Message.id.desc()).limit(last)).all()))
        return list(self.session.scalars(q.order_by(Message.id)).all())

    def anchor_for(self, child_id: str) -> Message | None:
        return self.session.scalars(select(Message).where(Message.dedup_key == anchor_key(child_id))).first()

    def indexable(self, thread_id: str | None = None, after_id: int = 0) -> list[Message]:
        """Messages that may be embedded or indexed for retrieval (never Stelis anchors)."""
        q = select(Message).where(Message.id > after_id, Message.kind.not_in(NON_INDEXED_KINDS))
        if thread_id is not None:
            q = q.where(Message.thread_id == thread_id)
        return list(self.session.scalars(q.order_by(Message.id)).all())
