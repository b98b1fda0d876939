"""/api/notes and /api/conversation: talk with the persona."""

from __future__ import annotations

from fastapi import APIRouter, BackgroundTasks, Depends, Path, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from managers import Managers
from managers.audience import OWNER
from memory.note_kinds import Door
from web.api.responses import PERSONA, UPLOAD_ERRORS, errors
from web.context import WebServices, get_services, unit_of_work
from web.schemas import MAX_ID
from web.schemas.requests import VISIBLE
from web.schemas.talk import Conversation, ConversationItem, NoteIn, Threads, VoiceNoteOut
from web.services import talk
from web.uploads import receive_upload

router = APIRouter(tags=["talk"], responses=PERSONA)


@router.get("/conversation", response_model=Conversation, responses=errors((404, "no such person"), 422))
def read_conversation(
    limit: int = Query(50, ge=1, le=500),
    after_id: int | None = Query(None, ge=0, le=MAX_ID),
    person: str | None = Query(
        None,
        min_length=1,
        max_length=210,
        pattern=rf"^([0-9]{{1,12}}|peer:{VISIBLE}.*)$",
        description=(
            "One conversation: a person's id, or `peer:<name>` "
            "(GET /api/conversations lists them); left out: every "
            "one, interleaved."
        ),
    ),
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> Conversation:
    """The humans' notes (and peers') and the persona's messages, oldest first (after `after_id` when given): one
    person's conversation by every door, or all of them. The owner reads every thread."""
    return talk.conversation(
        house,
        services.persona().display_name,
        limit=limit,
        after_id=after_id,
        speech=talk.speech_mode(services),
        person=person,
    )


@router.get("/conversations", response_model=Threads)
def read_conversations(house: Managers = unit_of_work()) -> Threads:
    """Every conversation — one per person across the doors they write by, one per peer —, the most recent first,
    with what waits for the owner (contact requests, approvals, refused messages, unread notes)."""
    return talk.threads(house)


@router.post("/notes", response_model=ConversationItem, status_code=201, responses=errors(403, 422))
def post_note(
    note: NoteIn,
    background: BackgroundTasks,
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> ConversationItem:
    """A note to the persona; its next tick reads it (and a pausing or idle loop wakes; a deployed persona thinks
    at once, on a free worker)."""
    item = talk.post_note(house, note, services.clock(), door=Door.API)
    if services.wake is not None:
        background.add_task(services.wake)  # after the note is committed
    return item


VOICE_UPLOAD = {
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
            "audio/webm": {"schema": {"type": "string", "format": "binary"}},
            "audio/ogg": {"schema": {"type": "string", "format": "binary"}},
            "audio/wav": {"schema": {"type": "string", "format": "binary"}},
        }
    }
}
SPEECH_UNAVAILABLE = (503, "the speech model or espeak-ng is not installed here (make model / make system)")


@router.post(
    "/talk/voice",
    response_model=VoiceNoteOut,
    status_code=201,
    openapi_extra=VOICE_UPLOAD,
    responses=errors(
        *UPLOAD_ERRORS,
        (413, f"over {talk.VOICE_LIMIT_MB} MB"),
        (415, "not audio (WebM, OGG/Opus, WAV, MP3, M4A)"),
        (422, "no file, an unreadable recording, no words heard in it, or a bad language"),
        SPEECH_UNAVAILABLE,
    ),
)
async def post_voice(
    request: Request,
    background: BackgroundTasks,
    language: str | None = Query(
        None, pattern="^(en|ru)$", description=("What is spoken (ISO 639-1); left out: detected.")
    ),
    services: WebServices = Depends(get_services),
) -> VoiceNoteOut:
    """A voice message (a multipart form's `file`, or the raw body with its audio type): transcribed offline, it
    becomes a note from the human whose text is the transcript (tagged `voice` and `audio:<file>`, the recording
    kept in the data dir). Push-to-talk on the Talk page posts here."""
    upload = await receive_upload(
        request, limit=talk.VOICE_LIMIT_MB * 1024 * 1024, types=talk.VOICE_TYPES, suffixes=talk.VOICE_SUFFIXES
    )

    def heard() -> VoiceNoteOut:
        with services.managers.unit(OWNER) as house:
            return talk.post_voice(services, house, upload, language)

    out = await run_in_threadpool(heard)
    if services.wake is not None:
        background.add_task(services.wake)  # after the note is committed
    return out


@router.get(
    "/talk/speech/{note_id}",
    response_class=Response,
    responses={
        200: {"content": {"audio/wav": {}}, "description": "the message spoken (16-bit PCM WAV)"},
        **errors(
            (404, "no message of the persona's with this id"),
            (409, "speech answers are off (speech.answer_in_speech)"),
            422,
            SPEECH_UNAVAILABLE,
        ),
    },
)
def read_speech(
    note_id: int = Path(ge=1, le=MAX_ID),
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> Response:
    """The persona's message `note_id` spoken aloud (espeak-ng), for the Talk page's player or any client."""
    return Response(
        talk.reply_audio(services, house, note_id),
        media_type="audio/wav",
        headers={"Cache-Control": "private, max-age=3600"},
    )
