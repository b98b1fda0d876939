"""Speech with fake engines: a voice message becomes a note from the human (transcript as text, the audio kept and
referred to), the persona's reply is spoken as a WAV when speech answers are on, and the routes document what they
refuse. The real engines (Whisper base, espeak-ng) are tested in tests/integration/test_speech_real.py."""

from __future__ import annotations

import io
import struct
import wave
from pathlib import Path

import pytest

from managers import ManagerDeps, Managers
from managers.errors import NotFound, Refused
from managers.speech import guess_language
from persona.settings import Settings
from reach.speech import SpeechUnavailable, Transcript
from reach.speech.tts import _fix_wav_sizes, wav_seconds
from reach.speech.wer import word_error_rate, words


@pytest.fixture
def db(tmp_path):
    from memory import Database

    database = Database.open(tmp_path / "db")
    yield database
    database.close()


def tone_wav(seconds: float = 0.5, rate: int = 16000) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes(b"\x00\x01" * int(seconds * rate))
    return out.getvalue()


class FakeEngines:
    def __init__(self, heard: str = "hello there", language: str = "en") -> None:
        self.heard, self.language = heard, language
        self.spoken: list[tuple[str, str]] = []
        self.hints: list[str | None] = []

    def transcribe(self, audio: bytes, language_hint: str | None = None) -> Transcript:
        self.hints.append(language_hint)
        return Transcript(self.heard, language_hint or self.language, wav_seconds(audio))

    def speak(self, text: str, language: str) -> bytes:
        self.spoken.append((text, language))
        return tone_wav(0.25)


def managers_for(repos, tmp_path: Path, engines: FakeEngines, **speech) -> Managers:
    settings = Settings(data_dir=str(tmp_path), speech=speech)
    return Managers(repos, ManagerDeps(settings=settings, speech=engines))  # type: ignore[arg-type]


def test_a_voice_message_becomes_a_note_from_the_human_with_its_audio_kept(db, tmp_path):
    engines = FakeEngines("Remind me to water the plants", "en")
    audio = tone_wav()
    with db.unit() as repos:
        note, transcript = managers_for(repos, tmp_path, engines).speech.note_from_speech(audio, "audio/wav")
        stored = managers_for(repos, tmp_path, engines).speech.audio_of(note)
    assert note.text == "Remind me to water the plants" and note.source == "user"
    assert "voice" in note.tags and "lang:en" in note.tags and transcript.seconds == pytest.approx(0.5)
    assert stored is not None and stored.read_bytes() == audio and stored.suffix == ".wav"
    assert stored.parent == tmp_path / "audio"


def test_a_voice_message_with_no_words_too_large_or_not_audio_is_refused_and_nothing_stored(db, tmp_path):
    with db.unit() as repos:
        speech = managers_for(repos, tmp_path, FakeEngines(heard=""), max_audio_mb=1).speech
        with pytest.raises(Refused, match="no words"):
            speech.note_from_speech(tone_wav(), "audio/wav")
        with pytest.raises(Refused, match="over 1 MB"):
            speech.transcribe(b"\0" * (1024 * 1024 + 1), "audio/ogg")
        with pytest.raises(Refused, match="not audio"):
            speech.transcribe(b"%PDF", "application/pdf")
        with pytest.raises(Refused, match="empty"):
            speech.transcribe(b"", "audio/ogg")
        assert repos.notes.list() == []
    assert not (tmp_path / "audio").exists()


def test_a_language_hint_outside_the_spoken_languages_is_dropped_for_detection(db, tmp_path):
    engines = FakeEngines()
    with db.unit() as repos:
        speech = managers_for(repos, tmp_path, engines).speech
        speech.transcribe(tone_wav(), "audio/wav", "ru")
        speech.transcribe(tone_wav(), "audio/wav", "fr")
    assert engines.hints == ["ru", None]


def test_speak_guesses_the_language_from_the_letters_and_cuts_long_texts(db, tmp_path):
    engines = FakeEngines()
    with db.unit() as repos:
        speech = managers_for(repos, tmp_path, engines, max_speech_chars=50).speech
        wav = speech.speak("Привет, как дела?")
        speech.speak("Hello, how are you? " * 10)
        speech.speak("Say it in Russian", "ru")
        with pytest.raises(Refused):
            speech.speak("   ")
    assert wav.startswith(b"RIFF") and wav_seconds(wav) > 0
    assert [lang for _, lang in engines.spoken] == ["ru", "en", "ru"] and len(engines.spoken[1][0]) == 50
    assert guess_language("Hello Мир", ["en", "ru"]) == "en" and guess_language("Привет", ["en"]) == "en"


@pytest.mark.parametrize(
    ("mode", "spoken_to", "expected"),
    [("off", True, False), ("when_spoken_to", True, True), ("when_spoken_to", False, False), ("always", False, True)],
)
def test_answers_in_speech_follows_the_setting(db, tmp_path, mode, spoken_to, expected):
    with db.unit() as repos:
        assert (
            managers_for(repos, tmp_path, FakeEngines(), answer_in_speech=mode).speech.answers_in_speech(spoken_to)
            is expected
        )


def test_reply_audio_speaks_only_the_personas_messages_and_only_when_speech_answers_are_on(db, tmp_path):
    engines = FakeEngines()
    with db.unit() as repos:
        human = repos.notes.add("hi", source="user")
        reply = repos.notes.add("Hello, I am Lumen.", source="llm", tags=["outgoing"])
        speech = managers_for(repos, tmp_path, engines).speech
        assert speech.reply_audio(reply.id).startswith(b"RIFF")
        with pytest.raises(NotFound):
            speech.reply_audio(human.id)
        with pytest.raises(Refused, match="off"):
            managers_for(repos, tmp_path, engines, answer_in_speech="off").speech.reply_audio(reply.id)
    assert engines.spoken == [("Hello, I am Lumen.", "en")]


