"""Controls: start, pause, stop the loop; its ticks; the LLM endpoints, their health, and which models think."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, BackgroundTasks, Depends, Form, Request

from memory import Repos
from web.context import WebServices, get_services, unit_of_work
from web.schemas.controls import LLMUpdateIn
from web.services import controls, people
from web.templating import render

router = APIRouter()


def _channels(repos: Repos, services: WebServices) -> list:
    return people.channel_states(repos, [e.name for e in services.settings().channels.entries])


@router.get("/controls")
def controls_page(request: Request, repos: Repos = unit_of_work(), services: WebServices = Depends(get_services)):
    status = controls.loop_status(repos)
    return render(request, "pages/controls.html", "controls", status=status, llms=status.llms,
                  channels=_channels(repos, services))


@router.get("/controls/channels")
def channel_states(request: Request, repos: Repos = unit_of_work(), services: WebServices = Depends(get_services)):
    return render(request, "fragments/channel_states.html", channels=_channels(repos, services))


@router.post("/controls/loop")
def control_loop(request: Request, background: BackgroundTasks, want: Literal["running", "paused", "stopped"] = Form(...),
                 repos: Repos = unit_of_work(), services: WebServices = Depends(get_services)):
    status = controls.set_control(repos, want, services.clock())
    if want == "running" and services.wake is not None:
        background.add_task(services.wake)  # a deployed persona: started again at once
    return render(request, "fragments/loop_status.html", status=status)


@router.post("/controls/llms/selected")
def select_llm(request: Request, llm_id: str = Form("", max_length=200), repos: Repos = unit_of_work()):
    llms = controls.select_llm(repos, llm_id or None)
    return render(request, "fragments/llm_models.html", llms=llms)


@router.post("/controls/llms/{llm_id}")
def update_llm(request: Request, llm_id: str, priority: int = Form(..., ge=-1000, le=1000),
               enabled: bool = Form(False), is_validator: bool = Form(False), repos: Repos = unit_of_work()):
    llms = controls.update_llm(repos, llm_id, LLMUpdateIn(priority=priority, enabled=enabled, is_validator=is_validator))
    return render(request, "fragments/llm_models.html", llms=llms)


@router.get("/controls/status")
def loop_status(request: Request, repos: Repos = unit_of_work()):
    return render(request, "fragments/loop_status.html", status=controls.loop_status(repos))
