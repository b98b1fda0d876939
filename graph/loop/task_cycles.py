"""HMP auxiliary REPL cycles: a task with a running sub-cycle gets its own REPL loop in its own thread.

The loop driver calls `TaskCycles.step()` after each main tick (and while the main loop idles): every running
sub-cycle runs one checkpointed tick of the same playbook in its thread, with the task as its seed and the
command policy of its mode (nodes/steps/s12_execute_commands.py): `read_only` (HMP's auxiliary REPL) or `full`
(HMP `repl_mode: full`: any command, under the same consent rules as the main loop). What ends a cycle, and what the
main loop hears of it:

- the task is done/failed/cancelled (the cycle set it, or the main loop did) → stopped, chronicle as a note;
- its own budget (`token_budget`: prompt + completion tokens of its model calls, restarts included) is spent →
  stopped, chronicle as a note;
- `tasks.stop` → stopped, chronicle as a note;
- timeout (more than `max_ticks` ticks or `deadline_s` seconds) → restarted in a fresh thread up to
  `max_restarts` times (HMP: timeout → restart), then stopped with repl_error "timeout";
- an exception in its tick (error) → retried `retries` times with a growing delay (`backoff_s` ×
  `backoff_factor`^n, HMP's backoff strategy), then repl_status error, the task frozen for review, a note;
- `pause_s` → at least that long between two of its ticks (its own schedule; the main loop does not wait);
- the process dies (crash) → at the next start the cycle resumes from its checkpoint, and a note says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from langgraph.errors import GraphDrained
from langgraph.runtime import RunControl

from graph.agent import Agent
from managers.owners import owner_alive, process_token
from managers.task_cycles import CycleState, Over
from nodes.context import Services
from nodes.stelis.threads import close_thread

log = logging.getLogger(__name__)


class TaskCycles:
    """The door of the sub-cycles: their agents and ticks; what a cycle's state means is managers/task_cycles.py's."""

    def __init__(self, parent: Agent) -> None:
        self.parent = parent
        self.agents: dict[str, Agent] = {}

    @property
    def services(self) -> Services:
        return self.parent.services

    def _agent(self, thread_id: str) -> Agent:
        agent = self.agents.get(thread_id)
        if agent is None:
            agent = self.parent.sibling(self.parent.playbook, thread_id)
            self.agents[thread_id] = agent
        return agent

    def resume_interrupted(self, notify: Callable[[str], None] | None = None) -> list[str]:
        """At start-up: sub-cycles a stopped process left running are taken over and resumed (HMP crash)."""
        with self.services.managers.unit() as house:
            told = house.task_cycles.take_over_interrupted(process_token(), owner_alive)
        for text in told:
            if notify:
                notify(text)
        return told

    def step(
        self, control: RunControl | None = None, on_stream: Callable[[str, Any], None] | None = None
    ) -> list[dict[str, Any]]:
        """One tick of every running sub-cycle, then the bookkeeping of those that ended. Returns what happened."""
        report = []
        running = self.running()
        for task_id, thread_id in running:
            report.append(self.step_one(task_id, thread_id, control, on_stream))
        report += self._reap_stopped()
        return report

    def running(self) -> list[tuple[int, str]]:
        """(task id, thread id) of every running sub-cycle."""
        with self.services.managers.reading() as house:
            return house.task_cycles.running()

    def step_one(
        self,
        task_id: int,
        thread_id: str,
        control: RunControl | None = None,
        on_stream: Callable[[str, Any], None] | None = None,
    ) -> dict[str, Any]:
        """One tick of one sub-cycle (a job of its own in a deployment: graph/fleet/), or its end."""
        outcome = self._finish_if_over(task_id) or self._waiting(task_id)
        if outcome is not None:
            return outcome
        try:
            for mode, data in self._agent(thread_id).stream(control):
                if on_stream and mode == "custom":
                    on_stream(mode, {**data, "task_id": task_id})
        except GraphDrained:
            raise
        except Exception as exc:  # noqa: BLE001 - an error freezes the task, never the persona
            log.exception("task %s sub-cycle failed", task_id)
            return self._failed(task_id, f"{type(exc).__name__}: {exc}")
        with self.services.managers.unit() as house:
            house.task_cycles.ticked(task_id)
        return self._finish_if_over(task_id) or {"task_id": task_id, "status": "running"}

    def _waiting(self, task_id: int) -> dict[str, Any] | None:
        with self.services.managers.reading() as house:
            until = house.task_cycles.waiting_until(task_id)
        return {"task_id": task_id, "status": "waiting", "until": until} if until else None

    def _failed(self, task_id: int, error: str) -> dict[str, Any]:
        """An error in a tick: retried after a growing delay while `retries` allow, then the task is frozen."""
        with self.services.managers.unit() as house:
            retry = house.task_cycles.failed(task_id, error)
        if retry is None:
            return self._stop(task_id, f"error: {error[:300]}", status="error", error=error[:2000])
        at, errors = retry
        return {"task_id": task_id, "status": "waiting", "until": at.isoformat(), "reason": f"error, retry {errors}"}

    def _finish_if_over(self, task_id: int) -> dict[str, Any] | None:
        """Close the cycle if its task is closed or it ran out of ticks/time; None while it should go on."""
        with self.services.managers.reading() as house:
            over = house.task_cycles.over(task_id)
        if over is None:
            return None
        if isinstance(over, str):  # no longer running
            return {"task_id": task_id, "status": over}
        return self._timeout(task_id) if over.timeout else self._stop(task_id, over.reason, status="stopped")

    def _stop(self, task_id: int, reason: str, *, status: str, error: str | None = None) -> dict[str, Any]:
        with self.services.managers.reading() as house:
            state = house.task_cycles.state(task_id)
        chronicle = None
        if state.running and state.thread_id:
            result = close_thread(
                self.services, state.thread_id, status="completed" if status == "stopped" else "aborted", error=error
            )
            chronicle = result.chronicle
        with self.services.managers.unit() as house:
            house.task_cycles.ended(state, reason, status=status, error=error, chronicle=chronicle)
        if state.thread_id:
            self.agents.pop(state.thread_id, None)
        return {"task_id": task_id, "status": status, "reason": reason}

    def _timeout(self, task_id: int) -> dict[str, Any]:
        with self.services.managers.reading() as house:
            state = house.task_cycles.state(task_id)
        restarts = int(state.config.get("restarts") or 0)
        if restarts >= int(state.config.get("max_restarts") or 0):
            return self._stop(task_id, f"timeout after {restarts} restart(s)", status="stopped", error="timeout")
        assert state.thread_id is not None and state.parent_id is not None, (
            f"task {task_id}'s sub-cycle has no thread of its own"
        )
        close_thread(self.services, state.thread_id, status="aborted", error="timeout: restarted")
        self.agents.pop(state.thread_id, None)
        with self.services.managers.unit() as house:
            child, _, _ = house.threads.open_child(
                parent_id=state.parent_id,
                child_id=f"{state.thread_id}-r{restarts + 1}",
                label=f"task {task_id}: {state.title} (restart {restarts + 1})"[:200],
                window_ratio=float(state.config.get("window_ratio") or 0.5),
                max_depth=self.services.settings.stelis.max_depth,
                origin="task",
                persona=self.services.persona.name,
                owner=process_token(),
            )
            house.task_cycles.restarted(state, child.id)
        return {"task_id": task_id, "status": "running", "reason": f"timeout: restart {restarts + 1}"}

    def _reap_stopped(self) -> list[dict[str, Any]]:
        """Cycles stopped by `tasks.stop` whose thread still runs: close them with a chronicle."""
        with self.services.managers.reading() as house:
            stopped = house.task_cycles.stopped_but_running()
        return [self._stop(task_id, "stopped by the main loop", status="stopped") for task_id in stopped]


__all__ = ["CycleState", "Over", "TaskCycles"]
