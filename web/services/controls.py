"""Controls: start, pause and stop the loop (a flag in the database the loop obeys between ticks), its ticks, the
health of each LLM endpoint from the calls the loop recorded, and the models chosen at run time (the primary one,
priorities, enabled, validators: managers/models.py, persisted, taken by the loop at its next tick)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from i18n import N_
from managers import Managers
from managers.loop import Wanted, loop_alive
from managers.models import ModelNotFound, RegistryError, ServerCheckFailed
from persona.settings import Settings
from web.errors import NotFoundError, ServiceError
from web.schemas.controls import LLMAddIn, LLMHealth, LLMUpdateIn, LocalServer, LoopStatus


def llm_health(house: Managers) -> list[LLMHealth]:
    return [
        LLMHealth(
            id=h.id,
            provider=h.provider,
            model=h.model,
            priority=h.priority,
            enabled=h.enabled,
            is_validator=h.is_validator,
            selected=h.selected,
            trust_score=h.trust_score,
            base_url=h.base_url,
            calls=h.calls,
            failures=h.failures,
            last_ok=h.last_ok,
            last_error=h.last_error,
            last_latency_ms=h.last_latency_ms,
            healthy=h.healthy,
            added=h.added,
        )
        for h in house.models.health()
    ]


def _registry_change(change: Callable[[], str]) -> list[LLMHealth]:
    try:
        change()
    except RegistryError as exc:
        raise ServiceError(str(exc), field="id", status=409) from None
    return []


def select_llm(house: Managers, llm_id: str | None) -> list[LLMHealth]:
    """The primary model, persisted; the loop (any process) takes it at its next tick."""
    _registry_change(lambda: house.models.select(llm_id))
    return llm_health(house)


def update_llm(house: Managers, llm_id: str, change: LLMUpdateIn) -> list[LLMHealth]:
    if not house.models.registered(llm_id):
        raise NotFoundError(N_("no model %(llm_id)r"), llm_id=llm_id, field="llm_id")
    _registry_change(
        lambda: house.models.update(
            llm_id, priority=change.priority, enabled=change.enabled, is_validator=change.is_validator
        )
    )
    return llm_health(house)


def add_llm(house: Managers, settings: Settings, body: LLMAddIn) -> LLMHealth:
    """A model on an OpenAI-compatible server, after its health check (422 naming base_url when it fails, 409 when
    its id is taken); persisted, taken by the loop at its next tick."""
    models = house.models
    try:
        row = models.add(body.base_url, body.model, name=body.name or None, api_key=body.api_key or None)
    except ServerCheckFailed as exc:
        raise ServiceError(
            N_("the server did not pass the health check: %(exc)s"), exc=exc, field="base_url", status=422
        ) from None
    except RegistryError as exc:
        raise ServiceError(str(exc), field="name", status=409) from None
    return next(h for h in llm_health(house) if h.id == row["id"])


def remove_llm(house: Managers, llm_id: str) -> list[LLMHealth]:
    """Forget a model added at run time (404: none; 409: a configured one, disable it instead)."""
    try:
        house.models.remove(llm_id)
    except ModelNotFound as exc:
        raise NotFoundError(str(exc), field="llm_id") from None
    except RegistryError as exc:
        raise ServiceError(str(exc), field="llm_id", status=409) from None
    return llm_health(house)


def local_servers(house: Managers) -> list[LocalServer]:
    """The OpenAI-compatible servers answering on loopback (short timeouts), with their models — those whose base
    URL is already registered left out."""
    from llm.discovery import detect_local

    registered = house.models.registered_urls()
    return [
        LocalServer(name=s.name, base_url=s.base_url, models=s.models, offer=s.offer)
        for s in detect_local()
        if s.base_url not in registered and s.models
    ]


def loop_status(house: Managers) -> LoopStatus:
    state = house.loop.status()
    wanted, loop = state.control, state.loop
    last = house.journal.ticks(1)
    tick = None
    if last:
        t = last[0]
        tick = {
            "thread": t.thread_id,
            "tick": t.tick,
            "status": t.status,
            "llm_calls": t.llm_calls,
            "prompt_tokens": t.prompt_tokens,
            "completion_tokens": t.completion_tokens,
            "started_at": t.started_at.isoformat() if t.started_at else None,
            "finished_at": t.finished_at.isoformat() if t.finished_at else None,
        }
    return LoopStatus(
        want=wanted.want,
        requested_by=wanted.by,
        state=loop.state,
        thread=loop.thread,
        pid=loop.pid,
        alive=loop_alive(loop),
        reported_at=loop.at.isoformat() if loop.at else None,
        ticks=house.journal.tick_count(),
        last_tick=tick,
        llms=llm_health(house),
    )


def spend(house: Managers, now: datetime) -> dict[str, Any]:
    """What the persona spent on its models today and this hour, per model, and its budget (managers/budget.py),
    with how many ticks were quiet (no model call: managers/thinking.py) today."""
    return house.reports.spend(now)


def wake_up(house: Managers, now: datetime) -> LoopStatus:
    """Ask a dreaming persona to wake up: the loop ends the dream at its next model call (within about a second)."""
    house.loop.request_wake(by="human (web)", now=now)
    return loop_status(house)


def set_control(house: Managers, want: Wanted, now: datetime) -> LoopStatus:
    house.loop.request_state(want, by="human (web)", now=now)
    return loop_status(house)
