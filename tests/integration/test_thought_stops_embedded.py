"""The real embedded model (Gemma 3 270M, llama.cpp in process) stops where a thought would invent its human's turn:
the stops a tick passes (nodes/steps/s05_call_llm.py `thought_stops`) end the generation there."""

from __future__ import annotations

import threading

import pytest

from llm import Sampling
from llm.embedded_model import assemble_model
from llm.providers.llamacpp import EmbeddedLlamaCpp
from nodes.steps.s05_call_llm import thought_stops
from persona.settings import Settings

pytestmark = pytest.mark.integration
LIMIT_S = 240.0  # each call is cancelled after this (a loaded machine; two calls of 48 tokens take seconds)

# a transcript the model goes on with by writing its human's next line itself
TRANSCRIPT = (
    "Lumen is thinking by the sea.\n"
    "User: Hello Lumen, what are you doing?\n"
    "Lumen: I am watching the waves come in.\n"
    "User: Why do you like the waves?\n"
    "Lumen: They are never the same twice.\n"
    "User: What else do you see?\n"
    "Lumen:"
)


def generate(model: EmbeddedLlamaCpp, stop: list[str] | None) -> str:
    cancel = threading.Event()
    timer = threading.Timer(LIMIT_S, cancel.set)
    timer.start()
    try:
        return model.complete(TRANSCRIPT, Sampling(temperature=0.0, max_tokens=48), stop=stop, cancel=cancel).text
    finally:
        timer.cancel()


def test_the_embedded_model_stops_before_the_human_turn_it_would_invent(tmp_path):
    model = EmbeddedLlamaCpp("embedded", model_path=str(assemble_model()), context_window=512, n_threads=1)
    free = generate(model, None)  # greedy: the same text each time
    assert "\nUser:" in free, free  # left alone, the model writes its human's next turn
    stopped = generate(model, thought_stops(Settings(user_name="Ann"), continuation=False))
    assert "User:" not in stopped and stopped.strip(), stopped
    assert free.startswith(stopped)  # the same words, cut where the invented turn began
