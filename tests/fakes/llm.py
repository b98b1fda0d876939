"""A scripted, instant provider for tests and the benchmarks (never used by run.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from llm.base import (
    Generation,
    LLMCancelled,
    LLMUnavailable,
    Sampling,
    TokenCallback,
    approx_tokens,
    render_chat_as_text,
)


class FakeLLM:
    provider = "fake"

    def __init__(
        self,
        id: str = "fake",
        responses: list[str] | Callable[[str], str] | None = None,
        json_answer: dict[str, Any] | Callable[[str], dict[str, Any]] | None = None,
        context_window: int = 8192,
        down: bool = False,
        honor_max_tokens: bool = False,
    ):
        self.id = id
        self.model = f"fake-{id}"
        self.context_window = context_window
        self.responses = responses if responses is not None else ["I am thinking."]
        self.json_answer = json_answer
        self.down = down
        self.honor_max_tokens = honor_max_tokens  # cut answers at sampling.max_tokens, as a real model stops
        self.calls: list[dict[str, Any]] = []

    def count_tokens(self, text: str) -> int:
        return approx_tokens(text)

    def _next(self, prompt: str) -> str:
        if callable(self.responses):
            return self.responses(prompt)
        index = sum(1 for c in self.calls if c["json_schema"] is None) - 1
        return self.responses[min(index, len(self.responses) - 1)]

    def complete(
        self,
        prompt: str,
        sampling: Sampling,
        *,
        stop: list[str] | None = None,
        json_schema: dict | None = None,
        on_token: TokenCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Generation:
        if cancel is not None and cancel.is_set():
            raise LLMCancelled(f"{self.id}: cancelled")
        if self.down:
            raise LLMUnavailable(f"{self.id}: connection refused")
        self.calls.append({"prompt": prompt, "sampling": sampling, "json_schema": json_schema, "stop": stop})
        if json_schema is not None:
            answer = self.json_answer(prompt) if callable(self.json_answer) else self.json_answer
            text = json.dumps(
                answer
                if answer is not None
                else {"emotions": [{"emotion": "curiosity", "strength": 3, "reason": "new idea"}]}
            )
        else:
            text = self._next(prompt)
            if self.honor_max_tokens:
                text = text[: sampling.max_tokens * 4]
        if on_token:
            on_token(text)
        return Generation(
            text=text,
            llm_id=self.id,
            provider=self.provider,
            model=self.model,
            prompt_tokens=approx_tokens(prompt),
            completion_tokens=approx_tokens(text),
            latency_ms=0.01,
        )

    def chat(
        self,
        messages: list[dict[str, str]],
        sampling: Sampling,
        *,
        stop: list[str] | None = None,
        json_schema: dict | None = None,
        on_token: TokenCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Generation:
        return self.complete(
            render_chat_as_text(messages),
            sampling,
            stop=stop,
            json_schema=json_schema,
            on_token=on_token,
            cancel=cancel,
        )
