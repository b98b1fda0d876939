"""An A2A agent that is not ours, for the interoperability test: tests/interop/a2a-js-agent, built on the official
JavaScript SDK (@a2a-js/sdk, pinned with its package-lock.json) — `agent.mjs` serves an agent over JSON-RPC (express),
`ask.mjs` is the SDK's client. Installed with `npm ci` into ~/.cache/anima/a2a-js (`make a2a-js`, or here on first
use; node and npm are the machine's), never into the repository."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.integration.servers import ROOT, free_port, wait_http

SOURCE = ROOT / "tests" / "interop" / "a2a-js-agent"
CACHE = Path(os.path.expanduser("~/.cache/anima/a2a-js"))
FILES = ("package.json", "package-lock.json", "agent.mjs", "ask.mjs")
INSTALL_TIMEOUT_S = 600
START_TIMEOUT_S = 60
ASK_TIMEOUT_S = 180


def js_agent_dir() -> Path:
    """~/.cache/anima/a2a-js with the agent's files and its node_modules (`npm ci` when the lockfile changed);
    RuntimeError saying why it cannot be."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise RuntimeError("node and npm are needed for the JavaScript A2A agent (apt-get install nodejs npm)")
    CACHE.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        shutil.copyfile(SOURCE / name, CACHE / name)
    lock = (SOURCE / "package-lock.json").read_text()
    stamp = CACHE / ".installed"
    if not (CACHE / "node_modules").is_dir() or not stamp.exists() or stamp.read_text() != lock:
        done = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund"],
            cwd=CACHE,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
        )
        if done.returncode != 0:
            raise RuntimeError(f"npm ci for the JavaScript A2A agent failed: {done.stderr[-800:]}")
        stamp.write_text(lock)
    return CACHE


@dataclass
class JsAgent:
    url: str
    name: str
    log: Path

    def events(self) -> list[dict[str, Any]]:
        """What the agent took and refused (its JSON lines)."""
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return [json.loads(line) for line in lines if line.startswith("{")]


@contextmanager
def js_agent(name: str, token: str, log_dir: Path) -> Iterator[JsAgent]:
    """`node agent.mjs` on a free loopback port, taking calls with `token` only; stopped after."""
    where = js_agent_dir()
    port = free_port()
    log = log_dir / f"{name}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            ["node", "agent.mjs", str(port), name, token], cwd=where, stdout=out, stderr=subprocess.STDOUT, text=True
        )
    try:
        wait_http(f"http://127.0.0.1:{port}/.well-known/agent-card.json", START_TIMEOUT_S, proc)
        yield JsAgent(f"http://127.0.0.1:{port}", name, log)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def js_ask(url: str, token: str | None, text: str, timeout_s: float = ASK_TIMEOUT_S) -> dict[str, Any]:
    """The JavaScript SDK's client sends `text` to the agent at `url`: what it got back (task, message or error)."""
    done = subprocess.run(
        ["node", "ask.mjs", url, token or "", text, str(int(timeout_s * 1000))],
        cwd=js_agent_dir(),
        capture_output=True,
        text=True,
        timeout=timeout_s + 30,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"ask.mjs printed nothing (exit {done.returncode}): {done.stderr[-800:]}")
    return json.loads(lines[-1])


__all__ = ["JsAgent", "js_agent", "js_agent_dir", "js_ask"]
