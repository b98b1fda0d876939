"""Live fragments over Server-Sent Events: the loop's journal rendered as the pages' HTML (htmx's sse extension
swaps them in). Each page names the event kinds it wants; the rendering is the page's own fragment template."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from markupsafe import escape
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


STEP_LABELS = {"update_process_log": "opens a tick", "update_drives": "feels its drives", "prepare_context": "gathers its memories",
               "call_llm": "thinks", "extract_commands": "reads its own commands", "execute_commands": "acts",
               "reply_to_human": "writes to you"}


def talk_status(event: dict) -> str | None:
    """One line under the conversation while a tick runs: which step the persona is in."""
    if event["kind"] == "tick":
        return f"tick {event.get('tick')} done"
    label = STEP_LABELS.get(event.get("node") or "")
    return f"tick {event.get('tick')} · {label}…" if label else None


@router.get("/live/talk")
async def live_talk(request: Request, services: WebServices = Depends(get_services)):
    cursor = events.newest_id(services.db)

    async def fragments():
        async for event in events.follow(services.db, cursor, kinds=["message", "step", "tick", "keepalive"],
                                         is_disconnected=request.is_disconnected):
            if event["kind"] == "message":
                html = _talk_fragment(request, services, event)
                if html:
                    yield {"event": "message", "id": str(event["id"]), "data": html.replace("\n", " ")}
            elif event["kind"] in ("step", "tick"):
                line = talk_status(event)
                if line:
                    yield {"event": "status", "id": str(event["id"]), "data": str(escape(line))}

    return EventSourceResponse(fragments(), ping=15)
