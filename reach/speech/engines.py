"""The speech engines one process keeps: the transcriber (its model loads on first use, ~1 s, then stays) and the
synthesizer. Built from plain values so reach/ knows no settings object; the manager builds it from the settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from reach.speech.models import assemble_whisper, is_assembled, whisper_dir
from reach.speech.stt import Transcript, WhisperTranscriber
from reach.speech.tts import EspeakSynthesizer, has_espeak


class SpeechUnavailable(RuntimeError):
    """A part of speech is not installed here (the model not assembled, espeak-ng missing)."""


@dataclass
class SpeechEngines:
    cache_dir: str
    voices: dict[str, str]
    words_per_minute: dict[str, int] = field(default_factory=dict)
    languages: tuple[str, ...] = ("en", "ru")
    threads: int = 2
    beam_size: int = 1
    _transcriber: WhisperTranscriber | None = field(default=None, init=False, repr=False)

    def model_dir(self) -> Path:
        return whisper_dir(self.cache_dir)

    def transcriber(self) -> WhisperTranscriber:
        if self._transcriber is None:
            if not is_assembled(self.cache_dir):
                try:
                    assemble_whisper(self.cache_dir)  # local files only: the two installed packages
                except ImportError as missing:
                    raise SpeechUnavailable(f"the speech model is not installed ({missing}); run make model") from None
            self._transcriber = WhisperTranscriber(
                self.model_dir(), threads=self.threads, beam_size=self.beam_size, languages=self.languages
            )
        return self._transcriber

    def transcribe(self, audio: bytes, language_hint: str | None = None) -> Transcript:
        return self.transcriber().transcribe(audio, language_hint)

    def speak(self, text: str, language: str) -> bytes:
        if not has_espeak():
            raise SpeechUnavailable("espeak-ng is not installed; run make system")
        return EspeakSynthesizer(self.voices, self.words_per_minute).speak(text, language)
