"""Step 1 (HMP): open the tick — take in edited persona files and setting changes, close the processes the
model has seen, time out stale ones, and empty every per-tick report. A tick that keeps killing the process before
it finishes is quarantined here (nodes/quarantine.py) rather than started again."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from langgraph.runtime import Runtime

from nodes.context import (
    TICK_SUMMARY,
    AnimaContext,
    checkpoint_thread_of,
    services_of,
)
from nodes.quarantine import MAX_TICK_STARTS, quarantine_tick
from nodes.state import SamplingParams, TickState, TickValues
from nodes.stelis.threads import active_thread


def update_process_log(
    state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None
) -> TickValues:
    services = services_of(runtime)
    params = params or {}
    root = state.root_thread or state.thread_id or checkpoint_thread_of(runtime) or "main"
    mode = params.get("mode") or state.mode or "chat"
    now = services.clock()
    with services.db.unit() as repos:
        repos.config.preload_tick(root)  # what the tick's steps read, once for the tick
        services.refresh(repos)
        repos.threads.ensure(
            root,
            label=params.get("label", ""),
            playbook=params.get("playbook", ""),
            persona=services.persona.name,
            origin="root",
        )
        current = repos.threads.get(state.thread_id or root)
        if current is not None and current.origin in ("playbook", "task"):
            thread_id = current.id  # a playbook's Stelis region, or a task's sub-cycle, stays in its own thread
        else:  # the persona may have entered a Stelis thread itself (stelis.start): its ticks run there
            thread_id = active_thread(services, repos, root)
        tick = repos.ticks.next_unfinished(thread_id, state.tick + 1)
        started = repos.ticks.start(thread_id, tick, mode)
        while (started.summary or {}).get("attempts", 1) > MAX_TICK_STARTS:
            quarantine_tick(
                services.managers.over(repos),
                thread_id,
                tick,
                step=None,
                error=(f"started {MAX_TICK_STARTS} times without finishing: the process died each time"),
            )
            tick += 1
            started = repos.ticks.start(thread_id, tick, mode)
        repos.threads.set_tick(thread_id, tick)
        services.reads.start(thread_id, tick)
        services.reads.put(thread_id, tick, TICK_SUMMARY, dict(started.summary or {}))
        for row in (repos.threads.get(thread_id), repos.threads.get(root)):  # what later steps ask of the threads
            if row is not None:
                services.reads.put(thread_id, tick, ("thread", row.id), row)
        closed = repos.processes.close(state.shown_process_ids)
        timed_out = repos.processes.time_out_stale(
            thread_id, timedelta(seconds=services.settings.cycle.process_timeout_s), now
        )
    base: SamplingParams = services.settings.sampling.params()  # type: ignore[assignment]
    return {
        "thread_id": thread_id,
        "root_thread": state.root_thread or root,
        "tick": tick,
        "mode": mode,
        "sampling": state.sampling or base,
        "base_sampling": base,
        # per-tick fields start empty, so a reader never mistakes last tick's values for this one's
        "response": "",
        "thought": "",
        "commands": [],
        "parse_errors": [],
        "native_tool_calls": [],
        "self_emotions": [],
        "reply": {},
        "emotions": [],
        "emotion_eval": {},
        "novelty_signals": {},
        "novelty": {},
        "validation": {},
        "memory_upkeep": {},
        "executed": [],
        "response_id": None,
        "untrusted": [],
        "audience": {},
        "after_call": "",
        "degraded": False,
        "error": None,
        "context_report": {"processes_closed": closed, "processes_timed_out": [p.id for p in timed_out]},
    }
