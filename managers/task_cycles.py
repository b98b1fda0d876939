"""The rules of a task's sub-cycle (HMP's auxiliary REPL), in one unit of work each: when it waits (its `pause_s`, a
backoff after an error), when it is over (its task closed, its own token budget spent, more than `max_ticks` ticks or
`deadline_s` seconds: a timeout), how an error is retried (`retries`, `backoff_s` × `backoff_factor`^n) and what the
main loop is told when it ends (a note and a process-log line). The loop's door (graph/loop/task_cycles.py) runs the
cycles' ticks and closes or opens their threads; it asks here what to do."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from memory.note_kinds import NoteSource
from memory.statuses import CLOSED_TASK, CycleStatus, ProcessStatus, TaskStatus

if TYPE_CHECKING:
    from managers import Managers

CLOSED = CLOSED_TASK


@dataclass(frozen=True)
class CycleState:
    """Where a sub-cycle stands: its thread, the thread's parent (the main loop's), the task's title, whether the
    thread still runs, and the cycle's config (a copy)."""

    task_id: int
    thread_id: str | None
    parent_id: str | None
    title: str
    running: bool
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Over:
    """Why a sub-cycle ends now: `timeout` (restarted while it may be), or another reason (stopped)."""

    reason: str
    timeout: bool = False


class TaskCycleManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    def _now(self) -> datetime:
        return self.house.deps.clock()

    def state(self, task_id: int) -> CycleState:
        task = self.repos.tasks.get(task_id)
        thread = self.repos.threads.get(task.repl_thread) if task.repl_thread else None
        return CycleState(
            task_id,
            task.repl_thread,
            thread.parent_id if thread is not None else None,
            task.title,
            thread is not None and thread.status == "running",
            dict(task.repl_config or {}),
        )

    def running(self) -> builtins.list[tuple[int, str]]:
        """(task id, thread id) of every running sub-cycle."""
        return [(t.id, t.repl_thread) for t in self.repos.tasks.running_cycles() if t.repl_thread is not None]

    def take_over_interrupted(self, token: str, alive: Callable[[str | None], bool]) -> builtins.list[str]:
        """Sub-cycles a stopped process left running, taken over by this process (`token`): what the main loop is
        told of each (HMP crash: each resumes from its checkpoint)."""
        told = []
        for task in self.repos.tasks.running_cycles():
            thread = self.repos.threads.get(task.repl_thread) if task.repl_thread else None
            if thread is None or thread.owner == token or alive(thread.owner):
                continue
            thread.owner = token
            text = (
                f"task {task.id}'s sub-cycle was interrupted at tick {thread.tick} (the process stopped); "
                "it resumes from its last checkpoint"
            )
            self.repos.processes.add(
                "tasks.cycle", text, status=ProcessStatus.WARNING, thread_id=thread.parent_id, task_id=task.id
            )
            self.repos.notes.add(
                text, source=NoteSource.SYSTEM, task_id=task.id, tags=["task-cycle"], created_at=self._now()
            )
            told.append(text)
        return told

    def waiting_until(self, task_id: int) -> str | None:
        """The cycle's own schedule (pause_s, or a backoff after an error): when it may tick again, if not yet."""
        next_at = (self.repos.tasks.get(task_id).repl_config or {}).get("next_at")
        return next_at if next_at and self._now() < datetime.fromisoformat(next_at) else None

    def ticked(self, task_id: int) -> None:
        """After a good tick: the error count starts over, and the next tick waits `pause_s`."""
        config = dict(self.repos.tasks.get(task_id).repl_config or {})
        pause = float(config.get("pause_s") or 0)
        if not pause and not config.get("errors") and not config.get("next_at"):
            return
        config.update(errors=0, next_at=(self._now() + timedelta(seconds=pause)).isoformat() if pause else None)
        self.repos.tasks.set_repl(task_id, repl_config=config)

    def failed(self, task_id: int, error: str) -> tuple[datetime, int] | None:
        """An error in a tick: (when it is retried, which retry) while `retries` allow; None: no retry is left."""
        task = self.repos.tasks.get(task_id)
        config = dict(task.repl_config or {})
        errors = int(config.get("errors") or 0) + 1
        if errors > int(config.get("retries") or 0):
            return None
        delay = float(config.get("backoff_s") or 30) * float(config.get("backoff_factor") or 2) ** (errors - 1)
        retry = self._now() + timedelta(seconds=delay)
        config.update(errors=errors, next_at=retry.isoformat())
        self.repos.tasks.set_repl(task_id, repl_config=config, repl_error=error[:2000])
        thread = self.repos.threads.get(task.repl_thread) if task.repl_thread else None
        self.repos.processes.add(
            "tasks.cycle",
            f"task {task_id}'s sub-cycle failed ({error[:300]}); retry {errors} of "
            f"{config.get('retries')} in {delay:.0f} s",
            status="warning",
            thread_id=thread.parent_id if thread is not None else None,
            task_id=task_id,
        )
        return retry, errors

    def over(self, task_id: int) -> Over | str | None:
        """Why the cycle ends now; its repl_status when it is no longer running; None while it should go on."""
        now = self._now()
        task = self.repos.tasks.get(task_id)
        if task.repl_status != CycleStatus.RUNNING:
            return str(task.repl_status)
        if task.status in CLOSED:
            return Over(f"task {task.status}")
        thread = self.repos.threads.get(task.repl_thread) if task.repl_thread else None
        config = dict(task.repl_config or {})
        started = datetime.fromisoformat(config.get("started_at") or now.isoformat())
        over_ticks = thread is not None and thread.tick >= int(config.get("max_ticks") or 20)
        over_time = now - started >= timedelta(seconds=float(config.get("deadline_s") or 3600))
        used, budget = self.tokens(task.repl_thread, config), int(config.get("token_budget") or 0)
        if budget and used >= budget:  # its own budget: spent, it stops (no restart)
            return Over(f"its budget of {budget:,} tokens is spent ({used:,})")
        return Over("timeout", timeout=True) if over_ticks or over_time else None

    def tokens(self, thread_id: str | None, config: dict[str, Any]) -> int:
        """Tokens the cycle's model calls used, restarts included."""
        totals = self.repos.llm_calls.totals(thread_id) if thread_id else {"prompt_tokens": 0, "completion_tokens": 0}
        return int(config.get("tokens_before") or 0) + int(totals["prompt_tokens"]) + int(totals["completion_tokens"])

    def ended(self, state: CycleState, reason: str, *, status: str, error: str | None, chronicle: str | None) -> None:
        """The cycle ended (`stopped` or `error`: the task is then frozen for review); the main loop is told."""
        task_id = state.task_id
        self.repos.tasks.set_repl(task_id, repl_status=status, repl_error=error)
        if status == CycleStatus.ERROR:
            self.repos.tasks.update(task_id, status=TaskStatus.FROZEN)
        text = f"task {task_id} ({state.title}): sub-cycle {status} ({reason})." + (
            f" Chronicle: {chronicle}" if chronicle else ""
        )
        self.repos.notes.add(
            text[:4000], source=NoteSource.SYSTEM, task_id=task_id, tags=["task-cycle", status], created_at=self._now()
        )
        self.repos.processes.add(
            "tasks.cycle",
            text[:2000],
            status=ProcessStatus.ERROR if status == CycleStatus.ERROR else ProcessStatus.OK,
            thread_id=state.parent_id,
            task_id=task_id,
        )

    def restarted(self, state: CycleState, child_id: str) -> None:
        """A timed-out cycle goes on in a fresh thread (`child_id`): its restart counted, its tokens carried."""
        config = dict(state.config)
        restarts = int(config.get("restarts") or 0)
        config.update(
            restarts=restarts + 1,
            started_at=self._now().isoformat(),
            tokens_before=self.tokens(state.thread_id, config),
        )
        self.repos.tasks.set_repl(state.task_id, repl_thread=child_id, repl_config=config)
        self.repos.processes.add(
            "tasks.cycle",
            f"task {state.task_id}'s sub-cycle timed out; restarted in {child_id}",
            status="warning",
            thread_id=state.parent_id,
            task_id=state.task_id,
        )

    def stopped_but_running(self) -> builtins.list[int]:
        """Cycles stopped by `tasks.stop` whose thread still runs (to be closed with a chronicle)."""
        return [
            t.id
            for t in self.repos.tasks.with_repl_status(CycleStatus.STOPPED)
            if t.repl_thread and (th := self.repos.threads.get(t.repl_thread)) is not None and th.status == "running"
        ]


__all__ = ["CLOSED", "CycleState", "Over", "TaskCycleManager"]
