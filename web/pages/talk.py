"""Talk: the conversations — the owner's own, with a message box whose note appears at once, and every other
person's and peer's, which the owner reads; the persona's replies and anyone's new words arrive live."""

from __future__ import annotations

from fastapi import APIRouter, BackgroundTasks, Depends, Form, Query, Request
from fastapi.responses import HTMLResponse

from managers import Managers
from memory.note_kinds import Door
from web.context import WebServices, get_services, unit_of_work
from web.schemas.talk import NoteIn
from web.services import talk
from web.templating import render

router = APIRouter()


@router.get("/")
def talk_page(
    request: Request,
    person: str | None = Query(
        None,
        max_length=210,
        description=("The thread to open: a person's id, or `peer:<name>` (default: the owner's own)."),
    ),
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> HTMLResponse:
    owner = talk.owner_thread(house)
    listed = talk.threads(house)
    chosen = person or owner
    conversation = talk.conversation(
        house, services.persona().display_name, limit=100, person=chosen, speech=talk.speech_mode(services)
    )
    current = next((t for t in listed.threads if t.person == chosen), None)
    return render(
        request,
        "pages/talk.html",
        "talk",
        conversation=conversation,
        threads=listed.threads,
        person=chosen,
        own=chosen == owner,
        current=current or talk.thread_named(house, chosen),
    )


@router.post("/talk/notes")
def send_note(
    request: Request,
    background: BackgroundTasks,
    text: str = Form(..., max_length=8000),
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> HTMLResponse:
    item = talk.post_note(house, NoteIn(text=text), services.clock(), door=Door.WEB)
    if services.wake is not None:
        background.add_task(services.wake)  # after the note is committed
    return render(request, "fragments/conversation_item.html", item=item)
