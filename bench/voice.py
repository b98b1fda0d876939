"""Voice benchmark (JSON): espeak-ng speaks ten English and ten Russian sentences, Whisper base (faster-whisper, int8,
2 threads) transcribes them; corpus word error rate per language (goal: wer_en ≤ 0.15), real-time factors (seconds
of work per second of audio: below 1 is faster than real time) and the model's size on disk.

    python bench/voice.py [--beam 1] [--detect]

--detect: the language is detected (among en, ru) rather than given, as a voice message with no hint is heard.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from persona.settings import load_settings  # noqa: E402
from reach.speech import SpeechEngines  # noqa: E402
from reach.speech.models import assemble_whisper  # noqa: E402
from reach.speech.tts import wav_seconds  # noqa: E402
from reach.speech.wer import word_error_rate  # noqa: E402

SENTENCES = {
    "en": [
        "The weather is nice today and we are going for a walk in the park.",
        "Please remind me to call my mother tomorrow morning.",
        "I finished reading the book you gave me last week.",
        "What do you think about the new project at work?",
        "The train leaves the station in ten minutes.",
        "She planted tomatoes and potatoes in the garden.",
        "Could you tell me a short story before I go to sleep?",
        "My computer is very slow when I open many windows.",
        "We should buy fresh bread and milk on the way home.",
        "Thank you for helping me with the difficult problem.",
    ],
    "ru": [
        "Сегодня хорошая погода, и мы пойдём гулять в парк.",
        "Пожалуйста, напомни мне завтра утром позвонить маме.",
        "Я дочитал книгу, которую ты подарил мне на прошлой неделе.",
        "Что ты думаешь о новом проекте на работе?",
        "Поезд отправляется со станции через десять минут.",
        "Она посадила в саду помидоры и картошку.",
        "Расскажи мне, пожалуйста, короткую сказку перед сном.",
        "Мой компьютер очень медленно работает, когда открыто много окон.",
        "По дороге домой нужно купить свежий хлеб и молоко.",
        "Спасибо, что помог мне решить эту трудную задачу.",
    ],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--detect", action="store_true")
    args = parser.parse_args()
    settings = load_settings()
    model_dir = assemble_whisper(settings.cache_dir)
    engines = SpeechEngines(
        cache_dir=settings.cache_dir,
        voices=dict(settings.speech.tts_voices),
        words_per_minute=dict(settings.speech.tts_words_per_minute),
        languages=("en", "ru"),
        beam_size=args.beam,
        threads=min(2, os.cpu_count() or 1),
    )
    started = time.perf_counter()
    engines.transcriber()._loaded()
    load_seconds = time.perf_counter() - started
    result: dict[str, object] = {
        "stt": "whisper-base ctranslate2 int8 (faster-whisper)",
        "tts": "espeak-ng",
        "beam_size": args.beam,
        "language": "detected" if args.detect else "given",
        "cpu_threads": engines.threads,
        "stt_load_s": round(load_seconds, 2),
    }
    for language, sentences in SENTENCES.items():
        audio_seconds = tts_seconds = stt_seconds = 0.0
        heard, detected = [], []
        for sentence in sentences:
            began = time.perf_counter()
            wav = engines.speak(sentence, language)
            tts_seconds += time.perf_counter() - began
            audio_seconds += wav_seconds(wav)
            transcript = engines.transcribe(wav, None if args.detect else language)
            stt_seconds += transcript.elapsed
            heard.append(transcript.text)
            detected.append(transcript.language)
        result[f"wer_{language}"] = round(word_error_rate(sentences, heard), 4)
        result[f"rtf_stt_{language}"] = round(stt_seconds / audio_seconds, 3)
        result[f"rtf_tts_{language}"] = round(tts_seconds / audio_seconds, 4)
        result[f"audio_s_{language}"] = round(audio_seconds, 1)
        result[f"language_right_{language}"] = sum(d == language for d in detected) / len(detected)
        result[f"examples_{language}"] = [[s, h] for s, h in list(zip(sentences, heard, strict=True))[:3]]
    result["stt_model_mb"] = round(sum(f.stat().st_size for f in model_dir.iterdir()) / 1e6, 1)
    result["load_avg_1m"] = round(os.getloadavg()[0], 2)  # the machine is shared: a high load inflates the RTFs
    result["tts_model_mb"] = 0.0  # espeak-ng: rules and dictionaries (~10 MB, the Debian package), no model
    print(json.dumps(result, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
