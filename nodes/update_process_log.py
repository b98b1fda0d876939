"""Step 1 (HMP §1): open the tick; close processes the model has seen; time out stale ones."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from langgraph.runtime import Runtime

from nodes.context import AnimaContext, services_of
from nodes.state import TickState
from nodes.stelis import active_thread


def update_process_log(state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None) -> dict:
    svc = services_of(runtime)
    params = params or {}
    root = state.get("root_thread") or state.get("thread_id") or runtime.execution_info.thread_id or "main"
    tick = int(state.get("tick", 0)) + 1
    mode = params.get("mode") or state.get("mode") or "chat"
    now = svc.clock()
    with svc.db.unit() as repos:
        repos.threads.ensure(root, label=params.get("label", ""), playbook=params.get("playbook", ""),
                             persona=svc.persona.name, origin="root")
        current = repos.threads.get(state.get("thread_id") or root)
        if current is not None and current.origin in ("playbook", "task"):
            thread_id = current.id  # a playbook's Stelis region, or a task's sub-cycle, stays in its own thread
        else:  # the persona may have entered a Stelis thread itself (stelis.start): its ticks run there
            thread_id = active_thread(repos, root)
        repos.threads.set_tick(thread_id, tick)
        repos.ticks.start(thread_id, tick, mode)
        closed = repos.processes.close(state.get("shown_process_ids") or [])
        timed_out = repos.processes.time_out_stale(thread_id, timedelta(seconds=svc.settings.process_timeout_s), now)
    sampling = state.get("sampling") or _sampling_dict(svc)
    return {
        "thread_id": thread_id,
        "root_thread": state.get("root_thread") or root,
        "tick": tick,
        "mode": mode,
        "sampling": sampling,
        "base_sampling": state.get("base_sampling") or _sampling_dict(svc),
        # per-tick fields start empty, so a reader never mistakes last tick's values for this one's
        "response": "",
        "thought": "",
        "commands": [],
        "parse_errors": [],
        "native_tool_calls": [],
        "self_emotions": [],
        "emotions": [],
        "novelty_signals": {},
        "novelty": {},
        "validation": {},
        "executed": [],
        "response_id": None,
        "degraded": False,
        "error": None,
        "context_report": {"processes_closed": closed, "processes_timed_out": [p.id for p in timed_out]},
    }


def _sampling_dict(svc) -> dict[str, float]:
    s = svc.settings.sampling
    return {"temperature": s.temperature, "top_p": s.top_p, "presence_penalty": s.presence_penalty,
            "frequency_penalty": s.frequency_penalty, "max_tokens": s.max_tokens}
