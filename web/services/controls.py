"""Controls: start, pause and stop the loop (a flag in the database the loop obeys between ticks), its ticks, the
health of each LLM endpoint from the calls the loop recorded, and the models chosen at run time (the primary one,
priorities, enabled, validators: managers/models.py, persisted, taken by the loop at its next tick)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from managers import Managers
from managers.loop import Wanted, loop_alive
from managers.models import RegistryError
from memory import Repos
from web.errors import NotFoundError, ServiceError
from web.schemas.controls import LLMHealth, LLMUpdateIn, LoopStatus


def llm_health(repos: Repos) -> list[LLMHealth]:
    recent = repos.llm_calls.recent(200)
    chosen = {row["id"]: row for row in Managers(repos).models.listing()}
    rows = []
    for entry in repos.llm_registry.all():
        calls = [c for c in recent if c.llm_id == entry.id]
        last = calls[-1] if calls else None
        mine = chosen[entry.id]
        rows.append(LLMHealth(id=entry.id, provider=entry.provider, model=entry.model, priority=mine["priority"],
                              enabled=mine["enabled"], is_validator=mine["is_validator"], selected=mine["selected"],
                              trust_score=entry.trust_score,
                              base_url=(entry.config or {}).get("base_url"), calls=len(calls),
                              failures=sum(1 for c in calls if not c.ok), last_ok=last.ok if last else None,
                              last_error=last.error if last else None,
                              last_latency_ms=last.latency_ms if last else None,
                              healthy=last.ok if last else None))
    return rows


def _registry_change(change: Callable[[], str]) -> list[LLMHealth]:
    try:
        change()
    except RegistryError as exc:
        raise ServiceError(str(exc), field="id", status=409) from None
    return []


def select_llm(repos: Repos, llm_id: str | None) -> list[LLMHealth]:
    """The primary model, persisted; the loop (any process) takes it at its next tick."""
    _registry_change(lambda: Managers(repos).models.select(llm_id))
    return llm_health(repos)


def update_llm(repos: Repos, llm_id: str, change: LLMUpdateIn) -> list[LLMHealth]:
    if llm_id not in {r.id for r in repos.llm_registry.all()}:
        raise NotFoundError(f"no model {llm_id!r}", field="llm_id")
    _registry_change(lambda: Managers(repos).models.update(llm_id, priority=change.priority, enabled=change.enabled,
                                                           is_validator=change.is_validator))
    return llm_health(repos)


def loop_status(repos: Repos) -> LoopStatus:
    state = Managers(repos).loop.status()
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
                      alive=loop_alive(loop),
                      reported_at=loop.get("at"), ticks=repos.ticks.count(), last_tick=tick, llms=llm_health(repos))


def set_control(repos: Repos, want: Wanted, now: datetime) -> LoopStatus:
    Managers(repos).loop.request_state(want, by="human (web)", now=now)
    return loop_status(repos)
