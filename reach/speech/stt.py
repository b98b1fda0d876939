"""Speech-to-text: faster-whisper over the assembled Whisper base model, on the CPU with int8 weights.

Any container PyAV (FFmpeg's libraries, inside the `av` wheel) reads is taken: WAV, OGG/Opus (Telegram voice), WebM/Opus
(a browser's MediaRecorder), MP3, M4A."""

from __future__ import annotations

import io
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Transcript:
    """What was said: the text, the language (ISO 639-1, detected or as hinted), the audio's length in seconds."""

    text: str
    language: str
    seconds: float
    elapsed: float = 0.0  # seconds the transcription took


class WhisperTranscriber:
    def __init__(self, model_dir: Path, *, threads: int = 2, beam_size: int = 1, languages: tuple[str, ...] = ()):
        self.model_dir = model_dir
        self.threads = threads
        self.beam_size = beam_size
        self.languages = languages  # when set, a detected language outside them falls back to the first
        self._model: Any = None

    def _loaded(self) -> Any:
        if self._model is None:
            from faster_whisper import WhisperModel

            self._model = WhisperModel(
                str(self.model_dir), device="cpu", compute_type="int8", cpu_threads=self.threads, local_files_only=True
            )
        return self._model

    def transcribe(self, audio: bytes, language_hint: str | None = None) -> Transcript:
        """What `audio` (any container PyAV reads) says. ValueError: it cannot be decoded."""
        import av
        from faster_whisper.audio import decode_audio

        model = self._loaded()
        started = time.perf_counter()
        try:
            samples = decode_audio(io.BytesIO(audio))
        except (av.FFmpegError, IndexError, StopIteration) as unreadable:  # not audio PyAV knows, or no audio stream
            raise ValueError(f"the audio could not be decoded: {unreadable}") from None
        if len(samples) == 0:
            return Transcript(text="", language=language_hint or "", seconds=0.0, elapsed=0.0)
        language = language_hint
        if language is None and self.languages:
            _, _, ranked = model.detect_language(samples)
            allowed = [code for code, _ in ranked if code in self.languages]
            language = allowed[0] if allowed else self.languages[0]
        segments, info = model.transcribe(
            samples, language=language, beam_size=self.beam_size, condition_on_previous_text=False
        )
        text = " ".join(s.text.strip() for s in segments).strip()
        return Transcript(
            text=text,
            language=info.language,
            seconds=round(float(info.duration), 3),
            elapsed=time.perf_counter() - started,
        )
