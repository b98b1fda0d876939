"""Talk: the conversations — one per person, by every door, and one per peer — with the persona's messages in them
(unprompted ones with the drive behind them); the owner's own note by the page, the API or MCP (the one way in,
managers/conversation.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from managers import Managers
from managers.conversation import Turn, Words
from managers.errors import NotFound, Refused
from managers.speech import AUDIO_TYPES, VOICE_TAG, SpeechManager
from memory.clock import as_utc, utcnow
from memory.note_kinds import Door
from reach.speech import SpeechUnavailable
from web.context import WebServices
from web.errors import ServiceError
from web.schemas.talk import Conversation, ConversationItem, NoteIn, ThreadOut, Threads, VoiceNoteOut
from web.uploads import Upload


def _item(
    turn: Turn, offers: list[tuple[datetime, datetime, dict[str, Any]]], *, speakable: bool = False
) -> ConversationItem:
    human = not turn.mine
    at = as_utc(turn.at)
    offer = None if human else next((o for start, end, o in offers if start <= at <= end), None)
    role = turn.role if turn.role in ("owner", "trusted", "guest", "peer") else None
    return ConversationItem(
        id=turn.note_id,
        who="human" if human else "persona",
        text=turn.text,
        at=at,
        read=turn.read,
        unprompted=offer is not None,
        drive=offer and offer.get("drive"),
        drive_level=offer and offer.get("level"),
        llm_id=turn.llm_id,
        spoken=human and VOICE_TAG in turn.tags,
        speakable=speakable and not human,
        person=turn.thread,
        name=turn.name or None,
        role=role,
        door=turn.door.value if turn.door is not None else None,
    )


def conversation(
    house: Managers,
    persona_name: str,
    *,
    limit: int = 50,
    after_id: int | None = None,
    speech: str = "off",
    person: str | None = None,
) -> Conversation:
    """One thread (`person`: a person's id, or `peer:<name>`) or every one, oldest first. `speech`: the
    answer_in_speech setting; a persona's message is offered as audio when it is `always`, or `when_spoken_to` and the
    human's last note before it was a voice message."""
    talk = house.conversation
    try:
        turns = talk.listing(person, limit=limit, after_id=after_id)
    except NotFound as missing:
        raise ServiceError(str(missing), field="person", status=404) from None
    offers = talk.reach_out_windows() if any(t.mine for t in turns) else []
    spoken_to = talk.spoken_before(turns[0].note_id) if turns and speech == "when_spoken_to" else False
    items = []
    for turn in turns:
        if not turn.mine:
            spoken_to = VOICE_TAG in turn.tags
        items.append(_item(turn, offers, speakable=speech == "always" or (speech == "when_spoken_to" and spoken_to)))
    return Conversation(persona=persona_name, items=items, waiting=talk.unread_count(), person=person)


def threads(house: Managers) -> Threads:
    """Every conversation (a person's by every door, a peer's), the most recent first, and what waits for the
    owner."""
    talk = house.conversation
    listed = [
        ThreadOut(
            person=t.key,
            name=t.name,
            role=t.role if t.role in ("owner", "trusted", "guest") else "peer",
            door=t.door.value if t.door is not None else None,
            last_text=t.last_text[:200],
            last_at=t.last_at,
            unread=t.unread,
            turns=t.turns,
        )
        for t in talk.threads()
    ]
    return Threads(threads=listed, waiting=talk.waiting_for_owner())


def thread_named(house: Managers, person: str) -> ThreadOut:
    """A thread with nothing said in it yet (a person the persona has not talked with): its name and role."""
    try:
        audience = house.conversation.audience_of_thread(person)
    except NotFound as missing:
        raise ServiceError(str(missing), field="person", status=404) from None
    role = audience.role.value if audience.role.value in ("owner", "trusted", "guest", "peer") else "owner"
    return ThreadOut(
        person=person, name=audience.name, role=role, door=None, last_text="", last_at=utcnow(), unread=0, turns=0
    )


def waiting_for_owner(house: Managers) -> dict[str, int]:
    return house.conversation.waiting_for_owner()


def owner_thread(house: Managers) -> str:
    return str(house.people.owner().id)


def post_note(house: Managers, note: NoteIn, now: datetime, door: Door = Door.API) -> ConversationItem:
    """The owner's note by the web page, the API or an MCP client (the owner's own doors), the one way in."""
    try:
        heard = house.conversation.hear(
            Words(note.text, door=door, priority=note.priority, tags=list(note.tags), at=now)
        )
    except Refused as refused:
        raise ServiceError(str(refused), field="text", status=422) from None
    return _owners_item(house, heard.note_id)


def _owners_item(house: Managers, note_id: int) -> ConversationItem:
    """The owner's note just written, as their thread shows it."""
    talk = house.conversation
    turn = next(t for t in talk.listing(owner_thread(house), limit=1, after_id=note_id - 1) if t.note_id == note_id)
    return _item(turn, [])


VOICE_LIMIT_MB = 10  # the route's own cap (413) before the settings' speech.max_audio_mb (422)
VOICE_TYPES = AUDIO_TYPES
VOICE_SUFFIXES = (".webm", ".ogg", ".opus", ".wav", ".mp3", ".m4a")


def _speech(services: WebServices, house: Managers) -> SpeechManager:
    return house.speech


def speech_mode(services: WebServices) -> str:
    return services.settings().speech.answer_in_speech


def post_voice(services: WebServices, house: Managers, upload: Upload, language_hint: str | None) -> VoiceNoteOut:
    """A voice message as a note from the human: transcribed, the audio kept, the transcript the note's text."""
    try:
        note, transcript = _speech(services, house).note_from_speech(
            upload.read(), upload.content_type or "audio/webm", language_hint=language_hint, now=services.clock()
        )
    except SpeechUnavailable as missing:
        raise ServiceError(str(missing), status=503) from None
    except Refused as refused:
        raise ServiceError(str(refused), field="file", status=422) from None
    return VoiceNoteOut(
        note=_owners_item(house, note.id),
        transcript=transcript.text,
        language=transcript.language,
        seconds=transcript.seconds,
    )


def reply_audio(services: WebServices, house: Managers, note_id: int) -> bytes:
    """The persona's message spoken, as a WAV."""
    try:
        return _speech(services, house).reply_audio(note_id)
    except NotFound as missing:
        raise ServiceError(str(missing), status=404) from None
    except SpeechUnavailable as missing:
        raise ServiceError(str(missing), status=503) from None
    except Refused as refused:
        raise ServiceError(str(refused), status=409) from None
