"""/api/notes and /api/conversation: talk with the persona."""

from __future__ import annotations

from fastapi import APIRouter, BackgroundTasks, Depends, Query

from memory import Repos
from web.api.responses import PERSONA, errors
from web.context import WebServices, get_services, unit_of_work
from web.schemas import MAX_ID
from web.schemas.talk import Conversation, ConversationItem, NoteIn
from web.services import talk

router = APIRouter(tags=["talk"], responses=PERSONA)


@router.get("/conversation", response_model=Conversation, responses=errors(422))
def read_conversation(limit: int = Query(50, ge=1, le=500), after_id: int | None = Query(None, ge=0, le=MAX_ID),
                      repos: Repos = unit_of_work(), services: WebServices = Depends(get_services)):
    """The human's notes and the persona's messages, oldest first (after `after_id` when given)."""
    return talk.conversation(repos, services.persona().display_name, limit=limit, after_id=after_id)


@router.post("/notes", response_model=ConversationItem, status_code=201, responses=errors(403, 422))
def post_note(note: NoteIn, background: BackgroundTasks, repos: Repos = unit_of_work(),
              services: WebServices = Depends(get_services)):
    """A note to the persona; its next tick reads it (and a pausing or idle loop wakes; a deployed persona thinks
    at once, on a free worker)."""
    item = talk.post_note(repos, note, services.clock())
    if services.wake is not None:
        background.add_task(services.wake)  # after the note is committed
    return item
