"""The tick loop driver: invoke, pause `cycle.pause` seconds, honour idle mode, back off when degraded,
stop cleanly on request. A stop (Ctrl-C, SIGTERM) cancels the model call in flight and drains: the steps that
finished are checkpointed, the interrupted one runs again when the next run resumes the same tick. A pause or a
backoff ends early when the human writes, and no pause starts while a human's note waits (the persona answers
first: DESIGN.md §9; within a tick, nodes/attention.py). Around the ticks (autonomy.py): the session, dreams and task
sub-cycles — none of which starts while a human's note waits."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from langgraph.errors import GraphDrained
from langgraph.runtime import RunControl

from graph.agent import Agent, settle_heap
from graph.loop.autonomy import Autonomy
from graph.telemetry import tick_span
from llm import LLMCancelled
from managers.loop import Wanted
from managers.thinking import ThinkingMode, resolved_mode
from nodes.state import TickValues

log = logging.getLogger(__name__)
MAX_DEGRADED_BACKOFF_S = 60.0


@dataclass
class LoopResult:
    ticks_run: int = 0
    interrupted: bool = False
    stopped_by_human: bool = False  # the human asked the loop to stop (managers/loop.py)
    failed_ticks: int = 0  # ticks a step failed in (quarantined, the loop went on)
    quiet_ticks: int = 0  # ticks with nothing to think about: no model call (managers/thinking.py)
    dreams: list[dict[str, Any]] = field(default_factory=list)
    last_state: TickValues = field(default_factory=TickValues)


class Stopper:
    """Shared between the signal handler and the loop: request a drain, cancel the model call in flight (the
    registry watches `event` while the loop runs, see LLMRegistry.cancel_when), wake any sleep."""

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
        return agent.services.managers.over(repos).loop.wake_if_due(agent.thread_id, now)


def pause(
    agent: Agent,
    stopper: Stopper,
    seconds: float,
    *,
    notes_after: int,
    poll_s: float = 1.0,
    unless_waiting: bool = False,
) -> bool:
    """Sleep `seconds`; a stop or a note from the human newer than `notes_after` (a note id) ends it early.
    Returns True when a note ended it. One indexed query a second: a note waits at most `poll_s`. With
    `unless_waiting` (the pause after a good tick — the persona's own pace, or the stagnation reflex's), no pause
    starts while a human's note waits unanswered (one the last tick did not show: someone else's)."""
    if unless_waiting and seconds > 0 and human_waits(agent):
        log.info("no pause: a human's note waits")
        return True
    deadline = time.monotonic() + seconds
    while not stopper.requested:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        stopper.sleep(min(poll_s, left))
        with agent.services.managers.reading() as house:
            if house.conversation.human_wrote_after(notes_after):
                log.info("pause ended early: a note from the human")
                return True
    return False


def thinking_mode(agent: Agent) -> ThinkingMode:
    """`cycle.thinking` as it is in force for this agent's first model."""
    services = agent.services
    first = services.llms.order()[0] if services.llms.ids else None
    return resolved_mode(services.settings, str(services.llms.entry(first).get("provider", "")) if first else None)


def quiet_tick(agent: Agent, thought_ticks: int) -> float | None:
    """Whether the next tick has anything to think about: None if it has (the moment is recorded), else the pause
    before the next look (the quiet tick is recorded)."""
    services = agent.services
    with services.managers.unit() as house:
        decision = house.thinking.decide(
            agent.thread_id, services.clock(), thinking_mode(agent), ticks_since_start=thought_ticks
        )
        if decision.think:
            house.thinking.thought(agent.thread_id, services.clock())
            return None
    log.info("quiet tick: %s; next look in %gs", decision.reason, decision.pause_s)
    return decision.pause_s


def quiet_pause(agent: Agent, stopper: Stopper, seconds: float, poll_s: float) -> None:
    """The pause after a quiet tick; it ends the moment something arrives (a stop, a note, a finished process…)."""
    deadline = time.monotonic() + seconds
    while not stopper.requested:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        stopper.sleep(min(poll_s, left))
        with agent.services.managers.reading() as house:
            if house.thinking.arrived(agent.thread_id):
                return


def budget_allows_own_work(agent: Agent) -> bool:
    """A dream or a task sub-cycle (the persona's own work, not an answer) only within the budget
    (managers/budget.py)."""
    services = agent.services
    budget = services.settings.budget
    if budget.tokens_per_day is None and budget.tokens_per_hour is None:
        return True
    with services.managers.reading() as house:
        return house.budget.state(services.clock()) == "ok"


def human_waits(agent: Agent) -> bool:
    """A human's note waits unread (the notes mode shows them: `auto`)."""
    services = agent.services
    if services.settings.cycle.notes_mode != "auto":
        return False
    with services.db.reading() as repos:
        return bool(services.managers.over(repos).conversation.waiting())


