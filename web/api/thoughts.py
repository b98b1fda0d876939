"""/api/ticks and /api/threads: the persona's thoughts, tick by tick, and its Stelis threads."""

from __future__ import annotations

from fastapi import APIRouter, Path, Query

from managers import Managers
from web.api.responses import PERSONA, errors
from web.context import unit_of_work
from web.schemas import MAX_ID
from web.schemas.thoughts import ThreadTree, TickCard, TickPage
from web.services import thoughts

router = APIRouter(tags=["thoughts"], responses=PERSONA)


@router.get("/ticks", response_model=TickPage, responses=errors(422))
def list_ticks(
    limit: int = Query(20, ge=1, le=200),
    before: int | None = Query(None, ge=1, le=MAX_ID),
    thread: str | None = Query(None, max_length=128),
    house: Managers = unit_of_work(),
) -> TickPage:
    """Tick cards, newest first; `before` (a card's `id`, or the page's `next_before`) pages back in time."""
    return thoughts.tick_page(house, limit=limit, before=before, thread_id=thread)


@router.get("/ticks/{thread}/{tick}", response_model=TickCard, responses=errors((404, "no such tick"), 422))
def read_tick(
    thread: str = Path(max_length=128), tick: int = Path(ge=0, le=MAX_ID), house: Managers = unit_of_work()
) -> TickCard:
    """One tick's card."""
    return thoughts.tick_card(house, thread, tick)


@router.get("/threads", response_model=ThreadTree)
def read_threads(house: Managers = unit_of_work()) -> ThreadTree:
    """The Stelis tree: root threads and the child threads they opened, with their window budgets and chronicles."""
    return thoughts.thread_tree(house)
