"""Speech: a voice message heard as a note from its human, and the persona's reply spoken (managers/speech.py).

Every door that takes audio calls this manager: the Talk page's push-to-talk (web/api/talk.py) and the channels
(Telegram voice, Matrix audio: `transcribe` an Attachment of kind "audio", `speak`/`speak_ogg` for Outgoing.audio).
The engines (reach/speech/) come from `ManagerDeps.speech` when the door keeps them loaded, else from the settings."""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Sequence
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from managers.errors import NotFound, Refused
from memory.note_kinds import Door
from reach.speech import SpeechEngines, Transcript

if TYPE_CHECKING:
    from managers import Managers
    from memory.models import Note
    from persona.settings import Settings, SpeechSettings

log = logging.getLogger(__name__)

AUDIO_DIR = "audio"
VOICE_TAG = "voice"
AUDIO_TAG = "audio:"  # + the stored file's name: the note's reference to what was said
SUFFIXES = {
    "audio/webm": ".webm",
    "audio/ogg": ".ogg",
    "audio/opus": ".opus",
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/wave": ".wav",
    "audio/mpeg": ".mp3",
    "audio/mp4": ".m4a",
    "audio/x-m4a": ".m4a",
    "video/webm": ".webm",
}
AUDIO_TYPES = tuple(SUFFIXES)
CYRILLIC = re.compile(r"[\u0400-\u04FF]")
LETTER = re.compile(r"[^\W\d_]")


def guess_language(text: str, languages: Sequence[str]) -> str:
    """'ru' when most letters are Cyrillic and Russian is spoken here, else the first language that is not."""
    letters = len(LETTER.findall(text)) or 1
    if "ru" in languages and len(CYRILLIC.findall(text)) / letters > 0.5:
        return "ru"
    return next((code for code in languages if code != "ru"), languages[0])


