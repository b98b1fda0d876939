"""/api/loop: start, pause, stop; ticks; LLM endpoints and their health."""

from __future__ import annotations

from fastapi import APIRouter, BackgroundTasks, Depends

from memory import Repos
from web.context import WebServices, get_services, unit_of_work
from web.schemas.controls import ControlIn, LLMHealth, LoopStatus
from web.services import controls

router = APIRouter(tags=["controls"])


@router.get("/loop", response_model=LoopStatus)
def read_loop(repos: Repos = unit_of_work()):
    return controls.loop_status(repos)


@router.put("/loop", response_model=LoopStatus)
def control_loop(body: ControlIn, background: BackgroundTasks, repos: Repos = unit_of_work(),
                 services: WebServices = Depends(get_services)):
    """`running`, `paused` or `stopped`: the loop obeys before its next tick."""
    if body.want == "running" and services.wake is not None:
        background.add_task(services.wake)  # a deployed persona: started again at once
    return controls.set_control(repos, body.want, services.clock())


@router.get("/llms", response_model=list[LLMHealth])
def read_llms(repos: Repos = unit_of_work()):
    return controls.llm_health(repos)
