"""Sessions: every run of a loop; export one (JSON, Markdown), revive one in a new thread, or revive a session
exported elsewhere (upload its JSON)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse

from managers import Managers
from web.context import WebServices, get_services, unit_of_work
from web.schemas import MAX_ID
from web.services import sessions
from web.templating import render
from web.uploads import receive_upload

router = APIRouter()


@router.get("/sessions")
def sessions_page(request: Request, house: Managers = unit_of_work()) -> HTMLResponse:
    return render(request, "pages/sessions.html", "sessions", sessions=sessions.listing(house, 100).items)


@router.get("/sessions/{session_id}")
def session_detail(
    request: Request, session_id: int = Path(ge=1, le=MAX_ID), house: Managers = unit_of_work()
) -> HTMLResponse:
    return render(request, "fragments/session_detail.html", session=sessions.detail(house, session_id))


@router.post("/sessions/{session_id}/revive")
def revive(
    request: Request,
    session_id: int = Path(ge=1, le=MAX_ID),
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> HTMLResponse:
    return render(
        request, "fragments/session_revived.html", revived=sessions.revive(house, session_id, services.clock())
    )


@router.post("/sessions/revive")
async def revive_upload(request: Request, services: WebServices = Depends(get_services)) -> HTMLResponse:
    upload = await receive_upload(
        request, limit=sessions.EXPORT_LIMIT, types=sessions.EXPORT_TYPES, suffixes=(".json",)
    )
    revived = await run_in_threadpool(sessions.revive_upload, services.managers, upload.read(), services.clock())
    return render(request, "fragments/session_revived.html", revived=revived)
