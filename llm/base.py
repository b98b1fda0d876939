"""What every provider returns and raises; nothing here knows about the database or the graph."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

TokenCallback = Callable[[str], None]

# Why a model did not answer, and what the registry does about it (see LLMRegistry.generate):
OUTAGE = "outage"  # connection refused, timeout, 5xx: back off (growing), fail over
MALFORMED = "malformed"  # not JSON, no choices, an empty stream: back off like an outage, fail over
RATE_LIMITED = "rate_limited"  # 429: back off (Retry-After when given), fail over
AUTH = "auth"  # 401/403: the key is wrong: set aside for the longest backoff, fail over
NOT_FOUND = "not_found"  # 404: no such model or endpoint: set aside for the longest backoff, fail over
BAD_REQUEST = "bad_request"  # 400/422/…: this request was refused, not the model: fail over, no backoff
ERROR = "error"  # anything else a provider raised: fail over, no backoff (logged with its traceback)


class LLMUnavailable(RuntimeError):
    """The model did not answer; `kind` (above) says why. The registry records it and fails over."""

    def __init__(self, message: str, *, kind: str = OUTAGE, retry_after: float | None = None):
        super().__init__(message)
        self.kind = kind
        self.retry_after = retry_after


class LLMCancelled(Exception):
    """The run asked to stop while a model was answering. Not an outage: nothing fails over, nothing is stored;
    the graph stops the step where it is (the interrupted tick resumes on the next run)."""


class AllLLMsUnavailable(LLMUnavailable):
    """No registry LLM answered: the caller enters degraded mode."""


@dataclass
class Sampling:
    temperature: float = 0.8
    top_p: float = 0.9
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    max_tokens: int = 256
    # llama.cpp's own samplers (the embedded model; a server only with its entry's `config.sampling_extras`). These
    # defaults are llama-cpp-python's and LangChain's, what every call got before they were named here; the free
    # thought takes persona/settings.py's `sampling` instead.
    top_k: int = 40
    min_p: float = 0.05
    repeat_penalty: float = 1.1  # over the last 64 tokens, the prompt's tail included
    # Only tokens made of these letters (a regex character-class body, e.g. "A-Za-z"), plain punctuation and
    # spaces may be sampled: a cheap mask over the vocabulary that keeps a small model in words (persona/prose.py).
    # A provider without access to the logits ignores it.
    letters: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Sampling:
        data = data or {}
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass
class Generation:
    text: str
    llm_id: str
    provider: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    cached_tokens: int = 0  # of prompt_tokens, served from a prompt cache (the server's usage; the embedded context)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    failed_over_from: list[str] = field(default_factory=list)

    @property
    def tokens_per_s(self) -> float:
        return self.completion_tokens / (self.latency_ms / 1000) if self.latency_ms > 0 else 0.0


class Provider(Protocol):
    """One model endpoint. `complete` continues raw text; `chat` answers a message list. Both raise
    `LLMUnavailable` when the model does not answer, and `LLMCancelled` soon after `cancel` is set."""

    id: str
    provider: str
    context_window: int

    @property
    def model(self) -> str: ...

    def complete(
        self,
        prompt: str,
        sampling: Sampling,
        *,
        stop: list[str] | None = None,
        json_schema: dict[str, Any] | None = None,
        on_token: TokenCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Generation: ...

    def chat(
        self,
        messages: list[dict[str, str]],
        sampling: Sampling,
        *,
        stop: list[str] | None = None,
        json_schema: dict[str, Any] | None = None,
        on_token: TokenCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Generation: ...

    def count_tokens(self, text: str) -> int: ...


def cut_at_stops(text: str, stops: list[str] | None) -> tuple[str, str | None]:
    """`text` up to the first of `stops` it holds, and that stop (None: nothing cut) — what a server that honours
    `stop` returns; one that ignores it (or a provider that cannot stop mid-stream) is held to it afterwards."""
    found = [(index, stop) for stop in stops or () if stop and (index := text.find(stop)) >= 0]
    if not found:
        return text, None
    index, stop = min(found)
    return text[:index], stop


def approx_tokens(text: str) -> int:
    """Offline token estimate (≈4 chars/token, LangChain's `count_tokens_approximately` rule)."""
    return math.ceil(len(text) / 4.0) if text else 0


def render_chat_as_text(messages: list[dict[str, str]]) -> str:
    """A message list as one plain document, for base models that have no chat template."""
    parts: list[str] = []
    for message in messages:
        role, content = message.get("role", "user"), message.get("content", "")
        if role == "system":
            parts.append(content.rstrip())
        elif role == "assistant":
            parts.append(f"{content.rstrip()}")
        else:
            parts.append(content.rstrip())
    return "\n\n".join(p for p in parts if p) + "\n"
