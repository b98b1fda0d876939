"""The tick loop driver: invoke, pause `cycle.pause` seconds, honour idle mode, back off when degraded,
stop cleanly on request (Ctrl-C drains: the running step finishes, its checkpoint is saved, and the
next run resumes the same tick). Around the ticks (`Autonomy`): the session, dreams and task sub-cycles."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable

from langgraph.errors import GraphDrained
from langgraph.runtime import RunControl

from graph.agent import Agent
from graph.playbook import load_playbook, resolve_playbook_path
from graph.sessions import checkpoint_session, close_session, open_session
from graph.task_cycles import TaskCycles
from memory.episodes import persona_zone
from nodes.commands.cycle import idle_wake_reason, load_cycle, update_cycle
from persona.dreaming import DreamSettings, dream_due

log = logging.getLogger(__name__)
MAX_DEGRADED_BACKOFF_S = 60.0
DREAM_CHECK_EVERY = timedelta(minutes=1)


@dataclass
class LoopResult:
    ticks_run: int = 0
    interrupted: bool = False
    dreams: list[dict[str, Any]] = field(default_factory=list)
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
    """While `cycle.idle` is on: wake on a matching note, a process or task cycle finishing, or the timeout."""
    with agent.services.db.unit() as repos:
        idle = load_cycle(repos, agent.thread_id).get("idle")
        if not idle:
            return True
        reason = idle_wake_reason(repos, idle, now)
        if reason:
            update_cycle(repos, agent.thread_id, idle=None)
            repos.processes.add("cycle.idle", f"woke from idle: {reason}", status="ok", thread_id=agent.thread_id)
        return reason is not None


class Autonomy:
    """What a root loop does besides ticking: its session, dreams, and the task sub-cycles."""

    def __init__(self, agent: Agent, on_stream: Callable[[str, Any], None] | None = None,
                 notify: Callable[[str], None] | None = None):
        self.agent = agent
        self.on_stream = on_stream
        self.notify = notify
        self.session_id: int | None = None
        self.digest: str | None = None
        self.tasks = TaskCycles(agent)
        self.dream_agent: Agent | None = None
        self.dream_block: str | None = None  # a broken dreaming setting: reported once, not every tick
        self.dream_failed_on = None  # the date a dream raised: not retried before the next day
        self.dream_checked = None  # when maybe_dream last looked
        self.started = agent.services.clock()

    def start(self) -> None:
        svc = self.agent.services
        with svc.db.unit() as repos:
            self.session_id, told = open_session(repos, self.agent.thread_id, playbook=self.agent.playbook.name,
                                                 persona=svc.persona.name, now=svc.clock())
        for text in told:
            if self.notify:
                self.notify(text)
        self.tasks.resume_interrupted(self.notify)

    def after_tick(self, control: RunControl) -> None:
        with self.agent.services.db.unit() as repos:
            self.digest = checkpoint_session(repos, self.session_id, self.digest)
        self.step_tasks(control)

    def step_tasks(self, control: RunControl) -> None:
        for outcome in self.tasks.step(control, self.on_stream):
            quiet = outcome.get("status") == "running" or (outcome.get("status") == "waiting" and not outcome.get("reason"))
            if not quiet and self.on_stream:  # ended, stopped, restarted or backing off after an error
                self.on_stream("custom", {"event": "task_cycle", **outcome})

    def maybe_dream(self, control: RunControl) -> dict[str, Any] | None:
        """Run the dream playbook when it is due (persona/dreaming.py); returns its result, or None."""
        svc = self.agent.services
        now = svc.clock()
        if self.dream_checked is not None and now - self.dream_checked < DREAM_CHECK_EVERY:
            return None  # the loop also spins while idle: the settings and queries need not run every poll
        self.dream_checked = now
        with svc.db.unit() as repos:
            thread = repos.threads.get(self.agent.thread_id)
            if thread is not None and thread.parent_id is not None:
                return None
            try:
                settings = DreamSettings.load(repos, svc.persona.config)
                reason = dream_due(repos, now, persona_zone(svc.persona.config), settings, started=self.started)
            except (TypeError, ValueError) as exc:
                if self.dream_block != str(exc):
                    self.dream_block = str(exc)
                    repos.processes.add("dream", f"no dreams: bad settings: {exc}", status="error",
                                        thread_id=self.agent.thread_id)
                return None
        if reason is None or self.dream_failed_on == now.date():
            return None
        if self.dream_agent is None:
            self.dream_agent = Agent(load_playbook(resolve_playbook_path("dream")), svc, self.agent.checkpointer,
                                     thread_id=self.agent.thread_id)
        try:
            for mode, data in self.dream_agent.stream(control, inputs={"level": 0, "reason": reason}):
                if self.on_stream and mode == "custom":
                    self.on_stream(mode, data)
        except GraphDrained:
            raise
        except Exception as exc:  # noqa: BLE001 - a failed dream must not stop the persona; tried again tomorrow
            log.exception("dream failed")
            self.dream_failed_on = now.date()
            with svc.db.unit() as repos:
                repos.processes.add("dream", f"dream failed ({type(exc).__name__}: {exc}); tried again tomorrow",
                                    status="error", thread_id=self.agent.thread_id)
            return {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        return self.dream_agent.outputs().get("dream")

    def stop(self, status: str = "stopped") -> None:
        if self.session_id is None:
            return
        with self.agent.services.db.unit() as repos:
            close_session(repos, self.session_id, self.agent.services.clock(), status=status)


def run_loop(agent: Agent, ticks: int | None = None, *, stopper: Stopper | None = None,
             on_stream: Callable[[str, Any], None] | None = None, idle_poll_s: float = 1.0,
             inputs: dict[str, Any] | None = None, autonomy: bool = True,
             notify: Callable[[str], None] | None = None) -> LoopResult:
    """Tick until `ticks` ran or a stop is requested; `inputs` (the playbook's) go in with the first tick.

    With `autonomy` (the default) the run is a session (saved at stop), the persona dreams when it is due, and
    task sub-cycles take a tick after each of its own (and while it idles)."""
    stopper = stopper or Stopper()
    result = LoopResult()
    degraded_streak = 0
    life = Autonomy(agent, on_stream, notify) if autonomy else None
    if life:
        life.start()
    try:
        while ticks is None or result.ticks_run < ticks:
            if stopper.requested:
                result.interrupted = True
                break
            if life and not agent.interrupted:
                dreamt = life.maybe_dream(stopper.control)
                if dreamt is not None:
                    result.dreams.append(dreamt)
            if not agent.interrupted and not idle_should_wake(agent, agent.services.clock()):
                if life:
                    life.step_tasks(stopper.control)
                stopper.sleep(idle_poll_s)
                continue
            for mode, data in agent.stream(stopper.control, inputs if result.ticks_run == 0 else None):
                if on_stream:
                    on_stream(mode, data)
            result.ticks_run += 1
            state = agent.state()
            result.last_state = state
            if life:
                life.after_tick(stopper.control)
            if state.get("degraded"):
                degraded_streak += 1
                stopper.sleep(min(MAX_DEGRADED_BACKOFF_S, 2.0 ** degraded_streak))
            else:
                degraded_streak = 0
                if ticks is None or result.ticks_run < ticks:
                    stopper.sleep(float(state.get("pause_s") or 0.0))
    except GraphDrained:
        result.interrupted = True
    finally:
        if life:
            life.stop()
    return result
