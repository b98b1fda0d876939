"""Controls: start, pause, stop the loop; its ticks; the LLM endpoints and their health."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, BackgroundTasks, Depends, Form, Request

from memory import Repos
from web.context import WebServices, get_services, unit_of_work
from web.services import controls
from web.templating import render

router = APIRouter()


@router.get("/controls")
def controls_page(request: Request, repos: Repos = unit_of_work()):
    return render(request, "pages/controls.html", "controls", status=controls.loop_status(repos))


@router.post("/controls/loop")
def control_loop(request: Request, background: BackgroundTasks, want: Literal["running", "paused", "stopped"] = Form(...),
                 repos: Repos = unit_of_work(), services: WebServices = Depends(get_services)):
    status = controls.set_control(repos, want, services.clock())
    if want == "running" and services.wake is not None:
        background.add_task(services.wake)  # a deployed persona: started again at once
    return render(request, "fragments/loop_status.html", status=status)


@router.get("/controls/status")
def loop_status(request: Request, repos: Repos = unit_of_work()):
    return render(request, "fragments/loop_status.html", status=controls.loop_status(repos))
