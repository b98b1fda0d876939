"""Any OpenAI-compatible server (LM Studio, Ollama, vLLM, llama.cpp server) through langchain-openai.

`api: chat` uses /v1/chat/completions, `api: completions` uses /v1/completions (continuation mode,
base models). llama.cpp-server pitfalls handled here: it ignores `max_completion_tokens`, so
`max_tokens` travels in `extra_body`; its completions endpoint takes one prompt per request
(`batch_size=1`). A chat endpoint that returns nothing for a base model is retried once as a
plain-text completion.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from llm.base import Generation, LLMUnavailable, Sampling, TokenCallback, approx_tokens, render_chat_as_text


def _is_outage(exc: Exception) -> bool:
    import httpx
    import openai

    if isinstance(exc, (openai.APIConnectionError, openai.APITimeoutError, openai.InternalServerError,
                        httpx.TransportError, ConnectionError, TimeoutError)):
        return True
    return isinstance(exc, openai.APIStatusError) and exc.status_code >= 500


class OpenAICompatible:
    provider = "openai"

    def __init__(self, id: str, base_url: str, model: str, api: str = "chat", api_key_env: str | None = None,
                 context_window: int = 32768, timeout: float = 120.0):
        if api not in ("chat", "completions"):
            raise ValueError(f"api must be 'chat' or 'completions', not {api!r}")
        self.id = id
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api = api
        self.api_key_env = api_key_env  # the key itself is never stored; no variable named, no key sent
        self.context_window = context_window
        self.timeout = timeout
        self._chat = None
        self._completions = None

    @classmethod
    def from_entry(cls, entry: dict[str, Any]) -> "OpenAICompatible":
        cfg = entry.get("config") or {}
        return cls(
            id=entry["id"],
            base_url=cfg["base_url"],
            model=entry.get("model") or cfg.get("model", "default"),
            api=cfg.get("api", "chat"),
            api_key_env=cfg.get("api_key_env"),
            context_window=int(cfg.get("context_window", 32768)),
            timeout=float(cfg.get("timeout", 120)),
        )

    def _api_key(self) -> str:
        return (os.environ.get(self.api_key_env) if self.api_key_env else None) or "not-needed"

    def _chat_client(self):
        if self._chat is None:
            from langchain_openai import ChatOpenAI

            self._chat = ChatOpenAI(base_url=self.base_url, api_key=self._api_key(), model=self.model,
                                    timeout=self.timeout, max_retries=0, stream_usage=True)
        return self._chat

    def _completions_client(self):
        if self._completions is None:
            from langchain_openai import OpenAI

            self._completions = OpenAI(base_url=self.base_url, api_key=self._api_key(), model=self.model,
                                       timeout=self.timeout, max_retries=0, batch_size=1)
        return self._completions

    def count_tokens(self, text: str) -> int:
        return approx_tokens(text)

    @staticmethod
    def _params(sampling: Sampling, stop: list[str] | None, json_schema: dict | None, chat: bool) -> dict[str, Any]:
        extra_body: dict[str, Any] = {"max_tokens": sampling.max_tokens}
        params: dict[str, Any] = {
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "presence_penalty": sampling.presence_penalty,
            "frequency_penalty": sampling.frequency_penalty,
            "max_tokens": sampling.max_tokens,
        }
        if stop:
            params["stop"] = stop
        if json_schema is not None:
            if chat:
                params["response_format"] = {"type": "json_schema",
                                             "json_schema": {"name": "answer", "schema": json_schema}}
            else:
                # llama.cpp's C++ server takes `json_schema`, llama-cpp-python's server a GBNF `grammar`
                from llama_cpp.llama_grammar import json_schema_to_gbnf

                extra_body["json_schema"] = json_schema
                extra_body["grammar"] = json_schema_to_gbnf(json.dumps(json_schema))
        params["extra_body"] = extra_body
        return params

    def complete(self, prompt: str, sampling: Sampling, *, stop: list[str] | None = None,
                 json_schema: dict | None = None, on_token: TokenCallback | None = None) -> Generation:
        client = self._completions_client()
        params = self._params(sampling, stop, json_schema, chat=False)
        started = time.perf_counter()
        try:
            return self._complete(client, prompt, params, on_token, started)
        except Exception as exc:
            import openai

            if json_schema is None or not isinstance(exc, openai.BadRequestError):
                raise
        # a server that rejects the structured-output extras: ask again without them, parse leniently
        params["extra_body"] = {"max_tokens": sampling.max_tokens}
        return self._complete(client, prompt, params, on_token, started)

    def _complete(self, client, prompt: str, params: dict[str, Any], on_token: TokenCallback | None,
                  started: float) -> Generation:
        try:
            if on_token is None:
                result = client.generate([prompt], **params)
                text = result.generations[0][0].text
                usage = (result.llm_output or {}).get("token_usage", {})
            else:
                parts = []
                for chunk in client.stream(prompt, **params):
                    parts.append(chunk)
                    on_token(chunk)
                text, usage = "".join(parts), {}
        except Exception as exc:
            if _is_outage(exc):
                raise LLMUnavailable(f"{self.id} ({self.base_url}): {exc}") from exc
            raise
        return Generation(
            text=text, llm_id=self.id, provider=self.provider, model=self.model,
            prompt_tokens=int(usage.get("prompt_tokens") or approx_tokens(prompt)),
            completion_tokens=int(usage.get("completion_tokens") or approx_tokens(text)),
            latency_ms=(time.perf_counter() - started) * 1000,
        )

    def chat(self, messages: list[dict[str, str]], sampling: Sampling, *, stop: list[str] | None = None,
             json_schema: dict | None = None, on_token: TokenCallback | None = None) -> Generation:
        if self.api == "completions":
            return self.complete(render_chat_as_text(messages), sampling, stop=stop, json_schema=json_schema,
                                 on_token=on_token)
        client = self._chat_client()
        params = self._params(sampling, stop, json_schema, chat=True)
        lc_messages = [(m.get("role", "user"), m.get("content", "")) for m in messages]
        started = time.perf_counter()
        try:
            if on_token is None:
                reply = client.invoke(lc_messages, **params)
            else:
                reply = None
                for chunk in client.stream(lc_messages, **params):
                    reply = chunk if reply is None else reply + chunk
                    if isinstance(chunk.content, str) and chunk.content:
                        on_token(chunk.content)
        except Exception as exc:
            if _is_outage(exc):
                raise LLMUnavailable(f"{self.id} ({self.base_url}): {exc}") from exc
            raise
        text = reply.content if reply is not None and isinstance(reply.content, str) else ""
        tool_calls = [dict(tc) for tc in (getattr(reply, "tool_calls", None) or [])]
        if not text.strip() and not tool_calls:
            # Base models behind a chat endpoint answer nothing: continue the rendered text instead.
            return self.complete(render_chat_as_text(messages), sampling, stop=stop, json_schema=json_schema,
                                 on_token=on_token)
        usage = getattr(reply, "usage_metadata", None) or {}
        return Generation(
            text=text, llm_id=self.id, provider=self.provider, model=self.model,
            prompt_tokens=int(usage.get("input_tokens") or approx_tokens(render_chat_as_text(messages))),
            completion_tokens=int(usage.get("output_tokens") or approx_tokens(text)),
            latency_ms=(time.perf_counter() - started) * 1000,
            tool_calls=tool_calls,
        )
