"""/api/sessions: every run of a loop; export one (JSON, Markdown), revive one, or revive an uploaded export."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from managers import Managers
from web.api.responses import PERSONA, UPLOAD_ERRORS, errors
from web.context import WebServices, get_services, unit_of_work
from web.schemas import MAX_ID
from web.schemas.sessions import Revived, SessionDetail, SessionList
from web.services import sessions
from web.uploads import receive_upload

router = APIRouter(tags=["sessions"], responses=PERSONA)


@router.get("/sessions", response_model=SessionList, responses=errors(422))
def list_sessions(limit: int = Query(50, ge=1, le=500), house: Managers = unit_of_work()) -> SessionList:
    return sessions.listing(house, limit)


@router.get("/sessions/{session_id:int}", response_model=SessionDetail, responses=errors((404, "no such session"), 422))
def read_session(session_id: int = Path(ge=1, le=MAX_ID), house: Managers = unit_of_work()) -> SessionDetail:
    return sessions.detail(house, session_id)


@router.get(
    "/sessions/{session_id:int}/export",
    response_class=Response,
    responses={
        200: {"content": {"application/json": {}, "text/markdown": {}, "text/csv": {}, "application/x-ndjson": {}}},
        **errors((404, "no such session"), 422),
    },
)
def export_session(
    session_id: int = Path(ge=1, le=MAX_ID),
    format: Literal["json", "md", "csv", "jsonl"] = Query("json"),
    house: Managers = unit_of_work(),
) -> Response:
    """A download: session-ID.json (everything), session-ID.md (the transcript), or the thought log — one record per
    thought, message, note and diary entry (`debug:*` ones marked) — as session-ID.csv or session-ID.jsonl."""
    body, filename, media = sessions.export(house, session_id, format)
    return Response(body, media_type=media, headers={"Content-Disposition": f'attachment; filename="{filename}"'})


@router.post(
    "/sessions/{session_id:int}/revive",
    response_model=Revived,
    status_code=201,
    responses=errors(403, (404, "no such session"), (409, "the session still runs"), 422),
)
def revive_session(
    session_id: int = Path(ge=1, le=MAX_ID),
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> Revived:
    """A new thread seeded with the session's last thoughts; run the loop on it with the command returned."""
    return sessions.revive(house, session_id, services.clock())


@router.post(
    "/sessions/revive",
    response_model=Revived,
    status_code=201,
    openapi_extra={
        "requestBody": {
            "content": {
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "properties": {"file": {"type": "string", "format": "binary"}},
                        "required": ["file"],
                        "additionalProperties": False,
                    }
                },
                "application/json": {"schema": {"type": "object", "description": "a session-ID.json export"}},
            }
        }
    },
    responses=errors(*UPLOAD_ERRORS, (413, "over the export limit"), (415, "not JSON"), (422, "not a session export")),
)
async def revive_export(request: Request, services: WebServices = Depends(get_services)) -> Revived:
    """Revive a session exported elsewhere (its session-ID.json): uploaded as `file` (multipart), or the JSON body."""
    upload = await receive_upload(
        request, limit=sessions.EXPORT_LIMIT, types=sessions.EXPORT_TYPES, suffixes=(".json",)
    )
    return await run_in_threadpool(sessions.revive_upload, services.managers, upload.read(), services.clock())
