"""Web search through a backend the operator names: an HTTP endpoint answering JSON (SearXNG's `/search?q=…&format=
json` shape: `results: [{title, url, content}]`; any other JSON or text is taken as it comes), an OpenAI-compatible
server (a model that searches, asked in one chat turn), or an MCP tool (the caller passes its text through
`parse_results`), or a local command-line program (Epos's `claude -p` backend: `search_command`). Every request has
a timeout and a size limit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass
from typing import Any

import httpx

MAX_BYTES = 2_000_000


class SearchError(RuntimeError):
    pass


@dataclass
class SearchResult:
    title: str
    url: str
    snippet: str

    def line(self) -> str:
        return f"- {self.title} <{self.url}>: {' '.join(self.snippet.split())}"


@dataclass
class SearchAnswer:
    results: list[SearchResult]
    text: str = ""  # an answer that is prose, not a result list

    def render(self) -> str:
        return "\n".join(r.line() for r in self.results) if self.results else self.text


def parse_results(raw: str, max_results: int) -> SearchAnswer:
    """Results from a backend's body: JSON with a `results` (or `items`/`data`) list, a bare list, or text."""
    try:
        data: Any = json.loads(raw)
    except (json.JSONDecodeError, TypeError):
        return SearchAnswer([], raw.strip())
    rows = data
    if isinstance(data, dict):
        rows = next(
            (data[k] for k in ("results", "items", "data", "organic_results") if isinstance(data.get(k), list)), None
        )
    if not isinstance(rows, list):
        return SearchAnswer([], raw.strip())
    results = []
    for row in rows[:max_results]:
        if not isinstance(row, dict):
            continue
        results.append(
            SearchResult(
                title=str(row.get("title") or row.get("name") or "(untitled)"),
                url=str(row.get("url") or row.get("link") or row.get("href") or ""),
                snippet=str(
                    row.get("content") or row.get("snippet") or row.get("description") or row.get("body") or ""
                ),
            )
        )
    return SearchAnswer(results)


def _headers(api_key_env: str | None) -> dict[str, str]:
    key = os.environ.get(api_key_env) if api_key_env else None
    return {"Authorization": f"Bearer {key}"} if key else {}


def _body(response: httpx.Response) -> str:
    response.raise_for_status()
    if len(response.content) > MAX_BYTES:
        raise SearchError(f"the search backend answered {len(response.content):,} bytes; at most {MAX_BYTES:,}")
    return response.text


def _failure(url: str, exc: Exception) -> SearchError:
    if isinstance(exc, httpx.TimeoutException):
        return SearchError(f"search backend {url}: no answer within the timeout")
    if isinstance(exc, httpx.HTTPStatusError):
        return SearchError(f"search backend {url}: HTTP {exc.response.status_code}")
    return SearchError(f"search backend {url}: {type(exc).__name__}: {exc}"[:500])


def search_http(
    url: str,
    query: str,
    *,
    query_param: str = "q",
    params: dict[str, str] | None = None,
    api_key_env: str | None = None,
    max_results: int = 5,
    timeout_s: float = 20,
) -> SearchAnswer:
    try:
        with httpx.Client(timeout=timeout_s, follow_redirects=True) as client:
            body = _body(client.get(url, params={**(params or {}), query_param: query}, headers=_headers(api_key_env)))
    except SearchError:
        raise
    except Exception as exc:  # noqa: BLE001 - one readable error
        raise _failure(url, exc) from None
    return parse_results(body, max_results)


def search_openai(
    url: str, query: str, *, model: str, api_key_env: str | None = None, max_results: int = 5, timeout_s: float = 60
) -> SearchAnswer:
    """Ask an OpenAI-compatible server's model (one that searches the web) for `query`; its answer is prose."""
    prompt = f"Search the web for: {query}\nAnswer with at most {max_results} findings, each with its source URL."
    try:
        with httpx.Client(timeout=timeout_s) as client:
            body = _body(
                client.post(
                    url.rstrip("/") + "/chat/completions",
                    headers=_headers(api_key_env),
                    json={"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": 800},
                )
            )
        text = json.loads(body)["choices"][0]["message"]["content"]
    except SearchError:
        raise
    except (KeyError, IndexError, TypeError, json.JSONDecodeError):
        raise SearchError(f"search backend {url}: not a chat completion") from None
    except Exception as exc:  # noqa: BLE001
        raise _failure(url, exc) from None
    return SearchAnswer([], str(text or "").strip())


def command_program(argv: list[str]) -> str | None:
    """The full path of a search command's program, or None when it is not installed (search is then off)."""
    return shutil.which(argv[0]) if argv and argv[0] else None


def command_argv(argv: list[str], query: str) -> list[str]:
    """`argv` with `{query}` replaced by the query in every arg that names it; without any, the query goes last.
    The query is one argument, never passed through a shell."""
    if any("{query}" in a for a in argv[1:]):
        return [argv[0], *(a.replace("{query}", query) for a in argv[1:])]
    return [*argv, query]


def search_command(
    argv: list[str], query: str, *, max_results: int = 5, timeout_s: float = 20, max_bytes: int = MAX_BYTES
) -> SearchAnswer:
    """Run the search program (no shell, no stdin) and take its stdout as the results (JSON or text). It is killed
    past `timeout_s` or once it has written more than `max_bytes`; a non-zero exit is a SearchError with its stderr."""
    program = command_program(argv)
    if program is None:
        raise SearchError(f"search command {argv[0] if argv else '(none)'!r} is not installed")
    name = os.path.basename(program)
    try:
        process = subprocess.Popen(
            [program, *command_argv(argv, query)[1:]],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except OSError as exc:
        raise SearchError(f"search command {name}: {exc}"[:500]) from None
    out, err = bytearray(), bytearray()
    overflow = threading.Event()

    def drain(stream: Any, into: bytearray, cap: int, stop_at_cap: bool) -> None:
        while chunk := stream.read1(65536):
            room = cap + 1 - len(into)
            into.extend(chunk[: max(room, 0)])
            if len(into) > cap and stop_at_cap:
                overflow.set()
                process.kill()
                return

    readers = [
        threading.Thread(target=drain, args=(process.stdout, out, max_bytes, True), daemon=True),
        threading.Thread(target=drain, args=(process.stderr, err, 4000, False), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        code = process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise SearchError(f"search command {name}: no answer within {timeout_s:g} s") from None
    finally:
        for reader in readers:
            reader.join(timeout=5)
    if overflow.is_set():
        raise SearchError(f"search command {name} wrote more than {max_bytes:,} bytes")
    if code != 0:
        detail = " ".join(err.decode("utf-8", "replace").split())[:300]
        raise SearchError(f"search command {name} exited with {code}: {detail}")
    return parse_results(out.decode("utf-8", "replace"), max_results)
