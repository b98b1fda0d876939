"""Finding and checking OpenAI-compatible servers: the local ones on their usual loopback ports, and whether a server
answers with a model before it is added to the registry.

`detect_local()` asks each known port's `/v1/models` with a short timeout (all at once, on threads), so a machine
with nothing running costs a fraction of a second. `check_server()` is the health check before a model is saved:
the server's model list (`GET /models`) must answer, and one short completion of the named model must come back.
Nothing here stores anything; the API key passed in is only sent to that server.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

LOOPBACK = "127.0.0.1"
# (name, port): the servers people run beside a persona, on the ports they listen on by default
KNOWN_LOCAL_SERVERS: tuple[tuple[str, int], ...] = (
    ("Ollama", 11434),
    ("LM Studio", 1234),
    ("llama.cpp server", 8080),
    ("vLLM", 8000),
    ("text-generation-webui", 5000),
    ("KoboldCpp", 5001),
    ("Jan", 1337),
    ("LocalAI", 8081),
)
DETECT_TIMEOUT_S = 0.4
CHECK_TIMEOUT_S = 60.0  # one short completion on a loaded CPU can take a while
CHECK_PROMPT = "Say hello in one word."


@dataclass
class LocalServer:
    """A server found on loopback: what it probably is, where, and the models it lists."""

    name: str
    base_url: str
    models: list[str] = field(default_factory=list)

    @property
    def offer(self) -> str:
        first = self.models[0] if self.models else "a model"
        return f"{self.name} is running with {first} — think with it?"


@dataclass
class ServerCheck:
    """The health check of one server and model: ok, or the reason it is not (for the human)."""

    ok: bool
    models: list[str] = field(default_factory=list)
    reply: str = ""
    error: str = ""


def normalize_base_url(base_url: str) -> str:
    """`http://host:port` or `…/v1`, with or without a trailing slash: the API root (ends in /v1 unless the URL
    already names a path)."""
    url = base_url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"base_url must start with http:// or https://, not {base_url!r}")
    rest = url.split("://", 1)[1]
    if "/" not in rest:
        url += "/v1"
    return url


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _model_ids(body: Any) -> list[str]:
    """The ids of an OpenAI `/models` answer (Ollama's and LM Studio's are the same shape)."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise ValueError("the answer to /models has no `data` list")
    return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")]


def list_models(base_url: str, api_key: str | None = None, timeout: float = 5.0) -> list[str]:
    """The model ids a server lists; raises httpx errors or ValueError."""
    import httpx

    answer = httpx.get(normalize_base_url(base_url) + "/models", headers=_headers(api_key), timeout=timeout)
    answer.raise_for_status()
    return _model_ids(answer.json())


def _probe(name: str, port: int, host: str, timeout: float) -> LocalServer | None:
    base_url = f"http://{host}:{port}/v1"
    try:
        return LocalServer(name=name, base_url=base_url, models=list_models(base_url, timeout=timeout))
    except Exception:  # noqa: BLE001 - nothing there, or not an OpenAI-compatible server: not offered
        return None


def detect_local(
    servers: tuple[tuple[str, int], ...] = KNOWN_LOCAL_SERVERS, host: str = LOOPBACK, timeout: float = DETECT_TIMEOUT_S
) -> list[LocalServer]:
    """The OpenAI-compatible servers answering on loopback, with their models, in the order of `servers`."""
    if not servers:
        return []
    with ThreadPoolExecutor(max_workers=len(servers)) as pool:
        found = list(pool.map(lambda s: _probe(s[0], s[1], host, timeout), servers))
    return [server for server in found if server is not None]


def check_server(
    base_url: str, model: str, api_key: str | None = None, timeout: float = CHECK_TIMEOUT_S
) -> ServerCheck:
    """The health check before a model is added: its model list, then one short chat completion of `model`."""
    import httpx

    try:
        root = normalize_base_url(base_url)
    except ValueError as exc:
        return ServerCheck(ok=False, error=str(exc))
    try:
        models = list_models(root, api_key, timeout=min(timeout, 10.0))
    except httpx.HTTPStatusError as exc:
        status = exc.response.status_code
        why = "the API key was refused" if status in (401, 403) else f"it answered {status}"
        return ServerCheck(ok=False, error=f"{root}/models: {why}")
    except Exception as exc:  # noqa: BLE001 - unreachable, not JSON, not a model list: told to the human
        return ServerCheck(
            ok=False,
            error=f"{root}/models did not answer as an OpenAI-compatible server: {type(exc).__name__}: {exc}"[:500],
        )
    body = {
        "model": model,
        "messages": [{"role": "user", "content": CHECK_PROMPT}],
        "max_tokens": 8,
        "temperature": 0.0,
        "stream": False,
    }
    try:
        answer = httpx.post(root + "/chat/completions", json=body, headers=_headers(api_key), timeout=timeout)
        if answer.status_code >= 400:
            return ServerCheck(
                ok=False,
                models=models,
                error=f"a short completion of {model!r} failed: {answer.status_code} {answer.text[:300]}",
            )
        choices = answer.json().get("choices") or []
        message = choices[0].get("message") or {} if choices else {}
        reply = str(message.get("content") or choices[0].get("text") or "") if choices else ""
    except Exception as exc:  # noqa: BLE001 - a timeout or a body that is not a completion
        return ServerCheck(
            ok=False, models=models, error=f"a short completion of {model!r} failed: {type(exc).__name__}: {exc}"[:500]
        )
    if not choices:
        return ServerCheck(ok=False, models=models, error=f"a short completion of {model!r} came back empty")
    return ServerCheck(ok=True, models=models, reply=reply.strip()[:200])
