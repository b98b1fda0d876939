"""Talk: the conversation; a message box whose note appears at once, the persona's replies arrive live."""

from __future__ import annotations

from fastapi import APIRouter, BackgroundTasks, Depends, Form, Request

from memory import Repos
from memory.note_kinds import Door
from web.context import WebServices, get_services, unit_of_work
from web.schemas.talk import NoteIn
from web.services import talk
from web.templating import render

router = APIRouter()


@router.get("/")
def talk_page(request: Request, repos: Repos = unit_of_work(), services: WebServices = Depends(get_services)):
    conversation = talk.conversation(repos, services.persona().display_name, limit=100,
                                     speech=talk.speech_mode(services))
    return render(request, "pages/talk.html", "talk", conversation=conversation)


@router.post("/talk/notes")
def send_note(request: Request, background: BackgroundTasks, text: str = Form(..., max_length=8000),
              repos: Repos = unit_of_work(), services: WebServices = Depends(get_services)):
    item = talk.post_note(repos, NoteIn(text=text), services.clock(), door=Door.WEB)
    if services.wake is not None:
        background.add_task(services.wake)  # after the note is committed
    return render(request, "fragments/conversation_item.html", item=item)
