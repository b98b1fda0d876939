"""Any OpenAI-compatible server (LM Studio, Ollama, vLLM, llama.cpp server), spoken to directly over httpx.

`api: chat` uses /v1/chat/completions, `api: completions` uses /v1/completions (continuation mode,
base models). A chat endpoint that returns nothing for a base model is retried once as a plain-text completion.

Every request streams, so a stop is noticed between two chunks and `timeout` bounds each wait for the server's
next bytes rather than the whole answer. Servers differ; what this module does about it:
- a server that ignores `stream: true` answers with one JSON body: that body is the answer, and this provider
  stops asking that server to stream; one that refuses the stream (400) or garbles it is asked again whole;
- a completions server that rejects the structured-output extras is asked again without them (parsed leniently);
- every failure is an `LLMUnavailable` with its kind (llm/base.py): connection errors, timeouts and 5xx are
  outages, 401/403 a wrong key, 404 an unknown model, 429 a rate limit, other 4xx a refused request, and a body
  that is not a completion is malformed.
With a `cancel` event the request runs on a worker thread and the caller waits on it, so a set event raises
`LLMCancelled` at once even while the server sends nothing; the abandoned worker closes its connection at its
next chunk or timeout.

Prompts are budgeted with `count_tokens`, which cannot see the server's tokenizer: it starts from the ≈4
chars/token rule and learns the server's real ratio after each answer (it rises at once, falls slowly, and keeps
a margin) from the `usage.prompt_tokens` the answer reports or, when a stream reports none (llama-cpp-python's
server), from the server's own tokenizer endpoint (`/extras/tokenize/count` there, `/tokenize` on llama.cpp's and
vLLM's), so a prompt in a language or markup that tokenizes densely still fits the window. (A llama-cpp-python
server asked for more than its window drops the stream without a status: that would read as an outage.)

Config keys (an `llms:` entry's `config`): base_url, api (chat|completions), api_key_env (or api_key_file),
context_window,
timeout (seconds to wait for the server's next bytes, default 60), connect_timeout (default 5), sampling_extras,
cache_prompt (llama.cpp's server: keep the prompt's evaluated opening for the next request; default: as
sampling_extras, a server that takes llama.cpp's fields). The prompt tokens a server served from its cache are read
from its usage (`prompt_tokens_details.cached_tokens`: OpenAI, vLLM, llama.cpp's server).
Sampling sent: temperature, top_p, presence_penalty, frequency_penalty, max_tokens and stop — what the OpenAI API
accepts. llama.cpp's other samplers (`Sampling.top_k`, `min_p`, `repeat_penalty`) go only with
`sampling_extras: true`, for a server that takes them in the body (llama.cpp's server, llama-cpp-python's, LM
Studio, KoboldCpp; vLLM reads `repetition_penalty`, sent beside): the OpenAI API refuses a field it does not know.
"""

from __future__ import annotations

import json
import logging
import math
import os
import queue
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from llm.base import (
    AUTH,
    BAD_REQUEST,
    MALFORMED,
    NOT_FOUND,
    OUTAGE,
    RATE_LIMITED,
    Generation,
    LLMCancelled,
    LLMUnavailable,
    Sampling,
    TokenCallback,
    approx_tokens,
    render_chat_as_text,
)

if TYPE_CHECKING:  # httpx is imported on first use
    import httpx

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_CONNECT_TIMEOUT_S = 5.0
CANCEL_POLL_S = 0.1
CALIBRATION_CHARS = 2000
TOKEN_MARGIN = 1.04  # above the learned ratio: one prompt tokenizes a little denser than the last


def read_secret_file(path: str) -> str | None:
    """A key kept in a secrets file (its whole text, stripped); None when the file is gone."""
    try:
        with open(path, encoding="utf-8") as file:
            return file.read().strip() or None
    except FileNotFoundError:
        log.warning("the secrets file %s is gone: no key sent", path)
        return None


@dataclass
class _Answer:
    text: str = ""
    usage: dict[str, Any] = field(default_factory=dict)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


def _seconds(cfg: dict[str, Any], key: str, default: float, llm_id: str) -> float:
    value = cfg.get(key, default)
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not seconds > 0:
        raise ValueError(f"LLM {llm_id!r}: config.{key} must be a positive number of seconds, got {value!r}")
    return seconds


