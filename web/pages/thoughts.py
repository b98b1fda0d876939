"""Thoughts: the ticks as cards, newest first (new ones arrive live over /live/thoughts), older ones on demand, and
the tree of Stelis threads."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from managers import Managers
from web.context import unit_of_work
from web.schemas import MAX_ID
from web.services import thoughts
from web.templating import render

router = APIRouter()


@router.get("/thoughts")
def thoughts_page(request: Request, house: Managers = unit_of_work()) -> HTMLResponse:
    return render(
        request,
        "pages/thoughts.html",
        "thoughts",
        feed=thoughts.tick_page(house, limit=20),
        tree=thoughts.thread_tree(house),
    )


@router.get("/thoughts/ticks")
def older_ticks(
    request: Request, before: int = Query(..., ge=1, le=MAX_ID), house: Managers = unit_of_work()
) -> HTMLResponse:
    return render(request, "fragments/tick_page.html", feed=thoughts.tick_page(house, limit=20, before=before))
