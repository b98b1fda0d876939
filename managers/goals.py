"""Goals and tasks (HMP): goals say why (active | paused | completed | failed, with sub-goals), tasks say what.

The rule every door shares — the persona's `goals.update` / `tasks.update` and a human's edit on the memory page
(managers/memory.py) alike: a goal that fails is a warning in the process log, and a goal that completes or fails,
or a task that is done, failed or cancelled, asks for an abstract of the recent thinking (built after the tick by the
manage_memory step, memory/upkeep/abstracts.py). A human closing a goal closes it for the persona's memory upkeep
too; the request is recorded on the thread the door names (the main loop's, for the web).
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memory.models import Goal, Task
from memory.tiers import Conflict
from memory.upkeep.abstracts import request_abstract

if TYPE_CHECKING:
    from managers import Managers

CLOSED_GOAL = ("completed", "failed")
CLOSED_TASK = ("done", "failed", "cancelled")

# HMP tasks.repl_config: limits, its own pause between ticks, and the backoff on repeated errors
DEFAULT_CYCLE: dict[str, Any] = {
    "max_ticks": 20,
    "deadline_s": 3600.0,
    "max_restarts": 1,
    "window_ratio": 0.5,
    "pause_s": 0.0,
    "retries": 0,
    "backoff_s": 30.0,
    "backoff_factor": 2.0,
    "token_budget": 50_000,
}
CYCLE_KINDS: dict[str, type] = {
    "max_ticks": int,
    "deadline_s": float,
    "max_restarts": int,
    "window_ratio": float,
    "pause_s": float,
    "retries": int,
    "backoff_s": float,
    "backoff_factor": float,
    "token_budget": int,
}


@dataclass(frozen=True)
class GoalOverview:
    """A goal with its sub-goals, tasks and the share of its tasks done."""

    goal: Goal
    subgoals: builtins.list[Goal]
    tasks: builtins.list[Task]
    progress: dict[str, Any] = field(default_factory=dict)


def _aware(moment: datetime) -> datetime:
    """A stored time as UTC (SQLite gives it back without its zone)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class GoalMetrics:
    """HMP's goal metrics: how many goals were achieved (of those closed), how long achieving one took on
    average, how many were interrupted (paused) or failed, and how many tasks each goal has."""

    goals: int
    achieved: int
    failed: int
    interrupted: int
    share_achieved: float | None  # achieved / (achieved + failed); None before any goal closed
    mean_days_to_achieve: float | None  # created → completed, over the achieved goals
    tasks_per_goal: float | None  # the mean over all goals
    tasks_by_goal: dict[int, int]  # goal id → its tasks


class GoalManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

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
        return self.repos.goals.add(
            title,
            description=description,
            horizon=horizon,
            priority=priority,
            constraints=constraints,
            success_criteria=success_criteria,
            tags=tags,
            parent_id=parent_id,
            related_values=related_values,
        )

    def list(self, *, status: str | None = None, horizon: str | None = None) -> builtins.list[Goal]:
        return self.repos.goals.list(status=status, horizon=horizon)

    def get(self, goal_id: int) -> Goal:
        return self.repos.goals.get(goal_id)

    def overview(self, goal_id: int) -> GoalOverview:
        goal = self.repos.goals.get(goal_id)
        return GoalOverview(
            goal,
            self.repos.goals.subgoals(goal.id),
            self.repos.tasks.list(goal_id=goal.id),
            self.repos.goals.progress(goal.id),
        )

    def metrics(self, limit: int = 10_000) -> GoalMetrics:
        """The goal metrics over every goal (archived ones too: they were pursued)."""
        goals = self.repos.goals.list(limit=limit, include_archived=True)
        tasks = self.repos.tasks.list(limit=limit * 10, include_archived=True)
        by_goal = {g.id: 0 for g in goals}
        for task in tasks:
            if task.goal_id in by_goal:
                by_goal[task.goal_id] += 1
        achieved = [g for g in goals if g.status == "completed"]
        failed = sum(g.status == "failed" for g in goals)
        durations = [
            (_aware(g.completed_at) - _aware(g.created_at)).total_seconds() / 86400
            for g in achieved
            if g.completed_at is not None and g.created_at is not None
        ]
        closed = len(achieved) + failed
        return GoalMetrics(
            goals=len(goals),
            achieved=len(achieved),
            failed=failed,
            interrupted=sum(g.status == "paused" for g in goals),
            share_achieved=len(achieved) / closed if closed else None,
            mean_days_to_achieve=sum(durations) / len(durations) if durations else None,
            tasks_per_goal=sum(by_goal.values()) / len(goals) if goals else None,
            tasks_by_goal=by_goal,
        )

    def update(
        self,
        goal_id: int,
        *,
        thread_id: str,
        root_thread: str,
        status: str | None = None,
        reason: str | None = None,
        progress: str | None = None,
        priority: int | None = None,
        title: str | None = None,
        description: str | None = None,
        horizon: str | None = None,
        related_values: builtins.list[str] | None = None,
    ) -> Goal:
        """Change what is given (None: unchanged; `progress` adds a note); a status goes through `status_set`."""
        goal = self.repos.goals.update(
            goal_id,
            status=status,
            reason=reason,
            progress=progress,
            priority=priority,
            title=title,
            description=description,
            horizon=horizon,
            related_values=related_values,
        )
        if status is not None:
            self.status_set(goal, status, thread_id=thread_id, root_thread=root_thread)
        return goal

    def status_set(self, goal: Goal, status: str, *, thread_id: str, root_thread: str) -> None:
        """The consequences of a goal's status being set (by any door): failed → a warning in the process log on
        `thread_id`; completed or failed → an abstract is asked for on `root_thread`."""
        if status == "failed":
            self.repos.processes.add(
                "goals.failed",
                f"goal {goal.id} failed: {goal.reason or 'no reason given'}",
                status="warning",
                thread_id=thread_id,
            )
        if status in CLOSED_GOAL:
            request_abstract(self.repos, root_thread, "goal_closed", f"goal {goal.id}")


class TaskManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    def add(
        self,
        title: str,
        *,
        goal_id: int | None = None,
        description: str = "",
        priority: int = 1,
        pinned: bool = False,
        tags: Iterable[str] = (),
    ) -> Task:
        return self.repos.tasks.add(
            title, goal_id=goal_id, description=description, priority=priority, pinned=pinned, tags=tags
        )

    def open_tasks(self, limit: int) -> builtins.list[Task]:
        """The open tasks, the one in front first (at most `limit`)."""
        return self.repos.tasks.list(open_only=True, limit=limit)

    def list(self, *, status: str | None = None, goal_id: int | None = None) -> builtins.list[Task]:
        return self.repos.tasks.list(status=status, goal_id=goal_id)

    def get(self, task_id: int) -> Task:
        return self.repos.tasks.get(task_id)

    def update(
        self,
        task_id: int,
        *,
        root_thread: str,
        status: str | None = None,
        priority: int | None = None,
        title: str | None = None,
        description: str | None = None,
        goal_id: int | None = None,
    ) -> Task:
        task = self.repos.tasks.update(
            task_id, status=status, priority=priority, title=title, description=description, goal_id=goal_id
        )
        if status is not None:
            self.status_set(task_id, status, root_thread=root_thread)
        return task

    def status_set(self, task_id: int, status: str, *, root_thread: str) -> None:
        """A task done, failed or cancelled (by any door) asks for an abstract on `root_thread`."""
        if status in CLOSED_TASK:
            request_abstract(self.repos, root_thread, "goal_closed", f"task {task_id}")

    def set_pinned(self, task_id: int, pinned: bool) -> Task:
        return self.repos.tasks.update(task_id, pinned=pinned)

    # ---- a task's sub-cycle (tasks.run / tasks.stop) -------------------------------------------------------------

    def cycles(self) -> builtins.list[Task]:
        """The tasks whose sub-cycle runs or was stopped and still waits to be closed."""
        return self.repos.tasks.with_repl_statuses(("stopped", "running"))

    def in_cycle(self, thread_id: str) -> Task | None:
        """The task whose sub-cycle runs on `thread_id` (None: it is not a task's sub-cycle)."""
        return self.repos.tasks.by_repl_thread(thread_id)

    def cycle_config(self, task: Task, given: dict[str, Any], *, started_at: str) -> dict[str, Any]:
        """The sub-cycle's limits: the defaults, what the task had, what was given (None: not given)."""
        config = {**DEFAULT_CYCLE, **(task.repl_config or {})}
        config.update(
            {
                name: CYCLE_KINDS[name](value)
                for name, value in given.items()
                if name in CYCLE_KINDS and value is not None
            }
        )
        config.update(restarts=0, errors=0, next_at=None, started_at=started_at)
        return config

    def check_runnable(self, task: Task) -> None:
        """Conflict when a closed task would get a sub-cycle."""
        if task.status in CLOSED_TASK:
            raise Conflict(f"task {task.id} is {task.status}")

    def cycle_started(self, task_id: int, *, mode: str, config: dict[str, Any], thread_id: str) -> Task:
        self.repos.tasks.set_repl(
            task_id, repl_mode=mode, repl_status="running", repl_config=config, repl_thread=thread_id, repl_error=None
        )
        return self.repos.tasks.update(task_id, status="in_progress")

    def _rank(self, task: Task) -> tuple[bool, int, int]:
        """HMP's order when tasks compete: pinned first, then its goal's priority, then its own."""
        goal_priority = self.repos.goals.get(task.goal_id).priority if task.goal_id is not None else 0
        return (bool(task.pinned), goal_priority, task.priority)

    def arbitrate(self, task: Task, *, limit: int, thread_id: str | None = None) -> tuple[Task | None, str]:
        """Before `task`'s sub-cycle starts with `limit` already running (HMP re-prioritisation when tasks
        conflict): the lowest-ranked running one of another goal is deferred when `task` outranks it — (that task,
        why); otherwise `task` itself is deferred — (task, why). (None, "") when there is room."""
        running = [t for t in self.repos.tasks.running_cycles() if t.id != task.id]
        if len(running) < limit:
            return None, ""
        weakest = min(running, key=lambda t: (self._rank(t), -t.id))
        mine, theirs = self._rank(task), self._rank(weakest)
        if mine > theirs and weakest.goal_id != task.goal_id:
            loser, winner = weakest, task
        else:
            loser, winner = task, weakest
        why = (
            f"deferred: task {winner.id} (goal {winner.goal_id}, priority {self._rank(winner)[1]}) outranks task "
            f"{loser.id} (goal {loser.goal_id}, priority {self._rank(loser)[1]}); at most {limit} sub-cycles at once"
        )
        if loser is task:
            self.repos.tasks.set_repl(task.id, repl_status="deferred", repl_error=why)
        else:
            self.repos.tasks.set_repl(loser.id, repl_status="stopped", repl_error=why)
        self.repos.processes.add(
            "tasks.deferred", f"task {loser.id} {why}", status="warning", task_id=loser.id, thread_id=thread_id
        )
        return loser, why

    def stop_cycle(self, task_id: int) -> Task:
        return self.repos.tasks.set_repl(task_id, repl_status="stopped", repl_error="stopped by the main loop")


__all__ = ["CLOSED_GOAL", "CLOSED_TASK", "CYCLE_KINDS", "DEFAULT_CYCLE", "GoalManager", "GoalOverview", "TaskManager"]
