"""Live fragments over Server-Sent Events: the loop's journal rendered as the pages' HTML (htmx's sse extension
swaps them in). Each page names the event kinds it wants; the rendering is the page's own fragment template."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from sse_starlette import EventSourceResponse

from web.context import WebServices, get_services
from web.services import events, talk

router = APIRouter()


def _talk_fragment(request: Request, services: WebServices, event: dict) -> str | None:
    note_id = (event.get("data") or {}).get("note_id")
    if not note_id:
        return None
    with services.db.unit() as repos:
        items = [i for i in talk.conversation(repos, "", limit=5, after_id=int(note_id) - 1).items if i.id == note_id]
    if not items:
        return None
    return request.app.state.templates.get_template("fragments/conversation_item.html").render(item=items[0])


@router.get("/live/talk")
async def live_talk(request: Request, services: WebServices = Depends(get_services)):
    cursor = events.newest_id(services.db)

    async def fragments():
        async for event in events.follow(services.db, cursor, kinds=["message", "keepalive"],
                                         is_disconnected=request.is_disconnected):
            if event["kind"] == "keepalive":
                continue
            html = _talk_fragment(request, services, event)
            if html:
                yield {"event": "message", "id": str(event["id"]), "data": html.replace("\n", " ")}

    return EventSourceResponse(fragments(), ping=15)
