"""Anti-stagnation metrics (HMP `anti_stagnation_metrics`): one row per tick's novelty check and its reflex."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from sqlalchemy import Insert, Select, Update, bindparam, exists, func, insert, select, update

from memory.models import AntiStagnationMetric, Feed, Goal, MemoryItem, Note, Task
from memory.repositories.base import Repo, insert_values, none_of, one_of, prepared, table_of
from memory.repositories.feeds import FEED_SOURCE
from memory.repositories.goals import CLOSED_TASK_STATUSES


class EscalationFacts(NamedTuple):
    """What decides which break-out mechanisms can apply (nodes/reflexes/anti_stagnation/escalation.py), read at
    once: whether active items of the knowledge base and of the flashback tiers exist, the unread feed items and
    whether an active feed exists, the open tasks (counted up to two) and the one in front, and the leading active
    goal — in the order `TaskRepo.list` and `GoalRepo.list` give them."""

    kb: bool
    flashback: bool
    unread_feed_items: int
    active_feeds: bool
    open_tasks: int
    task_id: int | None
    task_title: str | None
    goal_id: int | None
    goal_title: str | None


@prepared
def _last_two_rows() -> Select[int, int, float | None, list[Any], list[Any]]:
    """Core: a thread's rows up to a tick, newest first (that tick's and the one before), as much as `add` reads."""
    c = table_of(AntiStagnationMetric).c
    return (
        select(c.id, c.tick, c.novelty_after, c.triggered_actions, c.mechanisms)
        .where(c.thread_id == bindparam("thread_id"), c.tick <= bindparam("tick"))
        .order_by(c.tick.desc(), c.id.desc())
        .limit(2)
    )


@prepared
def _insert_row() -> Insert:
    return insert(table_of(AntiStagnationMetric))


@prepared
def _update_row(*columns: str) -> Update:
    table = table_of(AntiStagnationMetric)
    return update(table).where(table.c.id == bindparam("row_id")).values({c: bindparam(f"v_{c}") for c in columns})


@prepared
def _escalation_facts(kb_tiers: tuple[str, ...], flashback_tiers: tuple[str, ...]) -> Select[Any]:
    """Core: `EscalationFacts` in one statement of scalar subqueries (each as its own query would read it)."""
    items, notes, feeds = table_of(MemoryItem).c, table_of(Note).c, table_of(Feed).c
    tasks, goals = table_of(Task).c, table_of(Goal).c
    open_task = (tasks.archived_at.is_(None), none_of(tasks.status, CLOSED_TASK_STATUSES))
    task_order = (tasks.pinned.desc(), tasks.priority.desc(), tasks.id)
    active_goal = (goals.archived_at.is_(None), goals.status == "active")
    goal_order = (goals.priority.desc(), goals.id)
    first_open = select(tasks.id).where(*open_task).order_by(*task_order).limit(2).subquery()
    return select(
        exists().where(items.status == "active", one_of(items.tier, kb_tiers)).label("kb"),
        exists().where(items.status == "active", one_of(items.tier, flashback_tiers)).label("flashback"),
        select(func.count(notes.id))
        .where(notes.source == FEED_SOURCE, notes.read.is_(False))
        .scalar_subquery()
        .label("unread_feed_items"),
        exists().where(feeds.status == "active").label("active_feeds"),
        select(func.count()).select_from(first_open).scalar_subquery().label("open_tasks"),
        select(tasks.id).where(*open_task).order_by(*task_order).limit(1).scalar_subquery().label("task_id"),
        select(tasks.title).where(*open_task).order_by(*task_order).limit(1).scalar_subquery().label("task_title"),
        select(goals.id).where(*active_goal).order_by(*goal_order).limit(1).scalar_subquery().label("goal_id"),
        select(goals.title).where(*active_goal).order_by(*goal_order).limit(1).scalar_subquery().label("goal_title"),
    )


class AntiStagnationRepo(Repo):
    def escalation_facts(self, kb_tiers: Iterable[str], flashback_tiers: Iterable[str]) -> EscalationFacts:
        """`EscalationFacts` in one statement, where asking each in turn took eight."""
        row = self.core(_escalation_facts(tuple(kb_tiers), tuple(flashback_tiers))).one()
        return EscalationFacts(
            bool(row.kb),
            bool(row.flashback),
            int(row.unread_feed_items or 0),
            bool(row.active_feeds),
            int(row.open_tasks or 0),
            row.task_id,
            row.task_title,
            row.goal_id,
            row.goal_title,
        )

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
        return list(
            self.session.scalars(
                select(AntiStagnationMetric)
                .where(AntiStagnationMetric.thread_id == thread_id, AntiStagnationMetric.tick.in_(list(ticks)))
                .order_by(AntiStagnationMetric.id)
            ).all()
        )

    def recent(self, limit: int = 20, thread_id: str | None = None) -> list[AntiStagnationMetric]:
        q = select(AntiStagnationMetric)
        if thread_id is not None:
            q = q.where(AntiStagnationMetric.thread_id == thread_id)
        return list(reversed(self.session.scalars(q.order_by(AntiStagnationMetric.id.desc()).limit(limit)).all()))
