"""/api/drives, /api/questions, /api/charts, /api/prompt-layers: the persona's inner life, and the human's hand on
its drives and open questions."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path, Query, Response

from managers import Managers
from persona.drives import DRIVES
from web.api.responses import PERSONA, errors
from web.context import WebServices, get_services, unit_of_work
from web.schemas import MAX_ID
from web.schemas.inner_life import (
    Charts,
    DriveLevelIn,
    DrivesView,
    PromptLayers,
    QuestionList,
    QuestionView,
    ResolutionIn,
)
from web.services import inner_life

router = APIRouter(tags=["inner life"], responses=PERSONA)


@router.get("/drives", response_model=DrivesView)
def read_drives(house: Managers = unit_of_work(), services: WebServices = Depends(get_services)) -> DrivesView:
    """The four drives now (with any level the human set, fading back), the dominant one's context, the changes."""
    return inner_life.drives_view(house, services.settings(), services.clock())


@router.put("/drives/{name}", response_model=DrivesView, responses=errors(403, (404, "no such drive"), 422))
def set_drive(
    change: DriveLevelIn,
    name: str = Path(json_schema_extra={"enum": list(DRIVES)}),
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> DrivesView:
    """Set a drive's level (0 … 1): recorded, in force from the next tick's prompt, fading back with
    `drives.adjustment_half_life_hours`."""
    return inner_life.set_drive(house, services.settings(), name, change, services.clock())


@router.get("/questions", response_model=QuestionList, responses=errors(422))
def list_questions(limit: int = Query(200, ge=1, le=1000), house: Managers = unit_of_work()) -> QuestionList:
    """The open questions (curiosity's source), then the resolved ones still kept."""
    return inner_life.questions(house, limit)


@router.post(
    "/questions/{question_id}/resolve",
    response_model=QuestionView,
    responses=errors(403, (404, "no such question"), (409, "resolved already"), 422),
)
def resolve_question(
    answer: ResolutionIn,
    question_id: int = Path(ge=1, le=MAX_ID),
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> QuestionView:
    """Mark an open question resolved, with its answer."""
    return inner_life.resolve_question(house, question_id, answer, services.clock())


@router.delete(
    "/questions/{question_id}",
    status_code=204,
    response_class=Response,
    responses=errors(403, (404, "no such question"), 422),
)
def delete_question(question_id: int = Path(ge=1, le=MAX_ID), house: Managers = unit_of_work()) -> Response:
    """Delete a question for good."""
    inner_life.delete_question(house, question_id)
    return Response(status_code=204)


@router.get("/charts", response_model=Charts, responses=errors(422))
def read_charts(limit: int = Query(200, ge=1, le=2000), house: Managers = unit_of_work()) -> Charts:
    """Series for the plots: emotions (valence), novelty, tokens per tick — uPlot's shape (x in Unix seconds)."""
    return inner_life.charts(house, limit)


@router.get("/prompt-layers", response_model=PromptLayers)
def read_prompt_layers(house: Managers = unit_of_work()) -> PromptLayers:
    """The last prompt's layers with their tokens against the budget, and what the budget dropped."""
    return inner_life.prompt_layers(house)
