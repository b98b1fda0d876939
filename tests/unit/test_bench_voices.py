"""bench/voices.py's decision rule: the default voice changes only for a voice with a clear licence that beats it on
coherence and on topic by more than the noise between runs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bench(monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_voices_under_test", ROOT / "bench" / "voices.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setattr(sys, "path", list(sys.path))  # it puts the repo on the path
    spec.loader.exec_module(module)
    return module


def row(voice: str, coherence: float, on_topic: float, thoughts: int = 18, notes: int = 12) -> dict:
    return {"voice": voice, "coherence": coherence, "thoughts": thoughts, "on_topic": on_topic, "notes": notes}


def test_a_clear_win_on_both_switches(bench):
    verdict = bench.decide([row("gemma-3-270m", 0.2, 0.4), row("smollm2-135m", 0.9, 0.95)], "gemma-3-270m")
    assert verdict["switch_to"] == "smollm2-135m"
    assert verdict["against"]["smollm2-135m"]["coherence"]["margin"] == 0.7


def test_a_win_within_the_noise_keeps_the_default(bench):
    verdict = bench.decide([row("gemma-3-270m", 0.5, 0.5), row("smollm2-135m", 0.7, 0.9)], "gemma-3-270m")
    assert verdict["keep"] == "gemma-3-270m"
    margin = verdict["against"]["smollm2-135m"]["coherence"]
    assert margin["margin"] < margin["noise"]


def test_a_win_on_one_measure_only_keeps_the_default(bench):
    verdict = bench.decide([row("gemma-3-270m", 0.1, 0.9), row("smollm2-135m", 0.95, 0.9)], "gemma-3-270m")
    assert verdict["keep"] == "gemma-3-270m"


def test_a_voice_without_a_clear_licence_never_becomes_the_default(bench):
    verdict = bench.decide([row("gemma-3-270m", 0.1, 0.2), row("qwen2.5-coder-0.5b", 1.0, 1.0)], "gemma-3-270m")
    assert verdict["keep"] == "gemma-3-270m"
    assert verdict["against"]["qwen2.5-coder-0.5b"]["beats_default"] is True
    assert verdict["against"]["qwen2.5-coder-0.5b"]["clear_licence"] is False


def test_the_noise_shrinks_with_more_samples_and_never_vanishes(bench):
    assert bench.noise(0.5, 100, 0.5, 100) < bench.noise(0.5, 10, 0.5, 10)
    assert bench.noise(1.0, 12, 1.0, 12) > 0
