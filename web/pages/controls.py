"""Controls: start, pause, stop the loop; its ticks; the LLM endpoints, their health, and which models think."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, BackgroundTasks, Depends, Form, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError

from managers import Managers
from web.context import WebServices, get_services, unit_of_work
from web.errors import ServiceError
from web.schemas.controls import LLMAddIn, LLMUpdateIn
from web.schemas.people import ChannelState
from web.services import controls, people
from web.templating import render

router = APIRouter()


def _channels(house: Managers, services: WebServices) -> list[ChannelState]:
    return people.channel_states(house, [e.name for e in services.settings().channels.entries])


@router.get("/controls")
def controls_page(
    request: Request, house: Managers = unit_of_work(), services: WebServices = Depends(get_services)
) -> HTMLResponse:
    status = controls.loop_status(house)
    dreaming = services.settings().dreaming
    return render(
        request,
        "pages/controls.html",
        "controls",
        status=status,
        llms=status.llms,
        dreaming=dreaming,
        channels=_channels(house, services),
        spend=controls.spend(house, services.clock()),
    )


@router.get("/controls/spend")
def spend(
    request: Request, house: Managers = unit_of_work(), services: WebServices = Depends(get_services)
) -> HTMLResponse:
    return render(request, "fragments/spend.html", spend=controls.spend(house, services.clock()))


@router.get("/controls/channels")
def channel_states(
    request: Request, house: Managers = unit_of_work(), services: WebServices = Depends(get_services)
) -> HTMLResponse:
    return render(request, "fragments/channel_states.html", channels=_channels(house, services))


@router.post("/controls/wake")
def wake_up(
    request: Request, house: Managers = unit_of_work(), services: WebServices = Depends(get_services)
) -> HTMLResponse:
    return render(request, "fragments/loop_status.html", status=controls.wake_up(house, services.clock()))


@router.post("/controls/loop")
def control_loop(
    request: Request,
    background: BackgroundTasks,
    want: Literal["running", "paused", "stopped"] = Form(...),
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> HTMLResponse:
    status = controls.set_control(house, want, services.clock())
    if want == "running" and services.wake is not None:
        background.add_task(services.wake)  # a deployed persona: started again at once
    return render(request, "fragments/loop_status.html", status=status)


@router.get("/controls/llms/local")
def local_servers(request: Request, house: Managers = unit_of_work()) -> HTMLResponse:
    """The servers found on loopback, offered with their models (loaded after the page: the probes take a moment)."""
    return render(request, "fragments/llm_local.html", servers=controls.local_servers(house))


@router.post("/controls/llms")
def add_llm(
    request: Request,
    base_url: str = Form(..., max_length=500),
    model: str = Form(..., max_length=200),
    name: str = Form("", max_length=100),
    api_key: str = Form("", max_length=500),
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> HTMLResponse:
    """Controls → "Add a model": checked, then saved; the table of models comes back with it."""
    try:
        body = LLMAddIn(
            base_url=base_url.strip(), model=model.strip(), name=name.strip() or None, api_key=api_key.strip() or None
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ServiceError(str(first.get("msg")), field=".".join(map(str, first.get("loc", ()))), status=422) from None
    added = controls.add_llm(house, services.settings(), body)
    return render(request, "fragments/llm_models.html", llms=controls.llm_health(house), added=added)


@router.post("/controls/llms/{llm_id}/remove")
def remove_llm(request: Request, llm_id: str, house: Managers = unit_of_work()) -> HTMLResponse:
    return render(request, "fragments/llm_models.html", llms=controls.remove_llm(house, llm_id))


@router.post("/controls/llms/selected")
def select_llm(
    request: Request, llm_id: str = Form("", max_length=200), house: Managers = unit_of_work()
) -> HTMLResponse:
    llms = controls.select_llm(house, llm_id or None)
    return render(request, "fragments/llm_models.html", llms=llms)


@router.post("/controls/llms/{llm_id}")
def update_llm(
    request: Request,
    llm_id: str,
    priority: int = Form(..., ge=-1000, le=1000),
    enabled: bool = Form(False),
    is_validator: bool = Form(False),
    house: Managers = unit_of_work(),
) -> HTMLResponse:
    llms = controls.update_llm(
        house, llm_id, LLMUpdateIn(priority=priority, enabled=enabled, is_validator=is_validator)
    )
    return render(request, "fragments/llm_models.html", llms=llms)


@router.get("/controls/status")
def loop_status(request: Request, house: Managers = unit_of_work()) -> HTMLResponse:
    return render(request, "fragments/loop_status.html", status=controls.loop_status(house))
