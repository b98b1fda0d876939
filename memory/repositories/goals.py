"""HMP goals (the why, with subgoals) and tasks (the what and how, with their auxiliary REPL cycle).

An archived goal or task (`archived_at` set) is out of every list, count and progress figure unless asked
for with `include_archived=True`; `restore` brings it back as it was.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar, Unpack

from sqlalchemy import ColumnElement, Row, Select, bindparam, delete, func, or_, select

from memory.clock import utcnow
from memory.models import Goal, GoalLink, Task
from memory.repositories.base import Repo, none_of, prepared, table_of
from memory.statuses import CLOSED_TASK, GoalStatus, TaskStatus

GOAL_STATUSES = tuple(GoalStatus)
TASK_STATUSES = tuple(TaskStatus)
CLOSED_TASK_STATUSES = CLOSED_TASK


def _goal_criteria(status: bool, horizon: bool, include_archived: bool) -> list[ColumnElement[bool]]:
    """Which goals a list holds (the ORM's `list` and the Core `active_lines`/`leading` alike): not archived unless
    asked, of the bound `status` and `horizon` when given."""
    c = table_of(Goal).c
    return [
        *(() if include_archived else (c.archived_at.is_(None),)),
        *((c.status == bindparam("status"),) if status else ()),
        *((c.horizon == bindparam("horizon"),) if horizon else ()),
    ]


def _goal_order() -> tuple[ColumnElement[Any], ...]:
    c = table_of(Goal).c
    return c.priority.desc(), c.id


@prepared
def _goals(status: bool, horizon: bool, include_archived: bool) -> Select[Goal]:
    return (
        select(Goal)
        .where(*_goal_criteria(status, horizon, include_archived))
        .order_by(*_goal_order())
        .limit(bindparam("limit"))
    )


@prepared
def _leading_goals() -> Select[Unpack[tuple[Any, ...]]]:
    """Core: the leading goals of the bound status (active) of each horizon, as plain rows (every column)."""
    table = table_of(Goal)
    c = table.c
    rank = func.row_number().over(partition_by=c.horizon, order_by=_goal_order()).label("rank")
    ranked = select(c.id, rank).where(*_goal_criteria(True, False, False)).subquery()
    return (
        select(table)
        .join(ranked, ranked.c.id == c.id)
        .where(ranked.c.rank <= bindparam("per_horizon"))
        .order_by(*_goal_order())
    )


@prepared
def _goal_lines() -> Select[Unpack[tuple[Any, ...]]]:
    """Core: `_goals(status=True)` as plain rows (every column)."""
    return (
        select(table_of(Goal))
        .where(*_goal_criteria(True, False, False))
        .order_by(*_goal_order())
        .limit(bindparam("limit"))
    )


def _task_criteria(status: bool, open_only: bool, goal: bool, include_archived: bool) -> list[ColumnElement[bool]]:
    """Which tasks a list holds (the ORM's `list` and the Core `open_lines` alike): not archived unless asked, of the
    bound `status`, not closed with `open_only`, of the bound `goal_id`."""
    c = table_of(Task).c
    return [
        *(() if include_archived else (c.archived_at.is_(None),)),
        *((c.status == bindparam("status"),) if status else ()),
        *((none_of(c.status, CLOSED_TASK_STATUSES),) if open_only else ()),
        *((c.goal_id == bindparam("goal_id"),) if goal else ()),
    ]


def _task_order() -> tuple[ColumnElement[Any], ...]:
    c = table_of(Task).c
    return c.pinned.desc(), c.priority.desc(), c.id


@prepared
def _open_task_lines() -> Select[Unpack[tuple[Any, ...]]]:
    """Core: `_tasks(open_only=True)` as plain rows (every column)."""
    return (
        select(table_of(Task))
        .where(*_task_criteria(False, True, False, False))
        .order_by(*_task_order())
        .limit(bindparam("limit"))
    )


@prepared
def _tasks(status: bool, open_only: bool, goal: bool, include_archived: bool) -> Select[Task]:
    return (
        select(Task)
        .where(*_task_criteria(status, open_only, goal, include_archived))
        .order_by(*_task_order())
        .limit(bindparam("limit"))
    )


@prepared
def _task_counts(include_archived: bool) -> Select[str, int]:
    q = select(Task.status, func.count(Task.id))
    return (q if include_archived else q.where(Task.archived_at.is_(None))).group_by(Task.status)


@prepared
def _task_of_thread() -> Select[tuple[int]]:
    """Core: the id of the task whose sub-cycle runs in a thread (a tick asks every time; most threads have none)."""
    c = table_of(Task).c
    return select(c.id).where(c.repl_thread == bindparam("thread_id")).limit(1)


R = TypeVar("R")


class _ArchivableRepo(Repo):
    """Rows set aside with an `archived_at` time instead of being deleted."""

    model: type[Any]  # a mapped class with `id` and `archived_at` columns

    def _unless_archived(self, q: Select[R], include_archived: bool) -> Select[R]:
        return q if include_archived else q.where(self.model.archived_at.is_(None))

    def archive(self, row_id: int, now: datetime) -> bool:
        row = self.session.get(self.model, int(row_id))
        if row is None or row.archived_at is not None:
            return False
        row.archived_at = now
        return True

    def restore(self, row_id: int) -> bool:
        row = self.session.get(self.model, int(row_id))
        if row is None or row.archived_at is None:
            return False
        row.archived_at = None
        return True

    def archived(self, limit: int = 10) -> list[Any]:
        return list(
            self.session.scalars(
                select(self.model)
                .where(self.model.archived_at.is_not(None))
                .order_by(self.model.archived_at.desc(), self.model.id.desc())
                .limit(limit)
            ).all()
        )

    def purge(self, row_id: int) -> None:
        """Delete the row for good (a human's delete; the persona archives)."""
        self.session.delete(self._get(self.model, row_id))


class GoalRepo(_ArchivableRepo):
    model = Goal

    def add(
        self,
        title: str,
        *,
        description: str = "",
        horizon: str = "short",
        priority: int = 1,
        constraints: Iterable[str] = (),
        success_criteria: Iterable[str] = (),
        tags: Iterable[str] = (),
        parent_id: int | None = None,
        related_values: Iterable[str] = (),
    ) -> Goal:
        if horizon not in ("short", "long"):
            raise ValueError(f"horizon must be short or long, not {horizon!r}")
        goal = Goal(
            title=title,
            description=description,
            horizon=horizon,
            priority=priority,
            constraints=list(constraints),
            success_criteria=list(success_criteria),
            tags=list(tags),
            related_values=list(related_values),
        )
        self.session.add(goal)
        self.session.flush()
        if parent_id is not None:
            self.link(parent_id, goal.id)
        return goal

    def get(self, goal_id: int) -> Goal:
        return self._get(Goal, goal_id)

    def list(
        self, *, status: str | None = None, horizon: str | None = None, limit: int = 50, include_archived: bool = False
    ) -> list[Goal]:
        return list(
            self.session.scalars(
                _goals(bool(status), bool(horizon), include_archived),
                {"status": status, "horizon": horizon, "limit": limit},
            ).all()
        )

    def active_lines(self, limit: int = 50) -> builtins.list[Row[Unpack[tuple[Any, ...]]]]:
        """`list(status="active")` as plain rows (by the same names; read only: the drives weigh them every tick)."""
        return list(self.core(_goal_lines(), {"status": "active", "limit": limit}).all())

    def leading(self, per_horizon: int = 3) -> builtins.list[Row[Unpack[tuple[Any, ...]]]]:
        """The first `per_horizon` active goals of each horizon, in one query, in `list`'s order (priority, then
        age): the prompt shows the leading short- and long-term goals, and the overall leaders are among them. Plain
        rows (by the same names; read only: the prompt shows them every tick)."""
        return list(self.core(_leading_goals(), {"status": "active", "per_horizon": per_horizon}).all())

    def set_status(self, goal_id: int, status: str, reason: str | None = None) -> Goal:
        if status not in GOAL_STATUSES:
            raise ValueError(f"goal status must be one of {', '.join(GOAL_STATUSES)}, not {status!r}")
        goal = self.get(goal_id)
        goal.status, goal.updated_at = status, utcnow()
        if reason:
            goal.reason = reason
        goal.completed_at = utcnow() if status in ("completed", "failed") else None
        return goal

    def update(self, goal_id: int, **fields: Any) -> Goal:
        goal = self.get(goal_id)
        if fields.get("status") is not None:
            self.set_status(goal_id, fields.pop("status"), fields.get("reason"))
        for name in (
            "title",
            "description",
            "horizon",
            "priority",
            "constraints",
            "success_criteria",
            "tags",
            "reason",
            "related_values",
        ):
            if fields.get(name) is not None:
                setattr(goal, name, fields[name])
        if fields.get("progress"):
            goal.progress_notes = [*goal.progress_notes, str(fields["progress"])]
        goal.updated_at = utcnow()
        return goal

    def purge(self, goal_id: int) -> None:
        """Delete the goal and its subgoal links for good (a human's delete; the persona archives)."""
        self.session.execute(
            delete(GoalLink).where(or_(GoalLink.parent_goal_id == goal_id, GoalLink.child_goal_id == goal_id))
        )
        super().purge(goal_id)

    def link(self, parent_id: int, child_id: int, relation: str = "subgoal") -> GoalLink:
        self.get(parent_id), self.get(child_id)
        if parent_id == child_id or parent_id in {
            g.id for g in self.subgoals(child_id, deep=True, include_archived=True)
        }:
            raise ValueError(f"goal {child_id} cannot be a subgoal of {parent_id}: that makes a cycle")
        link = GoalLink(parent_goal_id=parent_id, child_goal_id=child_id, relation_type=relation)
        self.session.add(link)
        self.session.flush()
        return link

    def subgoals(self, goal_id: int, deep: bool = False, include_archived: bool = False) -> builtins.list[Goal]:
        found: list[Goal] = []
        frontier = [goal_id]
        while frontier:
            q = (
                select(Goal)
                .join(GoalLink, GoalLink.child_goal_id == Goal.id)
                .where(GoalLink.parent_goal_id.in_(frontier))
            )
            children = list(self.session.scalars(self._unless_archived(q, include_archived)).all())
            found.extend(children)
            frontier = [c.id for c in children] if deep else []
        return found

    def parents(self, goal_id: int, include_archived: bool = False) -> builtins.list[Goal]:
        q = select(Goal).join(GoalLink, GoalLink.parent_goal_id == Goal.id).where(GoalLink.child_goal_id == goal_id)
        return list(self.session.scalars(self._unless_archived(q, include_archived)).all())

    def progress(self, goal_id: int) -> dict[str, Any]:
        """HMP metric: completed share of the goal's tasks (archived tasks left out)."""
        statuses = self.session.scalars(
            select(Task.status).where(Task.goal_id == goal_id, Task.archived_at.is_(None))
        ).all()
        total, done = len(statuses), sum(1 for s in statuses if s == "done")
        return {
            "tasks": int(total),
            "done": int(done),
            "completion_rate": round(100.0 * done / total, 2) if total else 0.0,
        }


class TaskRepo(_ArchivableRepo):
    model = Task

    def add(
        self,
        title: str,
        *,
        goal_id: int | None = None,
        description: str = "",
        priority: int = 1,
        pinned: bool = False,
        kind: str = "task",
        tags: Iterable[str] = (),
    ) -> Task:
        if goal_id is not None:
            self._get(Goal, goal_id)
        task = Task(
            title=title,
            goal_id=goal_id,
            description=description,
            priority=priority,
            pinned=pinned,
            kind=kind,
            tags=list(tags),
        )
        self.session.add(task)
        self.session.flush()
        return task

    def get(self, task_id: int) -> Task:
        return self._get(Task, task_id)

    def list(
        self,
        *,
        status: str | None = None,
        goal_id: int | None = None,
        open_only: bool = False,
        limit: int = 50,
        include_archived: bool = False,
    ) -> list[Task]:
        return list(
            self.session.scalars(
                _tasks(bool(status), open_only, goal_id is not None, include_archived),
                {"status": status, "goal_id": goal_id, "limit": limit},
            ).all()
        )

    def update(self, task_id: int, **fields: Any) -> Task:
        task = self.get(task_id)
        status = fields.get("status")
        if status is not None:
            if status not in TASK_STATUSES:
                raise ValueError(f"task status must be one of {', '.join(TASK_STATUSES)}, not {status!r}")
            task.status = status
            task.completed_at = utcnow() if status in CLOSED_TASK_STATUSES else None
        for name in ("title", "description", "priority", "pinned", "tags", "goal_id"):
            if fields.get(name) is not None:
                setattr(task, name, fields[name])
        task.updated_at = utcnow()
        return task

    def set_repl(self, task_id: int, **fields: Any) -> Task:
        """The task's auxiliary cycle: repl_mode, repl_status, repl_config, repl_thread, repl_error."""
        task = self.get(task_id)
        for name in ("repl_mode", "repl_status", "repl_config", "repl_thread", "repl_error"):
            if name in fields:
                setattr(task, name, fields[name])
        task.updated_at = utcnow()
        return task

    def by_repl_thread(self, thread_id: str) -> Task | None:
        task_id = self.core(_task_of_thread(), {"thread_id": thread_id}).scalar()
        return self.session.get(Task, task_id) if task_id is not None else None

    def running_cycles(self, include_archived: bool = False) -> builtins.list[Task]:
        return self.with_repl_status("running", include_archived)

    def with_repl_status(self, status: str, include_archived: bool = False) -> builtins.list[Task]:
        return self.with_repl_statuses((status,), include_archived)

    def with_repl_statuses(self, statuses: Sequence[str], include_archived: bool = False) -> builtins.list[Task]:
        """Tasks whose sub-cycle is in any of these states, in one query (a fleet worker's job asks for the running
        and the stopped ones after every tick)."""
        q = self._unless_archived(select(Task).where(Task.repl_status.in_(list(statuses))), include_archived)
        return list(self.session.scalars(q.order_by(Task.id)).all())

    def open_lines(self, limit: int = 50) -> builtins.list[Row[Unpack[tuple[Any, ...]]]]:
        """`list(open_only=True)` as plain rows (by the same names; read only: the prompt shows them every tick)."""
        return list(self.core(_open_task_lines(), {"limit": limit}).all())

    def counts(self, include_archived: bool = False) -> dict[str, int]:
        return {status: int(n) for status, n in self.core(_task_counts(include_archived)).all()}  # Core: two numbers
