"""The A2A Technology Compatibility Kit (a2aproject/a2a-tck, branch 1.0-dev, vendored in tests/vendor/a2a-tck) run
against a persona as served: `run.py serve` (the web app alone, the real A2A endpoint) over a fresh data dir, with
the TCK's scenarios driving the persona's replies.

The TCK sends messages whose `messageId` starts with a scenario's prefix (`tck-complete-task`, `tck-artifact-data`,
`tck-input-required`, …: tests/vendor/a2a-tck/scenarios, summarized in SCENARIOS below) and checks that the agent
answers that way. A persona answers by thinking; here a responder in this test process stands in for its thinking:
it watches the persona's database for A2A tasks waiting for an answer and writes the reply the scenario asks for
through the persona's own PeerManager (`peers.send`: the very call the persona's `messages.send` makes, with `ask`,
`decline`, `plain`, `data`, `file`). Nothing in the product knows the TCK; the endpoint, the task store, the caps and
the credentials are the ones every caller meets (the TCK is the anonymous caller: it presents no credential, and the
app listens on loopback). Only the endpoint's rate limits and caps are raised for the run (in the persona's
config.yaml), since the TCK sends a few hundred requests in a minute.

The TCK's requirements (pytest, grpcio, jsonschema, …, pinned in tests/vendor/a2a-tck/requirements.lock) clash with
nothing of ours but are not ours to carry: they live in their own venv, ~/.cache/anima/a2a-tck (`make a2a-tck`, or
built here on first use).
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from tests.fakes.managers import managers_over
from tests.integration.servers import ROOT, served_web_app

TCK_DIR = ROOT / "tests" / "vendor" / "a2a-tck"
VENV = Path(os.path.expanduser("~/.cache/anima/a2a-tck"))
LOCK = TCK_DIR / "requirements.lock"
INSTALL_TIMEOUT_S = 900
RUN_TIMEOUT_S = 420  # the whole TCK against the persona: about a minute here; a hang guard, not a timing
RESUBSCRIBE_DELAY_S = 4.0  # the scenario's "wait for 2x streaming timeout" (the TCK's streaming timeout is 2 s)


@dataclass(frozen=True)
class Reply:
    """What the persona answers to a scenario: its words and how (managers/peers.py `send`)."""

    text: str
    kind: str = "answer"
    parts: tuple[dict[str, Any], ...] = ()
    delay_s: float = 0.0


# The scenarios of tests/vendor/a2a-tck/scenarios/*.feature, by messageId prefix (the longest prefix wins): one line
# per scenario, so a new scenario is one line here.
SCENARIOS: dict[str, Reply] = {
    "tck-complete-task": Reply("Hello from TCK"),
    "tck-artifact-text": Reply("Generated text content"),
    "tck-artifact-file": Reply(
        "The file.", parts=({"kind": "file", "name": "output.txt", "media_type": "text/plain", "text": "tck"},)
    ),
    "tck-artifact-file-url": Reply(
        "The file's address.",
        parts=(
            {"kind": "file", "name": "output.txt", "media_type": "text/plain", "url": "https://example.com/output.txt"},
        ),
    ),
    "tck-artifact-data": Reply(
        "The data.", parts=({"kind": "data", "name": "data", "data": {"key": "value", "count": 42}},)
    ),
    "tck-message-response": Reply("Direct message response", kind="plain"),
    "tck-input-required": Reply("Which input do you mean?", kind="question"),
    "tck-reject-task": Reply("rejected", kind="decline"),
    "tck-stream-001": Reply("Stream hello from TCK"),
    "tck-stream-002": Reply("Stream message-only response"),
    "tck-stream-003": Reply("Stream task lifecycle"),
    "tck-stream-ordering-001": Reply("Ordered output"),
    "tck-stream-artifact-text": Reply("Streamed text content"),
    "tck-stream-artifact-file": Reply(
        "The file.", parts=({"kind": "file", "name": "output.txt", "media_type": "text/plain", "text": "tck"},)
    ),
    "tck-stream-artifact-chunked": Reply("chunk-1 chunk-2"),
    "test-resubscribe-message-id": Reply("Done, after a while.", delay_s=RESUBSCRIBE_DELAY_S),
}


def scenario_reply(message_id: str) -> Reply:
    """The reply a scenario asks for; a message of no scenario is answered plainly (the SUT's default: complete)."""
    matches = [prefix for prefix in SCENARIOS if message_id.startswith(prefix)]
    if matches:
        return SCENARIOS[max(matches, key=len)]
    return Reply(f"Unhandled messageId prefix: {message_id}")


def tck_python() -> Path:
    """The TCK venv's python (built from the lock when missing or stale); RuntimeError saying why it cannot be."""
    python = VENV / "bin" / "python"
    stamp = VENV / ".installed"
    lock = LOCK.read_text()
    if python.exists() and stamp.exists() and stamp.read_text() == lock:
        return python
    interpreter = shutil.which("python3.11") or sys.executable
    subprocess.run([interpreter, "-m", "venv", "--clear", str(VENV)], check=True, timeout=120)
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "-r", str(LOCK)],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
    )
    if done.returncode != 0:
        raise RuntimeError(f"installing the A2A TCK's requirements failed: {done.stderr[-800:]}")
    stamp.write_text(lock)
    return python


