"""Text-to-speech with espeak-ng (Debian `espeak-ng`: formant synthesis, ~100 languages, English and Russian included,
no model files). WAV out; OGG/Opus (what Telegram plays as a voice message) through ffmpeg when it is installed."""

from __future__ import annotations

import shutil
import struct
import subprocess

ESPEAK = "espeak-ng"
TIMEOUT = 60


class SynthesisError(RuntimeError):
    pass


def has_espeak() -> bool:
    return shutil.which(ESPEAK) is not None


class EspeakSynthesizer:
    def __init__(self, voices: dict[str, str], words_per_minute: dict[str, int] | None = None):
        self.voices = voices  # language → espeak-ng voice name
        self.words_per_minute = words_per_minute or {}  # language → speed (espeak-ng's default: 175)

    def speak(self, text: str, language: str) -> bytes:
        """The text spoken as a WAV (16-bit mono, 22 050 Hz)."""
        binary = shutil.which(ESPEAK)
        if binary is None:
            raise SynthesisError("espeak-ng is not installed (make system)")
        voice = self.voices.get(language) or self.voices.get("en") or "en-us"
        done = subprocess.run(
            [binary, "--stdout", "-v", voice, "-s", str(self.words_per_minute.get(language, 160)), "-b", "1"],
            input=text.encode("utf-8"),
            capture_output=True,
            timeout=TIMEOUT,
            check=False,
        )
        if done.returncode != 0 or not done.stdout.startswith(b"RIFF"):
            raise SynthesisError(f"espeak-ng failed: {done.stderr.decode(errors='replace')[:200]}")
        return _fix_wav_sizes(done.stdout)


def _fix_wav_sizes(wav: bytes) -> bytes:
    """espeak-ng writing to a pipe cannot seek back, so its RIFF and data sizes say 'unknown' (0x7fffffff or 0):
    set them to what was written, so every player (and Python's `wave`) reads the file."""
    data_at = wav.find(b"data", 12)
    if data_at < 0:
        return wav
    fixed = bytearray(wav)
    struct.pack_into("<I", fixed, 4, len(wav) - 8)
    struct.pack_into("<I", fixed, data_at + 4, len(wav) - data_at - 8)
    return bytes(fixed)


def wav_seconds(wav: bytes) -> float:
    """A PCM WAV's length in seconds, read from its header (0 when it is not one)."""
    import io
    import wave

    try:
        with wave.open(io.BytesIO(wav), "rb") as reader:
            return reader.getnframes() / float(reader.getframerate())
    except (wave.Error, EOFError):
        return 0.0


def has_ffmpeg() -> bool:
    return shutil.which("ffmpeg") is not None


def wav_to_ogg_opus(wav: bytes) -> bytes:
    """The WAV as OGG/Opus (48 kbit/s, voice-tuned) through ffmpeg."""
    binary = shutil.which("ffmpeg")
    if binary is None:
        raise SynthesisError("ffmpeg is not installed: no OGG/Opus (the WAV is still there)")
    done = subprocess.run(
        [
            binary,
            "-hide_banner",
            "-loglevel",
            "error",
            "-f",
            "wav",
            "-i",
            "pipe:0",
            "-c:a",
            "libopus",
            "-b:a",
            "48k",
            "-application",
            "voip",
            "-f",
            "ogg",
            "pipe:1",
        ],
        input=wav,
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    if done.returncode != 0 or not done.stdout.startswith(b"OggS"):
        raise SynthesisError(f"ffmpeg failed: {done.stderr.decode(errors='replace')[:200]}")
    return done.stdout