class SpeechManager:
    def __init__(self, managers: Managers) -> None:
        self.m = managers

    @property
    def settings(self) -> SpeechSettings:
        return self.m.deps.settings.speech

    @cached_property
    def engines(self) -> SpeechEngines:
        return self.m.deps.need_speech() or engines_for(self.m.deps.settings)

    # --- hearing ---

    def transcribe(self, audio_bytes: bytes, mime: str, language_hint: str | None = None) -> Transcript:
        """What the audio says (`mime`: its media type, e.g. audio/ogg; `language_hint`: ISO 639-1 or None to detect).
        Refused: empty, over `speech.max_audio_mb`, not audio. Raises SpeechUnavailable when the model is missing."""
        media = mime.split(";")[0].strip().lower()
        if not audio_bytes:
            raise Refused("the voice message is empty")
        if len(audio_bytes) > self.settings.max_audio_mb * 1024 * 1024:
            raise Refused(f"the voice message is over {self.settings.max_audio_mb} MB")
        if media and media not in SUFFIXES and not media.startswith("audio/"):
            raise Refused(f"{media} is not audio")
        hint = language_hint if language_hint in self.settings.languages else None
        try:
            return self.engines.transcribe(audio_bytes, hint)
        except (ValueError, OSError) as unreadable:  # PyAV: not a container it can decode
            raise Refused(f"the audio could not be read ({type(unreadable).__name__})") from None

    def note_from_speech(
        self,
        audio_bytes: bytes,
        mime: str,
        *,
        language_hint: str | None = None,
        door: Door = Door.VOICE,
        now: datetime | None = None,
    ) -> tuple[Note, Transcript]:
        """A voice message as a note from its human, by the one way in (managers/conversation.py): the transcript is
        the text, the audio is kept under the data dir and named by the note's `audio:<file>` tag. Refused when
        nothing was heard."""
        from managers.conversation import Words

        transcript = self.transcribe(audio_bytes, mime, language_hint)
        if not transcript.text:
            raise Refused("no words were heard in the voice message")
        stored = self.keep_audio(audio_bytes, mime)
        heard = self.m.conversation.hear(
            Words(
                transcript.text,
                door=door,
                priority=1,
                at=now,
                tags=(VOICE_TAG, f"{AUDIO_TAG}{stored.name}", f"lang:{transcript.language}"),
            )
        )
        note = self.m.repos.notes.get(heard.note_id)
        assert note is not None  # written just now, in this unit
        return note, transcript

    def keep_audio(self, audio_bytes: bytes, mime: str) -> Path:
        directory = Path(self.m.deps.settings.data_dir).expanduser() / AUDIO_DIR
        directory.mkdir(parents=True, exist_ok=True)
        suffix = SUFFIXES.get(mime.split(";")[0].strip().lower(), ".audio")
        path = directory / f"{hashlib.sha256(audio_bytes).hexdigest()[:20]}{suffix}"
        if not path.exists():
            path.write_bytes(audio_bytes)
        return path

    def audio_of(self, note: Note) -> Path | None:
        """The stored audio a voice note refers to (None: not a voice note, or the file is gone)."""
        name = next((t[len(AUDIO_TAG) :] for t in (note.tags or []) if t.startswith(AUDIO_TAG)), None)
        if not name or "/" in name or name.startswith("."):
            return None
        path = Path(self.m.deps.settings.data_dir).expanduser() / AUDIO_DIR / name
        return path if path.exists() else None

    # --- speaking ---

    def speak(self, text: str, language: str | None = None) -> bytes:
        """The text spoken as a WAV (bytes); `language` None: guessed from the letters. Longer texts are cut at
        `speech.max_speech_chars`."""
        words = text.strip()[: self.settings.max_speech_chars]
        if not words:
            raise Refused("nothing to say")
        return self.engines.speak(words, language or guess_language(words, self.settings.languages))

    def speak_ogg(self, text: str, language: str | None = None) -> bytes:
        """The text spoken as OGG/Opus (a Telegram voice message); needs ffmpeg (SpeechUnavailable otherwise)."""
        from reach.speech.engines import SpeechUnavailable
        from reach.speech.tts import SynthesisError, has_ffmpeg, wav_to_ogg_opus

        if not has_ffmpeg():
            raise SpeechUnavailable("ffmpeg is not installed: no OGG/Opus")
        try:
            return wav_to_ogg_opus(self.speak(text, language))
        except SynthesisError as failed:
            raise SpeechUnavailable(str(failed)) from None

    def answers_in_speech(self, spoken_to: bool) -> bool:
        """Whether a reply goes out as audio too: `answer_in_speech` is always, or when_spoken_to and it was."""
        mode = self.settings.answer_in_speech
        return mode == "always" or (mode == "when_spoken_to" and spoken_to)

    def reply_for_channel(self, text: str, *, spoken_to: bool) -> bytes | None:
        """A channel reply's spoken form when speech answers are on for it: OGG/Opus (a Telegram or Matrix voice
        message) where ffmpeg is, else WAV; None when it is not to be spoken or cannot be (the text still goes)."""
        from reach.speech.engines import SpeechUnavailable

        if not self.answers_in_speech(spoken_to) or not text.strip():
            return None
        try:
            try:
                return self.speak_ogg(text)
            except SpeechUnavailable:
                return self.speak(text)
        except (SpeechUnavailable, Refused) as unspoken:
            log.info("a channel reply goes as text only: %s", unspoken)
            return None

    def reply_audio(self, note_id: int) -> bytes:
        """The persona's message `note_id` spoken (WAV). NotFound: no such message of the persona's; Refused: speech
        answers are off."""
        note = self.m.repos.notes.get(note_id)
        if note is None or note.source != "llm" or "outgoing" not in (note.tags or []):
            raise NotFound(f"no message of the persona's with id {note_id}")
        if self.settings.answer_in_speech == "off":
            raise Refused("speech answers are off (speech.answer_in_speech)")
        return self.speak(note.text)


def engines_for(settings: Settings) -> SpeechEngines:
    """The speech engines for these settings (the model loads on first use): a door keeps one and passes it as
    `ManagerDeps.speech`."""
    speech = settings.speech
    return SpeechEngines(
        cache_dir=settings.cache_dir,
        voices=dict(speech.tts_voices),
        words_per_minute=dict(speech.tts_words_per_minute),
        languages=tuple(speech.languages),
        beam_size=speech.beam_size,
    )
