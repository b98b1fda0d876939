"""The embedded default: a GGUF model in process through langchain-community's `LlamaCpp`.

langchain-community is being sunset; everything that touches it is in this module, so swapping to
llama-cpp-python's `Llama` directly is a local change. The model loads lazily on the first call.
Base models have no chat template, so `chat` renders the messages as plain text and continues it.
JSON-schema answers use llama.cpp's grammar-constrained decoding, so even a 270M model returns valid JSON.
Given a `cancel` event, generation streams and stops between two tokens once it is set.
"""

from __future__ import annotations

import json
import os
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from llm.base import (
    Generation,
    LLMCancelled,
    LLMUnavailable,
    Sampling,
    TokenCallback,
    render_chat_as_text,
)

# One model load at a time in the process. With verbose=False, llama-cpp-python silences a load by dup2-ing
# /dev/null over fds 1 and 2 (and swapping sys.stdout/sys.stderr), then restoring what it saved on entry. Two
# loads overlapping in threads (the validators are asked in parallel and each loads its model on first use)
# save each other's /dev/null and "restore" it: the process's stdout and stderr stay on /dev/null for good,
# and a run ends with exit 0 and no output. (`warnings.catch_warnings` is not thread-safe either.)
_LOAD_LOCK = threading.Lock()


class EmbeddedLlamaCpp:
    provider = "llamacpp"

    def __init__(self, id: str = "embedded", model_path: str | None = None, context_window: int = 8192,
                 n_threads: int | None = None, seed: int = -1, cache_dir: str | None = None):
        self.id = id
        self._model_path = model_path
        self._cache_dir = cache_dir
        self.context_window = context_window
        self.n_threads = n_threads or max(1, os.cpu_count() or 1)
        self.seed = seed
        self._llm = None
        self._grammars: dict[str, Any] = {}
        self._lock = threading.Lock()  # one llama.cpp context is not re-entrant

    @classmethod
    def from_entry(cls, entry: dict[str, Any]) -> "EmbeddedLlamaCpp":
        cfg = entry.get("config") or {}
        return cls(
            id=entry.get("id", "embedded"),
            model_path=cfg.get("model_path"),
            context_window=int(cfg.get("context_window", 8192)),
            n_threads=cfg.get("n_threads"),
            seed=int(cfg.get("seed", -1)),
            cache_dir=cfg.get("cache_dir"),
        )

    @property
    def model(self) -> str:
        return Path(self._model_path).name if self._model_path else "gemma-3-270m-q4_k_m.gguf"

    def _ensure(self):
        if self._llm is not None:
            return self._llm
        with _LOAD_LOCK:  # see _LOAD_LOCK; also keeps two threads from assembling the GGUF at once
            if self._llm is not None:
                return self._llm
            if not self._model_path:
                from llm.embedded_model import assemble_model

                self._model_path = str(assemble_model(Path(self._cache_dir) if self._cache_dir else None))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                from langchain_community.llms import LlamaCpp

                self._llm = LlamaCpp(
                    model_path=self._model_path,
                    n_ctx=self.context_window,
                    n_threads=self.n_threads,
                    n_batch=512,
                    seed=self.seed,
                    verbose=False,
                    max_tokens=256,
                )
        return self._llm

    def count_tokens(self, text: str) -> int:
        return len(self._ensure().client.tokenize(text.encode("utf-8"), add_bos=False, special=True)) if text else 0

    def _grammar(self, schema: dict):
        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            from llama_cpp import LlamaGrammar

            # the key is sorted; the grammar keeps the schema's own property order (the answer's first field
            # is the one the prompt asks for first)
            self._grammars[key] = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
        return self._grammars[key]

    def complete(self, prompt: str, sampling: Sampling, *, stop: list[str] | None = None,
                 json_schema: dict | None = None, on_token: TokenCallback | None = None,
                 cancel: threading.Event | None = None) -> Generation:
        llm = self._ensure()
        prompt_tokens = self.count_tokens(prompt)
        max_tokens = max(1, min(sampling.max_tokens, self.context_window - prompt_tokens - 1))
        if prompt_tokens >= self.context_window:
            raise ValueError(f"prompt has {prompt_tokens} tokens, over the model's window of {self.context_window}")
        kwargs: dict[str, Any] = {
            "max_tokens": max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "presence_penalty": sampling.presence_penalty,
            "frequency_penalty": sampling.frequency_penalty,
        }
        if json_schema is not None:
            kwargs["grammar"] = self._grammar(json_schema)
        started = time.perf_counter()
        try:
            with self._lock:
                if on_token is None and cancel is None:
                    text = llm.invoke(prompt, stop=stop or None, **kwargs)
                else:
                    parts = []
                    chunks = llm.stream(prompt, stop=stop or None, **kwargs)
                    try:
                        for chunk in chunks:
                            if cancel is not None and cancel.is_set():
                                raise LLMCancelled(f"{self.id}: cancelled after {len(parts)} token(s)")
                            parts.append(chunk)
                            if on_token is not None:
                                on_token(chunk)
                    finally:
                        chunks.close()  # ends llama.cpp's generation loop now, not when the generator is collected
                    text = "".join(parts)
        except (RuntimeError, OSError) as exc:  # llama_decode failures: treat as an outage of this model
            raise LLMUnavailable(f"{self.id}: {exc}") from exc
        latency_ms = (time.perf_counter() - started) * 1000
        return Generation(
            text=text,
            llm_id=self.id,
            provider=self.provider,
            model=self.model,
            prompt_tokens=prompt_tokens,
            completion_tokens=self.count_tokens(text),
            latency_ms=latency_ms,
        )

    def chat(self, messages: list[dict[str, str]], sampling: Sampling, *, stop: list[str] | None = None,
             json_schema: dict | None = None, on_token: TokenCallback | None = None,
             cancel: threading.Event | None = None) -> Generation:
        return self.complete(render_chat_as_text(messages), sampling, stop=stop, json_schema=json_schema,
                             on_token=on_token, cancel=cancel)
