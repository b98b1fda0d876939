"""Step 1 (HMP): open the tick — take in edited persona files and setting changes, close the processes the
model has seen, time out stale ones, and empty every per-tick report. A tick that keeps killing the process before
it finishes is quarantined here (nodes/quarantine.py) rather than started again."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from nodes.context import (
    TICK_SUMMARY,
    AnimaContext,
    checkpoint_thread_of,
    services_of,
)
from nodes.quarantine import MAX_TICK_STARTS
from nodes.state import SamplingParams, TickState, TickValues


def update_process_log(
    state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None
) -> TickValues:
    services = services_of(runtime)
    params = params or {}
    root = state.root_thread or state.thread_id or checkpoint_thread_of(runtime) or "main"
    mode = params.get("mode") or state.mode or "chat"
    now = services.clock()
    with services.db.unit() as repos:
        services.managers.over(repos).loop.preload_tick(root)  # what the tick's steps read, once for the tick
        services.refresh(repos)
        opened = services.managers.over(repos).loop.open_tick(  # with the settings as refreshed
            root,
            state.thread_id or root,
            after=state.tick,
            mode=mode,
            label=params.get("label", ""),
            playbook=params.get("playbook", ""),
            persona=services.persona.name,
            seen=state.shown_process_ids,
            now=now,
            max_starts=MAX_TICK_STARTS,
        )
    thread_id, tick = opened.thread_id, opened.tick
    services.reads.start(thread_id, tick)
    services.reads.put(thread_id, tick, TICK_SUMMARY, opened.summary)
    for row in opened.threads:  # what later steps ask of the threads
        services.reads.put(thread_id, tick, ("thread", row.id), row)
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
        "context_report": {"processes_closed": opened.closed, "processes_timed_out": list(opened.timed_out)},
    }
