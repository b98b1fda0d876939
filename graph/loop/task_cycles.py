"""HMP auxiliary REPL cycles: a task with a running sub-cycle gets its own REPL loop in its own thread.

The loop driver calls `TaskCycles.step()` after each main tick (and while the main loop idles): every running
sub-cycle runs one checkpointed tick of the same playbook in its thread, with the task as its seed and the
command policy of its mode (nodes/steps/s12_execute_commands.py): `read_only` (HMP's auxiliary REPL) or `full`
(HMP `repl_mode: full`: any command, under the same consent rules as the main loop). What ends a cycle, and what the main loop hears of it:

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
from datetime import datetime, timedelta
from typing import Any, Callable

from langgraph.errors import GraphDrained
from langgraph.runtime import RunControl

from graph.agent import Agent
from managers.owners import owner_alive, process_token
from memory import Repos
from memory.note_kinds import NoteSource
from nodes.context import Services
from nodes.stelis.threads import close_thread, open_thread

log = logging.getLogger(__name__)
CLOSED = ("done", "failed", "cancelled")


class TaskCycles:
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

    def resume_interrupted(self, notify: Callable[[str], None] | None = None) -> list[int]:
        """At start-up: sub-cycles a stopped process left running are taken over and resumed (HMP crash)."""
        resumed = []
        with self.services.db.unit() as repos:
            for task in repos.tasks.running_cycles():
                thread = repos.threads.get(task.repl_thread) if task.repl_thread else None
                if thread is None or thread.owner == process_token() or owner_alive(thread.owner):
                    continue
                thread.owner = process_token()
                text = (f"task {task.id}'s sub-cycle was interrupted at tick {thread.tick} (the process stopped); "
                        "it resumes from its last checkpoint")
                repos.processes.add("tasks.cycle", text, status="warning", thread_id=thread.parent_id, task_id=task.id)
                repos.notes.add(text, source=NoteSource.SYSTEM, task_id=task.id, tags=["task-cycle"], created_at=self.services.clock())
                resumed.append(task.id)
                if notify:
                    notify(text)
        return resumed

    def step(self, control: RunControl | None = None,
             on_stream: Callable[[str, Any], None] | None = None) -> list[dict[str, Any]]:
        """One tick of every running sub-cycle, then the bookkeeping of those that ended. Returns what happened."""
        report = []
        running = self.running()
        for task_id, thread_id in running:
            report.append(self.step_one(task_id, thread_id, control, on_stream))
        report += self._reap_stopped()
        return report

    def running(self) -> list[tuple[int, str]]:
        """(task id, thread id) of every running sub-cycle."""
        with self.services.db.unit() as repos:
            return [(t.id, t.repl_thread) for t in repos.tasks.running_cycles() if t.repl_thread is not None]

    def step_one(self, task_id: int, thread_id: str, control: RunControl | None = None,
                 on_stream: Callable[[str, Any], None] | None = None) -> dict[str, Any]:
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
        self._schedule(task_id)
        return self._finish_if_over(task_id) or {"task_id": task_id, "status": "running"}

    def _waiting(self, task_id: int) -> dict[str, Any] | None:
        """The cycle's own schedule (pause_s, or a backoff after an error): not yet → it sits this step out."""
        with self.services.db.unit() as repos:
            next_at = (repos.tasks.get(task_id).repl_config or {}).get("next_at")
        if next_at and self.services.clock() < datetime.fromisoformat(next_at):
            return {"task_id": task_id, "status": "waiting", "until": next_at}
        return None

    def _schedule(self, task_id: int) -> None:
        """After a good tick: the error count starts over, and the next tick waits `pause_s`."""
        with self.services.db.unit() as repos:
            task = repos.tasks.get(task_id)
            config = dict(task.repl_config or {})
            pause = float(config.get("pause_s") or 0)
            if not pause and not config.get("errors") and not config.get("next_at"):
                return
            config.update(errors=0, next_at=(self.services.clock() + timedelta(seconds=pause)).isoformat() if pause else None)
            repos.tasks.set_repl(task_id, repl_config=config)

    def _failed(self, task_id: int, error: str) -> dict[str, Any]:
        """An error in a tick: retried after a growing delay while `retries` allow, then the task is frozen."""
        with self.services.db.unit() as repos:
            task = repos.tasks.get(task_id)
            config = dict(task.repl_config or {})
            errors = int(config.get("errors") or 0) + 1
            if errors > int(config.get("retries") or 0):
                retry = None
            else:
                delay = float(config.get("backoff_s") or 30) * float(config.get("backoff_factor") or 2) ** (errors - 1)
                retry = self.services.clock() + timedelta(seconds=delay)
                config.update(errors=errors, next_at=retry.isoformat())
                repos.tasks.set_repl(task_id, repl_config=config, repl_error=error[:2000])
                thread = repos.threads.get(task.repl_thread) if task.repl_thread else None
                repos.processes.add("tasks.cycle", f"task {task_id}'s sub-cycle failed ({error[:300]}); retry {errors} of "
                                    f"{config.get('retries')} in {delay:.0f} s", status="warning",
                                    thread_id=thread.parent_id if thread is not None else None, task_id=task_id)
        if retry is None:
            return self._error(task_id, error)
        return {"task_id": task_id, "status": "waiting", "until": retry.isoformat(), "reason": f"error, retry {errors}"}

    def _finish_if_over(self, task_id: int) -> dict[str, Any] | None:
        """Close the cycle if its task is closed or it ran out of ticks/time; None while it should go on."""
        now = self.services.clock()
        with self.services.db.unit() as repos:
            task = repos.tasks.get(task_id)
            if task.repl_status != "running":
                return {"task_id": task_id, "status": task.repl_status}
            thread = repos.threads.get(task.repl_thread) if task.repl_thread else None
            config = dict(task.repl_config or {})
            if task.status in CLOSED:
                reason = f"task {task.status}"
            else:
                started = datetime.fromisoformat(config.get("started_at") or now.isoformat())
                over_ticks = thread is not None and thread.tick >= int(config.get("max_ticks") or 20)
                over_time = now - started >= timedelta(seconds=float(config.get("deadline_s") or 3600))
                used = self._tokens(repos, task.repl_thread, config)
                budget = int(config.get("token_budget") or 0)
                if budget and used >= budget:  # its own budget: spent, it stops (no restart)
                    reason = f"its budget of {budget:,} tokens is spent ({used:,})"
                elif not (over_ticks or over_time):
                    return None
                else:
                    reason = "timeout"
        if reason == "timeout":
            return self._timeout(task_id, config)
        return self._stop(task_id, reason, status="stopped")

    @staticmethod
    def _tokens(repos: Repos, thread_id: str | None, config: dict[str, Any]) -> int:
        """Tokens the cycle's model calls used, restarts included."""
        totals = repos.llm_calls.totals(thread_id) if thread_id else {"prompt_tokens": 0, "completion_tokens": 0}
        return int(config.get("tokens_before") or 0) + int(totals["prompt_tokens"]) + int(totals["completion_tokens"])

    def _stop(self, task_id: int, reason: str, *, status: str, error: str | None = None) -> dict[str, Any]:
        with self.services.db.unit() as repos:
            task = repos.tasks.get(task_id)
            thread_id, parent_id, title = task.repl_thread, None, task.title
            thread = repos.threads.get(thread_id) if thread_id else None
            parent_id = thread.parent_id if thread is not None else None
            running = thread is not None and thread.status == "running"
        chronicle = None
        if running and thread_id:
            result = close_thread(self.services, thread_id, status="completed" if status == "stopped" else "aborted",
                                  error=error)
            chronicle = result.chronicle
        with self.services.db.unit() as repos:
            repos.tasks.set_repl(task_id, repl_status=status, repl_error=error)
            if status == "error":
                repos.tasks.update(task_id, status="frozen")
            text = f"task {task_id} ({title}): sub-cycle {status} ({reason})." + (f" Chronicle: {chronicle}" if chronicle else "")
            repos.notes.add(text[:4000], source=NoteSource.SYSTEM, task_id=task_id, tags=["task-cycle", status],
                            created_at=self.services.clock())
            repos.processes.add("tasks.cycle", text[:2000], status="error" if status == "error" else "ok",
                                thread_id=parent_id, task_id=task_id)
        if thread_id:
            self.agents.pop(thread_id, None)
        return {"task_id": task_id, "status": status, "reason": reason}

    def _error(self, task_id: int, error: str) -> dict[str, Any]:
        return self._stop(task_id, f"error: {error[:300]}", status="error", error=error[:2000])

    def _timeout(self, task_id: int, config: dict[str, Any]) -> dict[str, Any]:
        restarts = int(config.get("restarts") or 0)
        if restarts >= int(config.get("max_restarts") or 0):
            return self._stop(task_id, f"timeout after {restarts} restart(s)", status="stopped", error="timeout")
        with self.services.db.unit() as repos:
            task = repos.tasks.get(task_id)
            old = repos.threads.get(task.repl_thread) if task.repl_thread else None
            assert old is not None and old.parent_id is not None, f"task {task_id}'s sub-cycle has no thread of its own"
            parent_id = old.parent_id
        close_thread(self.services, old.id, status="aborted", error="timeout: restarted")
        self.agents.pop(old.id, None)
        with self.services.db.unit() as repos:
            child, _, _ = open_thread(self.services, repos, parent_id=parent_id, child_id=f"{old.id}-r{restarts + 1}",
                                      label=f"task {task_id}: {task.title} (restart {restarts + 1})"[:200],
                                      window_ratio=float(config.get("window_ratio") or 0.5), max_depth=self.services.settings.stelis.max_depth,
                                      origin="task")
            config.update(restarts=restarts + 1, started_at=self.services.clock().isoformat(),
                          tokens_before=self._tokens(repos, old.id, config))
            repos.tasks.set_repl(task_id, repl_thread=child.id, repl_config=config)
            repos.processes.add("tasks.cycle", f"task {task_id}'s sub-cycle timed out; restarted in {child.id}",
                                status="warning", thread_id=parent_id, task_id=task_id)
        return {"task_id": task_id, "status": "running", "reason": f"timeout: restart {restarts + 1}"}

    def _reap_stopped(self) -> list[dict[str, Any]]:
        """Cycles stopped by `tasks.stop` whose thread still runs: close them with a chronicle."""
        with self.services.db.unit() as repos:
            stopped = [t.id for t in repos.tasks.with_repl_status("stopped")
                       if t.repl_thread and (th := repos.threads.get(t.repl_thread)) is not None and th.status == "running"]
        return [self._stop(task_id, "stopped by the main loop", status="stopped") for task_id in stopped]