class Responder:
    """Stands in for the persona's thinking while the TCK runs: each A2A task waiting for an answer gets the reply
    its scenario asks for, written by the persona's PeerManager (as `messages.send` would). Counts what it answered."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.answered: collections.Counter[str] = collections.Counter()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._due: dict[int, float] = {}  # inbound row → when its delayed reply is due
        self._thread = threading.Thread(target=self._run, name="tck-responder", daemon=True)

    def __enter__(self) -> Responder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        from memory import Database

        db = Database.open(self.data_dir)
        try:
            while not self._stop.is_set():
                with db.unit(actor="persona") as repos:
                    waiting = repos.peers.waiting_all(limit=200)
                    for row in waiting:
                        reply = scenario_reply(row.message_id or "")
                        due = self._due.setdefault(row.id, time.monotonic() + reply.delay_s)
                        if time.monotonic() < due:
                            continue
                        try:
                            managers_over(repos).peers.send(
                                row.peer_name,
                                reply.text,
                                thread_id="main",
                                llm_id=None,
                                now=datetime.now(UTC),
                                kind=reply.kind,
                                parts=reply.parts,
                                note_id=row.note_id,
                            )
                            self.answered[reply.kind] += 1
                        except Exception as exc:  # noqa: BLE001 - reported by the test, the responder goes on
                            self.errors.append(f"{row.message_id}: {exc}")
                self._stop.wait(0.02)
        finally:
            db.close()


def persona_for_tck(base: Path) -> Path:
    """The shipped persona, its A2A limits raised for the TCK's pace (a few hundred requests in a minute)."""
    target = base / "persona-tck"
    shutil.copytree(ROOT / "persona" / "default", target)
    config_path = target / "config.yaml"
    config = yaml.safe_load(config_path.read_text()) or {}
    config["a2a"] = {
        **(config.get("a2a") or {}),
        "rate_per_minute": 100_000,
        "rate_total_per_minute": 100_000,
        "open_per_caller": 1000,
        "open_total": 1000,
        "reply_wait_s": 20,
    }
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    return target


@contextmanager
def persona_under_tck(base: Path) -> Iterator[tuple[str, Responder]]:
    """`run.py serve` over a fresh data dir and the responder: (its URL, the responder)."""
    data_dir = base / "data"
    with served_web_app(data_dir, persona_for_tck(base)) as url, Responder(data_dir) as responder:
        yield url, responder


def run_tck(url: str, reports: Path, *, level: str | None = None, timeout_s: float = RUN_TIMEOUT_S) -> dict[str, Any]:
    """Run the TCK (its own venv) against `url`; its compatibility report (JSON), with pytest's output."""
    reports.mkdir(parents=True, exist_ok=True)
    command = [
        str(tck_python()),
        "-m",
        "pytest",
        "tests/compatibility/",
        f"--sut-host={url}",
        "-q",
        "--tb=line",
        "-p",
        "no:cacheprovider",
        f"--compatibility-report={reports / 'compatibility'}",
        f"--junitxml={reports / 'junit.xml'}",
    ]
    if level:
        command += ["-m", level]
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(command, cwd=TCK_DIR, capture_output=True, text=True, timeout=timeout_s, env=env)
    (reports / "pytest.txt").write_text(done.stdout + done.stderr)
    report_path = reports / "compatibility.json"
    if not report_path.exists():
        raise RuntimeError(f"the TCK wrote no report (exit {done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    report = json.loads(report_path.read_text())
    report["pytest_tail"] = (done.stdout + done.stderr)[-1500:]
    return report


def counts(report: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Requirements by level (MUST, SHOULD, MAY) and status (pass, fail, skipped, not tested)."""
    table: dict[str, dict[str, int]] = {}
    for requirement in report["per_requirement"].values():
        status = str(requirement["status"]).lower().replace(" ", "_")
        level = table.setdefault(str(requirement["level"]), {})
        level[status] = level.get(status, 0) + 1
    return table


def failures(report: dict[str, Any], level: str | None = None) -> dict[str, str]:
    """The failed requirements (of one level): id → the first error."""
    return {
        rid: (r["errors"] or ["no detail"])[0][:400]
        for rid, r in report["per_requirement"].items()
        if str(r["status"]).upper() == "FAIL" and (level is None or r["level"] == level)
    }


__all__ = [
    "SCENARIOS",
    "Responder",
    "counts",
    "failures",
    "persona_under_tck",
    "run_tck",
    "scenario_reply",
    "tck_python",
]
