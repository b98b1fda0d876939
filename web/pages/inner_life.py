"""Inner life: the drives as sliders the human may set, the dominant drive's context, the open questions (resolve,
delete), emotions / novelty / tokens over time, and the layers of the last prompt."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Form, Path, Request
from fastapi.responses import HTMLResponse

from managers import Managers
from web.context import WebServices, get_services, unit_of_work
from web.schemas import MAX_ID
from web.schemas.inner_life import DriveLevelIn, ResolutionIn
from web.services import inner_life
from web.templating import render

router = APIRouter()
DRIVES_CHANGED = {"HX-Trigger": "drives-changed"}  # a question resolved or deleted moves curiosity: the panel reloads


@router.get("/inner-life")
def inner_life_page(
    request: Request, house: Managers = unit_of_work(), services: WebServices = Depends(get_services)
) -> HTMLResponse:
    return render(
        request,
        "pages/inner_life.html",
        "inner_life",
        view=inner_life.drives_view(house, services.settings(), services.clock()),
        listing=inner_life.questions(house),
        charts=inner_life.charts(house),
        layers=inner_life.prompt_layers(house),
        metrics=inner_life.goal_metrics(house),
    )


@router.get("/inner-life/drives")
def drive_panel(
    request: Request, house: Managers = unit_of_work(), services: WebServices = Depends(get_services)
) -> HTMLResponse:
    return render(
        request, "fragments/drive_panel.html", view=inner_life.drives_view(house, services.settings(), services.clock())
    )


@router.put("/inner-life/drives/{name}")
def set_drive(
    request: Request,
    name: str,
    level: float = Form(..., ge=0, le=1),
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> HTMLResponse:
    view = inner_life.set_drive(house, services.settings(), name, DriveLevelIn(level=level), services.clock())
    return render(request, "fragments/drive_panel.html", view=view)


@router.post("/inner-life/questions/{question_id}/resolve")
def resolve_question(
    request: Request,
    question_id: int = Path(ge=1, le=MAX_ID),
    resolution: str = Form(..., min_length=1, max_length=1000),
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> HTMLResponse:
    inner_life.resolve_question(house, question_id, ResolutionIn(resolution=resolution), services.clock())
    response = render(request, "fragments/question_table.html", listing=inner_life.questions(house))
    response.headers.update(DRIVES_CHANGED)
    return response


@router.delete("/inner-life/questions/{question_id}")
def delete_question(
    request: Request, question_id: int = Path(ge=1, le=MAX_ID), house: Managers = unit_of_work()
) -> HTMLResponse:
    inner_life.delete_question(house, question_id)
    response = render(request, "fragments/question_table.html", listing=inner_life.questions(house))
    response.headers.update(DRIVES_CHANGED)
    return response


@router.get("/inner-life/charts")
def chart_panel(request: Request, house: Managers = unit_of_work()) -> HTMLResponse:
    return render(request, "fragments/chart_panel.html", charts=inner_life.charts(house))
