"""Talk: the conversation (the human's notes, the persona's messages, unprompted ones with the drive behind them)."""

from __future__ import annotations

from datetime import datetime, timezone

from managers import ManagerDeps, Managers
from managers.conversation import Words
from managers.errors import NotFound, Refused
from managers.speech import AUDIO_TYPES, VOICE_TAG, SpeechManager
from memory import Repos
from memory.note_kinds import HUMAN_SOURCES, Door
from reach.speech import SpeechUnavailable
from web.context import WebServices
from web.errors import ServiceError
from web.schemas.talk import Conversation, ConversationItem, NoteIn, VoiceNoteOut
from web.uploads import Upload


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


def _item(note, offers: list[tuple[datetime, datetime, dict]], *, speakable: bool = False) -> ConversationItem:
    human = note.source in HUMAN_SOURCES
    at = _utc(note.created_at)
    offer = None if human else next((o for start, end, o in offers if start <= at <= end), None)
    return ConversationItem(id=note.id, who="human" if human else "persona", text=note.text, at=at, read=note.read,
                            unprompted=offer is not None, drive=offer and offer.get("drive"),
                            drive_level=offer and offer.get("level"), llm_id=note.llm_id,
                            spoken=human and VOICE_TAG in (note.tags or []), speakable=speakable and not human)


def _offers(repos: Repos) -> list[tuple[datetime, datetime, dict]]:
    """The ticks in which a drive offered the persona to write unprompted (persona/drives.py)."""
    windows = []
    for offer in repos.config.reach_outs[-50:]:
        tick = repos.ticks.get(offer.get("thread") or "main", int(offer.get("tick") or 0))
        if tick is not None:
            end = tick.finished_at or datetime.now(timezone.utc)
            windows.append((_utc(tick.started_at), _utc(end), offer))
    return windows


def conversation(repos: Repos, persona_name: str, *, limit: int = 50, after_id: int | None = None,
                 speech: str = "off") -> Conversation:
    """`speech`: the answer_in_speech setting; a persona's message is offered as audio when it is `always`, or
    `when_spoken_to` and the human's last note before it was a voice message."""
    rows = [n for n in repos.notes.list(limit=limit * 4, after_id=after_id)
            if n.source in HUMAN_SOURCES or (n.source == "llm" and "outgoing" in (n.tags or []))][-limit:]
    offers = _offers(repos) if any(n.source == "llm" for n in rows) else []
    waiting = len(repos.notes.human_after(0, read=False, limit=100))
    items, spoken_to = [], _last_human_spoke(repos, rows[0].id) if rows and speech == "when_spoken_to" else False
    for n in rows:
        if n.source in HUMAN_SOURCES:
            spoken_to = VOICE_TAG in (n.tags or [])
        items.append(_item(n, offers, speakable=speech == "always" or (speech == "when_spoken_to" and spoken_to)))
    return Conversation(persona=persona_name, items=items, waiting=waiting)


def _last_human_spoke(repos: Repos, before_id: int) -> bool:
    """Whether the human's last note before `before_id` was a voice message (for a window that starts mid-talk)."""
    earlier = repos.notes.last_human_before(before_id)
    return earlier is not None and VOICE_TAG in (earlier.tags or [])


def post_note(repos: Repos, note: NoteIn, now: datetime, door: Door = Door.API) -> ConversationItem:
    """The owner's note by the web page, the API or an MCP client (the owner's own doors), the one way in."""
    try:
        heard = Managers(repos).conversation.hear(Words(note.text, door=door, priority=note.priority,
                                                        tags=list(note.tags), at=now))
    except Refused as refused:
        raise ServiceError(str(refused), field="text", status=422) from None
    row = repos.notes.get(heard.note_id)
    return _item(row, [])


VOICE_LIMIT_MB = 10  # the route's own cap (413) before the settings' speech.max_audio_mb (422)
VOICE_TYPES = AUDIO_TYPES
VOICE_SUFFIXES = (".webm", ".ogg", ".opus", ".wav", ".mp3", ".m4a")


def _speech(services: WebServices, repos: Repos) -> SpeechManager:
    return Managers(repos, ManagerDeps(settings=services.settings(), speech=services.speech())).speech


def speech_mode(services: WebServices) -> str:
    return services.settings().speech.answer_in_speech


def post_voice(services: WebServices, repos: Repos, upload: Upload, language_hint: str | None) -> VoiceNoteOut:
    """A voice message as a note from the human: transcribed, the audio kept, the transcript the note's text."""
    try:
        note, transcript = _speech(services, repos).note_from_speech(
            upload.read(), upload.content_type or "audio/webm", language_hint=language_hint, now=services.clock())
    except SpeechUnavailable as missing:
        raise ServiceError(str(missing), status=503) from None
    except Refused as refused:
        raise ServiceError(str(refused), field="file", status=422) from None
    return VoiceNoteOut(note=_item(note, []), transcript=transcript.text, language=transcript.language,
                        seconds=transcript.seconds)


def reply_audio(services: WebServices, repos: Repos, note_id: int) -> bytes:
    """The persona's message spoken, as a WAV."""
    try:
        return _speech(services, repos).reply_audio(note_id)
    except NotFound as missing:
        raise ServiceError(str(missing), status=404) from None
    except SpeechUnavailable as missing:
        raise ServiceError(str(missing), status=503) from None
    except Refused as refused:
        raise ServiceError(str(refused), status=409) from None
