"""Messages: a thread's own outputs (HMP `llm_recent_responses`) with every reflex column."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Select, func, select

from memory.models import Message
from memory.repositories.base import Repo

# What a thread's history shows, oldest first. Anchors stand for whole child threads.
TIMELINE_KINDS = ("response", "stagnation_record", "step", "stelis_anchor")
# Rendered at read time from another row: never embedded or indexed for retrieval.
NON_INDEXED_KINDS = ("stelis_anchor",)


def anchor_key(child_id: str) -> str:
    return f"stelis_anchor:{child_id}"


class MessageRepo(Repo):
    def upsert(self, dedup_key: str, **fields: Any) -> Message:
        """Insert, or update the row with this key (a node re-run after a kill writes once)."""
        row = self.s.scalars(select(Message).where(Message.dedup_key == dedup_key)).first()
        return self._upsert(row, Message, {"dedup_key": dedup_key, **fields})

    def add(self, **fields: Any) -> Message:
        row = Message(**fields)
        self.s.add(row)
        self.s.flush()
        return row

    def recent(self, thread_id: str, limit: int, kinds: Iterable[str] = ("response",)) -> list[Message]:
        """The last `limit` messages of these kinds, oldest first."""
        rows = self.s.scalars(
            select(Message)
            .where(Message.thread_id == thread_id, Message.kind.in_(tuple(kinds)))
            .order_by(Message.id.desc())
            .limit(limit)
        ).all()
        return list(reversed(rows))

    def newest_id(self) -> int:
        return self.s.scalar(select(func.max(Message.id))) or 0

    def log_recent(self, limit: int, kinds: Iterable[str] = ("response",)) -> list[Message]:
        """The last `limit` messages of these kinds across every thread, oldest first."""
        rows = self.s.scalars(select(Message).where(Message.kind.in_(tuple(kinds)))
                              .order_by(Message.id.desc()).limit(limit)).all()
        return list(reversed(rows))

    def since(self, thread_id: str, after_id: int, kinds: Iterable[str], last: int | None = None) -> list[Message]:
        """A thread's messages of these kinds after `after_id`, oldest first: all of them, or the `last` N."""
        q = select(Message).where(Message.thread_id == thread_id, Message.id > after_id, Message.kind.in_(tuple(kinds)))
        return self._oldest_first(q, last)

    def last_of_kind(self, thread_id: str, kind: str) -> Message | None:
        return self.s.scalars(
            select(Message).where(Message.thread_id == thread_id, Message.kind == kind).order_by(Message.id.desc()).limit(1)
        ).first()

    def at_ticks(self, thread_id: str, ticks: Iterable[int], kinds: Iterable[str] = ("response",)) -> list[Message]:
        """A thread's messages of these kinds written in these ticks, oldest first."""
        return list(self.s.scalars(select(Message).where(
            Message.thread_id == thread_id, Message.tick.in_(list(ticks)), Message.kind.in_(tuple(kinds)))
            .order_by(Message.id)).all())

    def count(self, thread_id: str | None = None) -> int:
        q = select(func.count(Message.id))
        if thread_id is not None:
            q = q.where(Message.thread_id == thread_id)
        return self.s.scalar(q) or 0

    def log(self, thread_id: str, upto_id: int | None = None, kinds: Iterable[str] | None = None,
            last: int | None = None) -> list[Message]:
        """A thread's messages oldest first: all of them, or those up to `upto_id`, or the `last` N."""
        q = select(Message).where(Message.thread_id == thread_id)
        if upto_id is not None:
            q = q.where(Message.id <= upto_id)
        if kinds is not None:
            q = q.where(Message.kind.in_(tuple(kinds)))
        return self._oldest_first(q, last)

    def _oldest_first(self, q: Select, last: int | None) -> list[Message]:
        """The rows of `q` oldest first: all of them, or the `last` N."""
        if last is not None:
            return list(reversed(self.s.scalars(q.order_by(Message.id.desc()).limit(last)).all()))
        return list(self.s.scalars(q.order_by(Message.id)).all())

    def anchor_for(self, child_id: str) -> Message | None:
        return self.s.scalars(select(Message).where(Message.dedup_key == anchor_key(child_id))).first()

    def indexable(self, thread_id: str | None = None, after_id: int = 0) -> list[Message]:
        """Messages that may be embedded or indexed for retrieval (never Stelis anchors)."""
        q = select(Message).where(Message.id > after_id, Message.kind.not_in(NON_INDEXED_KINDS))
        if thread_id is not None:
            q = q.where(Message.thread_id == thread_id)
        return list(self.s.scalars(q.order_by(Message.id)).all())
