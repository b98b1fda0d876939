"""The tick loop driver: invoke, pause `cycle.pause` seconds, honour idle mode, back off when degraded,
stop cleanly on request (Ctrl-C drains: the running step finishes, its checkpoint is saved, and the
next run resumes the same tick)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable

from langgraph.errors import GraphDrained
from langgraph.runtime import RunControl

from graph.agent import Agent
from nodes.commands.cycle import load_cycle, update_cycle

MAX_DEGRADED_BACKOFF_S = 60.0


@dataclass
class LoopResult:
    ticks_run: int = 0
    interrupted: bool = False
    last_state: dict[str, Any] = field(default_factory=dict)


class Stopper:
    """Shared between the signal handler and the loop: request a drain, wake any sleep."""

    def __init__(self) -> None:
        self.control = RunControl()
        self.event = threading.Event()

    def request(self, reason: str = "interrupt") -> None:
        self.control.request_drain(reason)
        self.event.set()

    @property
    def requested(self) -> bool:
        return self.event.is_set()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.event.wait(seconds)


def idle_should_wake(agent: Agent, now: datetime) -> bool:
    """While `cycle.idle` is on: wake on an unread note (if asked) or after the timeout; no LLM calls meanwhile."""
    with agent.services.db.unit() as repos:
        idle = load_cycle(repos, agent.thread_id).get("idle")
        if not idle:
            return True
        wake = False
        if idle.get("wake_on_note", True) and repos.notes.unread_incoming(limit=1):
            wake = True
        timeout = idle.get("timeout_s")
        since = idle.get("since")
        if timeout and since and (now - datetime.fromisoformat(since)).total_seconds() >= timeout:
            wake = True
        if wake:
            update_cycle(repos, agent.thread_id, idle=None)
        return wake


def run_loop(agent: Agent, ticks: int | None = None, *, stopper: Stopper | None = None,
             on_stream: Callable[[str, Any], None] | None = None, idle_poll_s: float = 1.0,
             inputs: dict[str, Any] | None = None) -> LoopResult:
    """Tick until `ticks` ran or a stop is requested; `inputs` (the playbook's) go in with the first tick."""
    stopper = stopper or Stopper()
    result = LoopResult()
    degraded_streak = 0
    while ticks is None or result.ticks_run < ticks:
        if stopper.requested:
            result.interrupted = True
            break
        if not agent.interrupted and not idle_should_wake(agent, agent.services.clock()):
            stopper.sleep(idle_poll_s)
            continue
        try:
            for mode, data in agent.stream(stopper.control, inputs if result.ticks_run == 0 else None):
                if on_stream:
                    on_stream(mode, data)
        except GraphDrained:
            result.interrupted = True
            break
        result.ticks_run += 1
        state = agent.state()
        result.last_state = state
        if state.get("degraded"):
            degraded_streak += 1
            stopper.sleep(min(MAX_DEGRADED_BACKOFF_S, 2.0 ** degraded_streak))
        else:
            degraded_streak = 0
            if ticks is None or result.ticks_run < ticks:
                stopper.sleep(float(state.get("pause_s") or 0.0))
    return result