def _flag(cfg: dict[str, Any], key: str, llm_id: str) -> bool:
    value = cfg.get(key, False)
    if not isinstance(value, bool):
        raise ValueError(f"LLM {llm_id!r}: config.{key} must be true or false, got {value!r}")
    return value


def _retry_after(headers: httpx.Headers) -> float | None:
    try:
        return max(0.0, float(headers.get("retry-after", "")))
    except ValueError:
        return None  # an HTTP date or nothing: the registry's own backoff applies


def _tool_call(call: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI tool call as the command parser takes it: {name, args, id}."""
    function = call.get("function") or {}
    arguments = function.get("arguments") or "{}"
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
    except (ValueError, TypeError):
        args = {}
    return {"name": function.get("name") or "", "args": args if isinstance(args, dict) else {}, "id": call.get("id")}


def cached_tokens(usage: dict[str, Any]) -> int:
    """The prompt tokens the server served from its prompt cache, as its usage reports them (0: it says nothing)."""
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if isinstance(cached, int):
        return max(0, cached)
    return 0


class OpenAICompatible:
    provider = "openai"

    def __init__(
        self,
        id: str,
        base_url: str,
        model: str,
        api: str = "chat",
        api_key_env: str | None = None,
        context_window: int = 32768,
        timeout: float = DEFAULT_TIMEOUT_S,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
        api_key_file: str | None = None,
        sampling_extras: bool = False,
        cache_prompt: bool | None = None,
    ):
        if api not in ("chat", "completions"):
            raise ValueError(f"api must be 'chat' or 'completions', not {api!r}")
        self.id = id
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api = api
        self.api_key_env = api_key_env  # the key itself is never stored; no variable named, no key sent
        self.api_key_file = api_key_file  # or a secrets file (0600, the data dir's secrets/: a model added at run time)
        self.context_window = context_window
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.sampling_extras = sampling_extras  # llama.cpp's samplers in the body too (module doc)
        self.cache_prompt = sampling_extras if cache_prompt is None else cache_prompt
        self.streams = True  # until this server shows it does not stream
        self.tokens_per_estimate = 1.0  # the server's prompt tokens per approx_tokens unit, learned from usage
        self._tokenizer_endpoint: str | None | bool = None  # None: not looked for yet; False: the server has none
        self._sized_up = False  # the first long text counted has been sent to the server's tokenizer
        self._http: httpx.Client | None = None
        self._http_lock = threading.Lock()

    @classmethod
    def from_entry(cls, entry: dict[str, Any]) -> OpenAICompatible:
        cfg = entry.get("config") or {}
        return cls(
            id=entry["id"],
            base_url=cfg["base_url"],
            model=entry.get("model") or cfg.get("model", "default"),
            api=cfg.get("api", "chat"),
            api_key_env=cfg.get("api_key_env"),
            api_key_file=cfg.get("api_key_file"),
            context_window=int(cfg.get("context_window", 32768)),
            timeout=_seconds(cfg, "timeout", DEFAULT_TIMEOUT_S, entry["id"]),
            connect_timeout=_seconds(cfg, "connect_timeout", DEFAULT_CONNECT_TIMEOUT_S, entry["id"]),
            sampling_extras=_flag(cfg, "sampling_extras", entry["id"]),
            cache_prompt=_flag(cfg, "cache_prompt", entry["id"]) if "cache_prompt" in cfg else None,
        )

    def _client(self) -> httpx.Client:
        with self._http_lock:
            if self._http is None:
                import httpx

                key = os.environ.get(self.api_key_env) if self.api_key_env else None
                if key is None and self.api_key_file:
                    key = read_secret_file(self.api_key_file)
                self._http = httpx.Client(
                    base_url=self.base_url,
                    headers={"Authorization": f"Bearer {key}"} if key else {},
                    timeout=httpx.Timeout(self.timeout, connect=min(self.connect_timeout, self.timeout)),
                )
            return self._http

    def close(self) -> None:
        with self._http_lock:
            if self._http is not None:
                self._http.close()
                self._http = None

    def count_tokens(self, text: str) -> int:
        if not self._sized_up and len(text) >= CALIBRATION_CHARS:  # the first long text: before any answer
            self._sized_up = True
            self._learn_tokens(self._server_count(text), approx_tokens(text))
        estimate = approx_tokens(text)
        return math.ceil(estimate * self.tokens_per_estimate * TOKEN_MARGIN) if estimate else 0

    def _server_count(self, text: str) -> int | None:
        """The server's own token count of `text`, where it offers a tokenizer endpoint (looked for once)."""
        if self._tokenizer_endpoint is False or not text:
            return None
        import httpx

        root = self.base_url.removesuffix("/v1")
        body = {"input": text, "content": text, "prompt": text, "model": self.model, "add_special": False}
        known = self._tokenizer_endpoint
        for path in [known] if isinstance(known, str) and known else ["/extras/tokenize/count", "/tokenize"]:
            try:
                response = self._client().post(root + path, json=body, timeout=self.connect_timeout)
                data = response.json() if response.status_code == 200 else None
            except (httpx.TransportError, OSError):
                return None  # the server is not answering: not a sign it has no tokenizer
            except (httpx.HTTPError, ValueError):
                data = None
            count = data.get("count") if isinstance(data, dict) else None
            if count is None and isinstance(data, dict) and isinstance(data.get("tokens"), list):
                count = len(data["tokens"])
            if isinstance(count, int) and count > 0:
                self._tokenizer_endpoint = path
                return count
        if self._tokenizer_endpoint is None:
            self._tokenizer_endpoint = False
        return None

    def _learn_tokens(self, reported: Any, estimate: int) -> None:
        try:
            observed = int(reported) / estimate
        except (TypeError, ValueError, ZeroDivisionError):
            return
        if estimate < 64 or not 0.2 <= observed <= 5:  # too short to say, or not this prompt's count
            return
        self.tokens_per_estimate = max(observed, 0.8 * self.tokens_per_estimate + 0.2 * observed)

    def _body(self, sampling: Sampling, stop: list[str] | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "presence_penalty": sampling.presence_penalty,
            "frequency_penalty": sampling.frequency_penalty,
            "max_tokens": sampling.max_tokens,
        }
        if self.sampling_extras:
            body.update(
                top_k=sampling.top_k,
                min_p=sampling.min_p,
                repeat_penalty=sampling.repeat_penalty,
                repetition_penalty=sampling.repeat_penalty,
            )
        if self.cache_prompt:
            body["cache_prompt"] = True
        if stop:
            body["stop"] = stop
        return body

    # -- one request ------------------------------------------------------------------------------------------

    def _failure(self, message: str, kind: str, retry_after: float | None = None) -> LLMUnavailable:
        return LLMUnavailable(f"{self.id} ({self.base_url}): {message}", kind=kind, retry_after=retry_after)

    def _refusal(self, status: int, body: str, headers: httpx.Headers) -> LLMUnavailable:
        said = " ".join(body.split())[:300] or "(no body)"
        if status in (401, 403):
            where = f"the variable {self.api_key_env}" if self.api_key_env else "no key variable (config.api_key_env)"
            return self._failure(f"HTTP {status}: the server refused the API key ({where}): {said}", AUTH)
        if status == 404:
            return self._failure(f"HTTP 404: no model {self.model!r} or no such endpoint here: {said}", NOT_FOUND)
        if status == 429:
            return self._failure(f"HTTP 429: rate limited: {said}", RATE_LIMITED, _retry_after(headers))
        if status == 408 or status >= 500:
            return self._failure(f"HTTP {status}: {said}", OUTAGE)
        return self._failure(f"HTTP {status}: the request was refused: {said}", BAD_REQUEST)

    def _parse_whole(self, raw: str) -> _Answer:
        try:
            data = json.loads(raw)
        except ValueError:
            raise self._failure(f"the answer is not JSON: {' '.join(raw.split())[:200]!r}", MALFORMED) from None
        if isinstance(data, dict) and data.get("error"):
            raise self._failure(f"the server reported an error: {str(data['error'])[:300]}", OUTAGE)
        choices = data.get("choices") if isinstance(data, dict) else None
        if not choices or not isinstance(choices[0], dict):
            raise self._failure(f"the answer has no choices: {' '.join(raw.split())[:200]!r}", MALFORMED)
        choice = choices[0]
        message = choice.get("message") or {}
        text = choice.get("text") if "text" in choice else message.get("content")
        return _Answer(
            text=text if isinstance(text, str) else "",
            usage=data.get("usage") or {},
            tool_calls=[_tool_call(c) for c in message.get("tool_calls") or [] if isinstance(c, dict)],
        )

    def _read_stream(
        self, lines: Iterable[str], on_token: TokenCallback | None, cancel: threading.Event | None
    ) -> _Answer:
        answer, parts, seen = _Answer(), [], False
        calls: dict[int, dict[str, Any]] = {}  # a tool call's index -> its pieces so far
        for line in lines:
            if cancel is not None and cancel.is_set():
                raise LLMCancelled(f"{self.id}: cancelled while streaming")
            if not line.startswith("data:"):
                continue  # SSE comments, `event:` lines, keep-alives
            payload = line[5:].strip()
            if payload == "[DONE]":
                seen = True
                break
            try:
                data = json.loads(payload)
            except ValueError:
                raise self._failure(f"a streamed chunk is not JSON: {payload[:200]!r}", MALFORMED) from None
            if not isinstance(data, dict):
                raise self._failure(f"a streamed chunk is not an object: {payload[:200]!r}", MALFORMED)
            if data.get("error"):
                raise self._failure(f"the server reported an error: {str(data['error'])[:300]}", OUTAGE)
            seen = True
            if data.get("usage"):
                answer.usage = data["usage"]
            for choice in data.get("choices") or []:
                delta = choice.get("delta") or {}
                piece = choice.get("text") if "text" in choice else delta.get("content")
                if isinstance(piece, str) and piece:
                    parts.append(piece)
                    if on_token is not None:
                        on_token(piece)
                for call in delta.get("tool_calls") or []:
                    merged = calls.setdefault(
                        call.get("index", len(calls)), {"function": {"name": "", "arguments": ""}}
                    )
                    merged["id"] = call.get("id") or merged.get("id")
                    function = call.get("function") or {}
                    merged["function"]["name"] += function.get("name") or ""
                    merged["function"]["arguments"] += function.get("arguments") or ""
        if not seen:
            raise self._failure("the stream held no completion chunks", MALFORMED)
        answer.text = "".join(parts)
        answer.tool_calls = [_tool_call(calls[i]) for i in sorted(calls)]
        return answer

    def _fetch(
        self, path: str, body: dict[str, Any], on_token: TokenCallback | None, cancel: threading.Event | None
    ) -> _Answer:
        import httpx

        try:
            with self._client().stream("POST", path, json=body) as response:
                if response.status_code >= 400:
                    raise self._refusal(
                        response.status_code, response.read().decode("utf-8", "replace"), response.headers
                    )
                if body.get("stream") and "text/event-stream" in response.headers.get("content-type", ""):
                    return self._read_stream(response.iter_lines(), on_token, cancel)
                raw = response.read().decode("utf-8", "replace")
                if body.get("stream"):
                    if raw.lstrip().startswith("data:"):  # an event stream without its content type
                        return self._read_stream(raw.splitlines(), on_token, cancel)
                    log.info("%s ignores `stream`: asking it for whole answers from now on", self.id)
                    self.streams = False
                answer = self._parse_whole(raw)
                if on_token is not None and answer.text:
                    on_token(answer.text)
                return answer
        except httpx.ConnectTimeout as exc:
            raise self._failure(
                f"no connection within {self.connect_timeout:g}s (config.connect_timeout)", OUTAGE
            ) from exc
        except httpx.TimeoutException as exc:
            raise self._failure(
                f"no answer within {self.timeout:g}s (config.timeout): {type(exc).__name__}", OUTAGE
            ) from exc
        except (httpx.TransportError, OSError) as exc:
            raise self._failure(f"{type(exc).__name__}: {exc}", OUTAGE) from exc

    def _exchange(
        self, path: str, body: dict[str, Any], on_token: TokenCallback | None, cancel: threading.Event | None
    ) -> _Answer:
        """One request; with `cancel`, on a worker thread this thread can walk away from."""
        if cancel is None:
            return self._fetch(path, body, on_token, None)
        if cancel.is_set():
            raise LLMCancelled(f"{self.id}: cancelled before the request")
        # a token's text, then the answer, or what the request raised
        events: queue.SimpleQueue[str | _Answer | BaseException] = queue.SimpleQueue()

        def work() -> None:
            try:
                events.put(self._fetch(path, body, events.put, cancel))
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller, raised there
                events.put(exc)

        threading.Thread(target=work, name=f"llm-{self.id}", daemon=True).start()
        while True:
            if cancel.is_set():
                raise LLMCancelled(f"{self.id}: cancelled while waiting for {self.base_url}")
            try:
                event = events.get(timeout=CANCEL_POLL_S)
            except queue.Empty:
                continue
            if isinstance(event, str):
                if on_token is not None:
                    on_token(event)
            elif isinstance(event, _Answer):
                return event
            else:
                raise event

    def _ask(
        self, path: str, body: dict[str, Any], on_token: TokenCallback | None, cancel: threading.Event | None
    ) -> _Answer:
        if not self.streams:
            return self._exchange(path, {**body, "stream": False}, on_token, cancel)
        streamed = {**body, "stream": True, "stream_options": {"include_usage": True}}
        try:
            return self._exchange(path, streamed, on_token, cancel)
        except LLMUnavailable as exc:
            if exc.kind not in (BAD_REQUEST, MALFORMED):
                raise
            answer = self._exchange(path, {**body, "stream": False}, on_token, cancel)
        log.info("%s cannot stream: asking it for whole answers from now on", self.id)
        self.streams = False
        return answer

    # -- the Provider protocol --------------------------------------------------------------------------------

    def complete(
        self,
        prompt: str,
        sampling: Sampling,
        *,
        stop: list[str] | None = None,
        json_schema: dict[str, Any] | None = None,
        on_token: TokenCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Generation:
        body = {"model": self.model, "prompt": prompt, **self._body(sampling, stop)}
        started = time.perf_counter()
        if json_schema is None:
            answer = self._ask("/completions", body, on_token, cancel)
        else:
            # llama.cpp's C++ server takes `json_schema`, llama-cpp-python's server a GBNF `grammar`
            from llama_cpp.llama_grammar import json_schema_to_gbnf

            structured = {**body, "json_schema": json_schema, "grammar": json_schema_to_gbnf(json.dumps(json_schema))}
            try:
                answer = self._ask("/completions", structured, on_token, cancel)
            except LLMUnavailable as exc:
                if exc.kind != BAD_REQUEST:
                    raise
                answer = self._ask("/completions", body, on_token, cancel)  # without the extras; parsed leniently
        return self._generation(answer, prompt, started)

    def chat(
        self,
        messages: list[dict[str, str]],
        sampling: Sampling,
        *,
        stop: list[str] | None = None,
        json_schema: dict[str, Any] | None = None,
        on_token: TokenCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Generation:
        if self.api == "completions":
            return self.complete(
                render_chat_as_text(messages),
                sampling,
                stop=stop,
                json_schema=json_schema,
                on_token=on_token,
                cancel=cancel,
            )
        body = {
            "model": self.model,
            **self._body(sampling, stop),
            "messages": [{"role": m.get("role", "user"), "content": m.get("content", "")} for m in messages],
        }
        if json_schema is not None:
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": "answer", "schema": json_schema}}
        started = time.perf_counter()
        answer = self._ask("/chat/completions", body, on_token, cancel)
        if not answer.text.strip() and not answer.tool_calls:
            # Base models behind a chat endpoint answer nothing: continue the rendered text instead.
            return self.complete(
                render_chat_as_text(messages),
                sampling,
                stop=stop,
                json_schema=json_schema,
                on_token=on_token,
                cancel=cancel,
            )
        return self._generation(answer, render_chat_as_text(messages), started)

    def _generation(self, answer: _Answer, prompt: str, started: float) -> Generation:
        usage = answer.usage if isinstance(answer.usage, dict) else {}
        approx_prompt_tokens = approx_tokens(prompt)
        prompt_tokens = usage.get("prompt_tokens") or self._server_count(prompt)
        self._learn_tokens(prompt_tokens, approx_prompt_tokens)
        return Generation(
            text=answer.text,
            llm_id=self.id,
            provider=self.provider,
            model=self.model,
            prompt_tokens=int(prompt_tokens or approx_prompt_tokens),
            completion_tokens=int(usage.get("completion_tokens") or approx_tokens(answer.text)),
            cached_tokens=cached_tokens(usage),
            latency_ms=(time.perf_counter() - started) * 1000,
            tool_calls=answer.tool_calls,
        )