def run_loop(
    agent: Agent,
    ticks: int | None = None,
    *,
    stopper: Stopper | None = None,
    on_stream: Callable[[str, Any], None] | None = None,
    idle_poll_s: float = 1.0,
    inputs: dict[str, Any] | None = None,
    autonomy: bool = True,
    notify: Callable[[str], None] | None = None,
    note_poll_s: float = 0.25,
) -> LoopResult:
    """Tick until `ticks` ran or a stop is requested; `inputs` (the playbook's) go in with the first tick.

    With `autonomy` (the default) the run is a session (saved at stop), the persona dreams when it is due, and
    task sub-cycles take a tick after each of its own (and while it idles). The pause after a tick (and the
    backoff after a degraded one) ends when the human writes (checked every `note_poll_s`)."""
    stopper = stopper or Stopper()
    result = LoopResult()
    degraded_streak = 0
    reported: list[str] = []  # the loop state last recorded for the Controls page
    life = Autonomy(agent, on_stream, notify) if autonomy else None
    if life:
        life.start()
    channels = start_channels(agent) if autonomy else None
    follow_up = start_follow_up(agent)
    settle_heap()  # started: what lives now lives as long as the loop
    try:
        with agent.services.llms.cancel_when(stopper.event):
            while ticks is None or result.ticks_run < ticks:
                if stopper.requested:
                    result.interrupted = True
                    break
                want = obey_control(agent, stopper, reported, idle_poll_s)
                if want == "stopped":
                    result.stopped_by_human = True
                    break
                if want == "paused":
                    continue
                if life and not agent.interrupted and budget_allows_own_work(agent):
                    dreamt = life.maybe_dream(stopper.control)
                    if dreamt is not None:
                        result.dreams.append(dreamt)
                        reported.clear()  # it reported "dreaming": say what it does now
                if not agent.interrupted and not idle_should_wake(agent, agent.services.clock()):
                    if life:
                        life.step_tasks(stopper.control)
                    stopper.sleep(idle_poll_s)
                    continue
                if not agent.interrupted:  # an interrupted tick goes on: it had something to think about
                    quiet = quiet_tick(agent, result.ticks_run - result.quiet_ticks)
                    if quiet is not None:
                        result.ticks_run += 1
                        result.quiet_ticks += 1
                        _report(agent, reported, "quiet")  # the Controls page: running, with nothing new to think
                        if life and budget_allows_own_work(agent):  # its task sub-cycles go on meanwhile
                            life.step_tasks(stopper.control)
                        if ticks is None or result.ticks_run < ticks:
                            quiet_pause(agent, stopper, quiet, note_poll_s)
                        continue
                with agent.services.managers.reading() as house:
                    notes_seen = (
                        house.conversation.newest_note_id()
                    )  # a note written during the tick also ends its pause
                if on_stream and agent.interrupted:  # its opening step does not run again: say which tick goes on
                    opened = agent.state()
                    on_stream(
                        "custom",
                        {
                            "event": "tick_resumed",
                            "tick": opened.get("tick"),
                            "thread_id": opened.get("thread_id") or agent.thread_id,
                        },
                    )
                with tick_span(agent.thread_id, agent.services.settings.name):
                    for mode, data in agent.stream(
                        stopper.control, inputs if result.ticks_run == 0 else None, events=on_stream is not None
                    ):
                        if on_stream:
                            on_stream(mode, data)
                result.ticks_run += 1
                state = agent.state()
                result.last_state = state
                if life:
                    life.after_tick(stopper.control)
                if agent.last_failure is not None:
                    result.failed_ticks += 1
                    if notify:
                        failure = agent.last_failure
                        notify(
                            f"tick {failure.tick} failed{' in ' + failure.step if failure.step else ''}: "
                            f"{failure.error[:300]} — its output is quarantined; the next tick starts clean"
                        )
                backoff = bool(state.get("degraded") or agent.last_failure is not None)
                if backoff:  # back off, in case the fault persists
                    degraded_streak += 1
                    wait = min(MAX_DEGRADED_BACKOFF_S, 2.0**degraded_streak)
                elif ticks is None or result.ticks_run < ticks:
                    degraded_streak = 0
                    wait = float(state.get("pause_s") or 0.0)
                else:
                    wait = 0.0
                pause(agent, stopper, wait, notes_after=notes_seen, poll_s=note_poll_s, unless_waiting=not backoff)
    except (GraphDrained, LLMCancelled):  # a stop during a step (LLMCancelled: a model call outside the graph)
        result.interrupted = True
    finally:
        if life:
            life.stop()
        if channels is not None:
            channels.stop()
        if follow_up is not None:
            follow_up.stop()
        _report(agent, reported, "stopped")
    return result


def start_follow_up(agent: Agent) -> Any:
    """The memory index's follow-up of new memories (memory/followup.py) in its thread beside the loop, with the
    model's index-time expansion when `memory.expansion` is on; None without a memory index or when it is off."""
    services = agent.services
    memory, settings = services.memory, services.settings.memory
    if memory is None or not settings.follow_up:
        return None
    if settings.expansion:
        from memory.expansion import expander
        from nodes.upkeep import generator

        memory.follow_up.expander = expander(generator(services, "expand", 300, thread_id=agent.thread_id, tick=0))
    memory.follow_up.start()
    return memory.follow_up


def start_channels(agent: Agent) -> Any:
    """The configured channels (config.yaml `channels.entries`), running beside the loop in their own thread
    (channels/runner.py); None when there are none."""
    settings = agent.services.settings
    if not any(entry.enabled for entry in settings.channels.entries):
        return None
    from channels.runner import ChannelRunner

    return ChannelRunner(agent.services.db, settings).start()


def _report(agent: Agent, reported: list[str], state: str) -> None:
    if reported[-1:] == [state]:
        return
    import os

    with agent.services.db.unit() as repos:
        agent.services.managers.over(repos).loop.record_status(
            state, now=agent.services.clock(), thread=agent.thread_id, pid=os.getpid()
        )
    reported[:] = [state]


def obey_control(agent: Agent, stopper: Stopper, reported: list[str], poll_s: float) -> Wanted:
    """What the human wants of the loop now; while paused, wait a poll interval (a stop request ends the wait)."""
    with agent.services.db.unit() as repos:
        want = agent.services.managers.over(repos).loop.wanted()
    _report(agent, reported, want)
    if want == "paused":
        stopper.sleep(poll_s)
    return want