def test_word_error_rate_counts_word_edits_over_reference_words():
    assert words("Hello, World! Ёлка-палка") == ["hello", "world", "елка", "палка"]
    assert word_error_rate(["the cat sat on the mat"], ["The cat sat on a mat."]) == pytest.approx(1 / 6)
    assert word_error_rate(["a b", "c d"], ["a b", "c d e"]) == pytest.approx(1 / 4)


def test_a_wav_from_a_pipe_gets_its_sizes_so_players_read_it():
    wav = bytearray(tone_wav(0.5))
    struct.pack_into("<I", wav, 4, 0x7FFFFFFF)
    struct.pack_into("<I", wav, wav.find(b"data") + 4, 0x7FFFFFFF)
    assert wav_seconds(_fix_wav_sizes(bytes(wav))) == pytest.approx(0.5)


def test_the_models_dir_is_assembled_once_from_the_two_halves(tmp_path, monkeypatch):
    from reach.speech import models

    for part, half in (("1", b"first-"), ("2", b"second")):
        data = tmp_path / f"pkg{part}" / "data"
        data.mkdir(parents=True)
        (data / f"model.bin.part{part}").write_bytes(half)
        if part == "1":
            for name in models.SIDE_FILES:
                (data / name).write_text(name)
    monkeypatch.setattr(models, "_package_data", lambda name: tmp_path / f"pkg{name[-1]}" / "data")
    target = models.assemble_whisper(tmp_path / "cache")
    assert (target / "model.bin").read_bytes() == b"first-second" and models.is_assembled(tmp_path / "cache")
    assert (target / "tokenizer.json").read_text() == "tokenizer.json"


# ---- the routes ----------------------------------------------------------------------------------------------------


def test_push_to_talk_posts_a_voice_message_that_becomes_a_note_and_the_reply_plays(web, monkeypatch):
    engines = FakeEngines("What is the weather like?", "en")
    monkeypatch.setattr(web.services, "speech", lambda: engines)
    answer = web.client.post("/api/talk/voice?language=en", content=tone_wav(), headers={"Content-Type": "audio/wav"})
    assert answer.status_code == 201, answer.json()
    body = answer.json()
    assert body["transcript"] == "What is the weather like?" and body["language"] == "en"
    assert body["note"]["who"] == "human" and body["note"]["spoken"] is True
    with web.agent.services.db.unit() as repos:
        note = repos.notes.get(body["note"]["id"])
        reply = repos.notes.add("It is sunny.", source="llm", tags=["outgoing"])
    assert note is not None and note.text == "What is the weather like?" and "voice" in note.tags
    items = web.client.get("/api/conversation").json()["items"]
    assert items[-1]["id"] == reply.id and items[-1]["speakable"] is True  # answered in speech: it was spoken to
    spoken = web.client.get(f"/api/talk/speech/{reply.id}")
    assert spoken.status_code == 200 and spoken.headers["content-type"] == "audio/wav"
    assert wav_seconds(spoken.content) > 0 and engines.spoken == [("It is sunny.", "en")]
    page = web.client.get("/").text
    assert 'id="push-to-talk"' in page and f'src="/api/talk/speech/{reply.id}"' in page


def test_push_to_talk_refusals_name_the_file_and_store_nothing(web, monkeypatch):
    monkeypatch.setattr(web.services, "speech", lambda: FakeEngines(heard=""))
    silent = web.client.post("/api/talk/voice", content=tone_wav(), headers={"Content-Type": "audio/wav"})
    assert silent.status_code == 422 and silent.json()["field"] == "file"
    wrong = web.client.post("/api/talk/voice", content=b"hello", headers={"Content-Type": "text/plain"})
    assert wrong.status_code == 415
    with web.agent.services.db.unit() as repos:
        assert repos.notes.list(source="incoming") == []
        human = repos.notes.add("hi", source="user")
    assert web.client.get(f"/api/talk/speech/{human.id}").status_code == 404


def test_a_missing_speech_model_answers_503(web, monkeypatch):
    class Missing(FakeEngines):
        def transcribe(self, audio: bytes, language_hint: str | None = None) -> Transcript:
            raise SpeechUnavailable("the speech model is not installed; run make model")

    monkeypatch.setattr(web.services, "speech", lambda: Missing())
    answer = web.client.post("/api/talk/voice", content=tone_wav(), headers={"Content-Type": "audio/wav"})
    assert answer.status_code == 503 and "make model" in answer.json()["error"]


def test_speech_answers_off_leave_replies_unspeakable(web, monkeypatch):
    engines = FakeEngines()
    monkeypatch.setattr(web.services, "speech", lambda: engines)
    with web.agent.services.db.unit() as repos:
        repos.notes.add("hi", source="user", tags=["voice"])
        reply = repos.notes.add("Hello.", source="llm", tags=["outgoing"])
        repos.notes.add("typed", source="user")
        later = repos.notes.add("Typed answer.", source="llm", tags=["outgoing"])
    items = {i["id"]: i for i in web.client.get("/api/conversation").json()["items"]}
    assert items[reply.id]["speakable"] is True and items[later.id]["speakable"] is False  # when_spoken_to


def test_speak_ogg_without_ffmpeg_says_so_and_the_wav_is_still_there(db, tmp_path, monkeypatch):
    from reach.speech import tts

    monkeypatch.setattr(tts, "has_ffmpeg", lambda: False)
    with db.unit() as repos:
        speech = managers_for(repos, tmp_path, FakeEngines()).speech
        with pytest.raises(SpeechUnavailable, match="ffmpeg"):
            speech.speak_ogg("Hello")
        assert speech.speak("Hello").startswith(b"RIFF")
