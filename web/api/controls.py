"""/api/loop: start, pause, stop; ticks; LLM endpoints, their health, and the models chosen at run time."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, BackgroundTasks, Depends
from starlette.convertors import Convertor, register_url_convertor

from managers import Managers
from web.api.responses import PERSONA, errors
from web.context import WebServices, get_services, unit_of_work
from web.schemas.controls import (
    ControlIn,
    LLMAddIn,
    LLMHealth,
    LLMSelectIn,
    LLMUpdateIn,
    LocalServer,
    LoopStatus,
    Spend,
)
from web.services import controls

router = APIRouter(tags=["controls"], responses=PERSONA)


class ModelId(Convertor[str]):
    """A model's id in a path: any segment but the reserved ones (managers/models.py RESERVED_IDS):
    /api/llms/selected (PUT only) and /api/llms/local (GET only) answer other methods 405, they are no model."""

    regex = "(?!(?:selected|local)$)[^/]+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("model_id", ModelId())


@router.get("/loop", response_model=LoopStatus)
def read_loop(house: Managers = unit_of_work()) -> LoopStatus:
    return controls.loop_status(house)


@router.get("/spend", response_model=Spend)
def read_spend(house: Managers = unit_of_work(), services: WebServices = Depends(get_services)) -> dict[str, Any]:
    """What the persona spent on its models today and this hour, per model, cached and new prompt tokens, and its
    budget."""
    return controls.spend(house, services.clock())


@router.put("/loop", response_model=LoopStatus, responses=errors(403, 422))
def control_loop(
    body: ControlIn,
    background: BackgroundTasks,
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> LoopStatus:
    """`running`, `paused` or `stopped`: the loop obeys before its next tick."""
    if body.want == "running" and services.wake is not None:
        background.add_task(services.wake)  # a deployed persona: started again at once
    return controls.set_control(house, body.want, services.clock())


@router.post("/loop/wake", response_model=LoopStatus, responses=errors(403))
def wake_up(house: Managers = unit_of_work(), services: WebServices = Depends(get_services)) -> LoopStatus:
    """Wake a dreaming persona (state `dreaming`): its dream ends at its next model call; a note wakes it too."""
    return controls.wake_up(house, services.clock())


@router.get("/llms", response_model=list[LLMHealth])
def read_llms(house: Managers = unit_of_work()) -> list[LLMHealth]:
    return controls.llm_health(house)


@router.post(
    "/llms",
    response_model=LLMHealth,
    status_code=201,
    responses=errors(
        403,
        (409, "a model by that name is already registered"),
        (
            422,
            "the body is invalid, or the server did not pass the health check (its model "
            "list and one short completion): the message says why, field base_url",
        ),
    ),
)
def add_llm(
    body: LLMAddIn, house: Managers = unit_of_work(), services: WebServices = Depends(get_services)
) -> LLMHealth:
    """Add a model on an OpenAI-compatible server (Ollama, LM Studio, llama.cpp server, vLLM, a hosted API) after a
    health check; the answer is the new model with its `id`. The key is kept in a 0600 file of the data dir, never
    shown back. The loop thinks with it from its next tick (priority 50: before the embedded model)."""
    return controls.add_llm(house, services.settings(), body)


@router.get("/llms/local", response_model=list[LocalServer])
def read_local_servers(house: Managers = unit_of_work()) -> list[LocalServer]:
    """The OpenAI-compatible servers running on this machine's loopback (Ollama 11434, LM Studio 1234, llama.cpp
    server 8080, vLLM 8000, …), with their models, not yet registered."""
    return controls.local_servers(house)


@router.delete(
    "/llms/{llm_id:model_id}",
    response_model=list[LLMHealth],
    responses=errors(
        403,
        (404, "no such model"),
        (409, "a configured model (config.yaml, the command line): disable it instead"),
        422,
    ),
)
def remove_llm(llm_id: str, house: Managers = unit_of_work()) -> list[LLMHealth]:
    """Forget a model added here (and its key); the models left."""
    return controls.remove_llm(house, llm_id)


@router.put(
    "/llms/selected", response_model=list[LLMHealth], responses=errors(403, (409, "no such enabled model"), 422)
)
def select_llm(body: LLMSelectIn, house: Managers = unit_of_work()) -> list[LLMHealth]:
    """Think with this model (persisted; the loop takes it at its next tick); null: the highest priority again."""
    return controls.select_llm(house, body.id)


@router.patch(
    "/llms/{llm_id:model_id}",
    response_model=list[LLMHealth],
    responses=errors(403, (404, "no such model"), (409, "refused: it would leave no model enabled"), 422),
)
def update_llm(llm_id: str, body: LLMUpdateIn, house: Managers = unit_of_work()) -> list[LLMHealth]:
    """A model's priority, whether it is enabled, whether it validates (persisted; at least one stays enabled)."""
    return controls.update_llm(house, llm_id, body)
