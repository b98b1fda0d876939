"""Threads: the persona's main thread and its Stelis children, with their lineage.

A unit of work holds on to the threads it has read: the session's identity map keeps rows only while something
references them, and a tick's steps ask for the same thread (and its lineage) several times in one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Select, Update, bindparam, select, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from memory.models import Thread
from memory.repositories.base import Repo, prepared, table_of


@prepared
def _by_id() -> Select[Thread]:
    return select(Thread).where(Thread.id == bindparam("thread_id"))


@prepared
def _set_tick() -> Update:
    table = table_of(Thread)
    return update(table).where(table.c.id == bindparam("thread_id")).values(tick=bindparam("new_tick"))


class ThreadRepo(Repo):
    def __init__(self, session: Session):
        super().__init__(session)
        self._held: dict[str, Thread] = {}  # the threads read in this transaction, kept in the identity map

    def get(self, thread_id: str) -> Thread | None:
        thread = self._held.get(thread_id)
        if thread is None:
            thread = self.session.scalars(_by_id(), {"thread_id": thread_id}).first()
            if thread is not None:
                self._held[thread_id] = thread
        return thread

    def adopt(self, thread: Thread) -> Thread:
        """A row an earlier unit read (the tick's first step reads the tick's threads once): this unit holds it
        without reading it again — merged into its session unloaded (`Session.merge(load=False)`), so `get` answers
        with it and a change to it is flushed like any other."""
        held = self._held.get(thread.id)
        if held is None:
            held = self._held[thread.id] = self.session.merge(thread, load=False)
        return held

    def ensure(self, thread_id: str, **defaults: Any) -> Thread:
        thread = self.get(thread_id)
        if thread is None:
            thread = self._held[thread_id] = Thread(id=thread_id, **defaults)
            self.session.add(thread)
            self.session.flush()
        return thread

    def set_tick(self, thread_id: str, tick: int) -> None:
        self.core(_set_tick(), {"thread_id": thread_id, "new_tick": tick})
        held = self._held.get(thread_id)  # a row this unit holds sees it, as the ORM's UPDATE would have made it
        if held is not None:
            set_committed_value(held, "tick", tick)

    def all(self) -> Sequence[Thread]:
        return self.session.scalars(select(Thread).order_by(Thread.created_at)).all()

    def lineage(self, thread_id: str) -> list[Thread]:
        """The thread and its ancestors, root first."""
        chain: list[Thread] = []
        current = self.get(thread_id)
        while current is not None and len(chain) < 64:
            chain.append(current)
            current = self.get(current.parent_id) if current.parent_id else None
        return list(reversed(chain))

    def ratio_product(self, thread_id: str) -> float:
        """Π window_ratio of the child threads from the root down to this one (1.0 for a root)."""
        product = 1.0
        for thread in self.lineage(thread_id):
            if thread.parent_id is not None:
                product *= thread.window_ratio or 1.0
        return product

    def create_child(
        self,
        thread_id: str,
        parent: Thread,
        *,
        label: str,
        window_ratio: float,
        origin: str,
        owner: str,
        chronicle_prompt: str | None = None,
        playbook: str = "",
    ) -> Thread:
        child = Thread(
            id=thread_id,
            parent_id=parent.id,
            label=label,
            playbook=playbook,
            persona=parent.persona,
            depth=parent.depth + 1,
            window_ratio=window_ratio,
            status="running",
            origin=origin,
            owner=owner,
            chronicle_prompt=chronicle_prompt,
        )
        self._held[thread_id] = child
        self.session.add(child)
        self.session.flush()
        return child

    def finish(
        self, thread_id: str, *, status: str, chronicle: str | None, now: datetime, error: str | None = None
    ) -> Thread | None:
        thread = self.get(thread_id)
        if thread is not None:
            thread.status, thread.chronicle, thread.completed_at, thread.error = status, chronicle, now, error
            self.session.flush()
        return thread

    def running_children(self) -> list[Thread]:
        """Every child thread still marked running, deepest first."""
        rows = self.session.scalars(
            select(Thread).where(Thread.status == "running", Thread.parent_id.is_not(None))
        ).all()
        return sorted(rows, key=lambda t: -t.depth)

    def children(self, thread_id: str) -> list[Thread]:
        return list(
            self.session.scalars(select(Thread).where(Thread.parent_id == thread_id).order_by(Thread.created_at)).all()
        )
