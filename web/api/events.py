"""/api/events: the loop's live journal as Server-Sent Events (JSON data; `Last-Event-ID` resumes)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Header, Query, Request
from sse_starlette import EventSourceResponse

from web.api.responses import PERSONA, errors
from web.context import WebServices, get_services
from web.schemas import MAX_ID
from web.services import events

router = APIRouter(tags=["events"], responses=PERSONA)


@router.get(
    "/events",
    response_class=EventSourceResponse,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "a stream of loop events"},
        **errors((403, "an Origin that is not this app's"), 422),
    },
)
async def stream_events(
    request: Request,
    kinds: list[str] = Query([], max_length=20),
    since: int | None = Query(None, ge=0, le=MAX_ID, description="replay events after this id"),
    last_event_id: int | None = Header(None, ge=0, le=MAX_ID),
    services: WebServices = Depends(get_services),
) -> EventSourceResponse:
    """Each event: `{id, at, thread_id, tick, kind, node, data}`; kinds: step, tick, tick_failed, message,
    approval, dream, stelis_enter, stelis_leave, task_cycle, …"""
    cursor = last_event_id if last_event_id is not None else since
    if cursor is None:
        cursor = events.newest_id(services.managers)
    stream = events.follow(
        services.managers, cursor, kinds=kinds, is_disconnected=request.is_disconnected, listener=services.listener
    )
    return EventSourceResponse((events.sse_json(e) async for e in stream), ping=15)
