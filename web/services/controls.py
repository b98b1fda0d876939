"""Controls: start, pause and stop the loop (a flag in the database the loop obeys between ticks), its ticks, and
the health of each LLM endpoint from the calls the loop recorded."""

from __future__ import annotations

from datetime import datetime

from graph.loop import control
from memory import Repos
from web.schemas.controls import LLMHealth, LoopStatus


def llm_health(repos: Repos) -> list[LLMHealth]:
    recent = repos.llm_calls.recent(200)
    rows = []
    for entry in repos.llm_registry.all():
        calls = [c for c in recent if c.llm_id == entry.id]
        last = calls[0] if calls else None
        rows.append(LLMHealth(id=entry.id, provider=entry.provider, model=entry.model, priority=entry.priority,
                              enabled=entry.enabled, trust_score=entry.trust_score,
                              base_url=(entry.config or {}).get("base_url"), calls=len(calls),
                              failures=sum(1 for c in calls if not c.ok), last_ok=last.ok if last else None,
                              last_error=last.error if last else None,
                              last_latency_ms=last.latency_ms if last else None,
                              healthy=last.ok if last else None))
    return rows


def loop_status(repos: Repos) -> LoopStatus:
    state = control.status(repos)
    wanted, loop = state["control"], state["loop"]
    last = repos.ticks.recent(1)
    tick = None
    if last:
        t = last[0]
        tick = {"thread": t.thread_id, "tick": t.tick, "status": t.status, "llm_calls": t.llm_calls,
                "prompt_tokens": t.prompt_tokens, "completion_tokens": t.completion_tokens,
                "started_at": t.started_at.isoformat() if t.started_at else None,
                "finished_at": t.finished_at.isoformat() if t.finished_at else None}
    return LoopStatus(want=wanted.get("want", "running"), requested_by=wanted.get("by"),
                      state=loop.get("state", "unknown"), thread=loop.get("thread"), pid=loop.get("pid"),
                      alive=control.loop_alive(loop),
                      reported_at=loop.get("at"), ticks=repos.ticks.count(), last_tick=tick, llms=llm_health(repos))


def set_control(repos: Repos, want: control.Wanted, now: datetime) -> LoopStatus:
    control.request(repos, want, by="human (web)", now=now)
    return loop_status(repos)
