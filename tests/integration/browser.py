"""Real-browser helpers: Debian's chromium driven by Playwright (its own browser download is never used), the loop
with its web app as a real `run.py` process, a page of a second origin, screenshots under tests/artifacts/.

Every wait is bounded: the browser's launch, each page action (PAGE_TIMEOUT_MS), the loop's start and its stop."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.fakes.managers import managers_over
from tests.integration.servers import ROOT, free_port

ARTIFACTS = ROOT / "tests" / "artifacts"
BROWSER_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# Hang guards, not timings: a page that works answers at once; on a loaded 2-core CI machine (two workers, a fuzz
# run beside two personas) a page load with its seven static files has taken over 15 s.
PAGE_TIMEOUT_MS = 30_000  # every page action and expectation, unless a test says longer
NAVIGATION_TIMEOUT_MS = 60_000
LAUNCH_TIMEOUT_MS = 30_000
LOOP_START_S = 120.0  # run.py: settings, persona, embedder, agent, then the web app listens
LOOP_STOP_S = 30.0


def chromium_path() -> str | None:
    """Debian's chromium (`make test` installs it when missing)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


def why_no_browser() -> str | None:
    """Why the browser tests cannot run here (None: they can)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[test]')"
    if chromium_path() is None:
        return (
            "no chromium on this machine: `make test` installs it (apt-get install -y chromium, as root or via "
            "sudo); Playwright's own browser download is not used"
        )
    return None


class BrowserHolder:
    """One chromium for the test session, launched on first use. Closed as soon as the next test does not need it:
    Playwright's sync API marks an asyncio loop as running in the main thread, which later tests must not meet."""

    def __init__(self) -> None:
        self._playwright = None
        self._browser = None
        self.failure: str | None = why_no_browser()
        self.launches = 0

    @property
    def is_open(self) -> bool:
        return self._browser is not None

    def get(self):
        if self.failure:
            return None
        if self._browser is None:
            from playwright.sync_api import sync_playwright

            self._playwright = sync_playwright().start()
            try:
                self._browser = self._playwright.chromium.launch(
                    executable_path=chromium_path(), args=BROWSER_ARGS, timeout=LAUNCH_TIMEOUT_MS, headless=True
                )
                self.launches += 1
            except Exception as exc:  # noqa: BLE001 - any launch failure: the browser tests skip, saying why
                self.failure = f"chromium at {chromium_path()} did not start: {type(exc).__name__}: {exc}"[:600]
                self.close()
                return None
        return self._browser

    def close(self) -> None:
        if self._browser is not None:
            with contextlib.suppress(Exception):  # already gone
                self._browser.close()
            self._browser = None
        if self._playwright is not None:
            self._playwright.stop()
            self._playwright = None


def screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True, timeout=PAGE_TIMEOUT_MS)
    return path


# ---- the loop as the human meets it: run.py with its web app ----------------------------------------------------

WORDS = (
    "tide gull harbour lantern moss granite fog kelp compass ember orchard violin glacier comet sparrow attic quartz "
    "meadow ferry ink cedar saffron thunder pebble loom hive lagoon ridge copper dune willow beacon prism marble "
    "nettle otter canyon cobalt juniper tundra falcon opal harvest raven ivory delta wren basalt clover mirage quill "
    "sable thistle umber vellum yarrow zephyr anvil bramble cinder dusk ether flint grove"
)
VERBS = "watches remembers counts folds weighs follows paints hears mends measures carries gathers"


def varied_thoughts(n: int, seed: int = 7) -> list[str]:
    """`n` thoughts unlike each other, so the anti-stagnation reflex does not pause a scripted loop."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = rng.sample(WORDS.split(), 6)
        out.append(
            f"Thought {i}: the {words[0]} {rng.choice(VERBS.split())} the {words[1]} near a {words[2]}; "
            f"perhaps {words[3]} and {words[4]} explain the {words[5]}."
        )
    return out


def send_block(text: str) -> str:
    """An answer carrying a `messages.send` command in the JSON command grammar the parser reads."""
    return (
        "I will answer my human.\n# Commands:\n"
        + json.dumps([{"type": "messages.send", "args": {"text": text}}])
        + "\n# End commands\n"
    )


def script_thoughts(server, *, replies: int = 0, reply: str = "", n: int = 600, seed: int = 7) -> None:
    """Script the scripted server: `replies` answers sending `reply`, then `n` varied thoughts (JSON-asking reflex
    calls take a step too: they read a thought as a bad JSON answer and go on, which is how a real model fails)."""
    steps = [{"do": "whole", "text": send_block(reply)} for _ in range(replies)]
    steps += [{"do": "whole", "text": t} for t in varied_thoughts(n, seed)]
    server.script(*steps, default={"do": "whole", "text": "The last scripted thought, again."})


def seed_pace(data_dir: Path, pause_s: float, thread: str = "main") -> None:
    """The persona's own pause between ticks (what its `cycle.pause` command sets), before its loop starts."""
    from memory import Database

    db = Database.open(data_dir)
    try:
        with db.unit() as repos:
            managers_over(repos).loop.update_cycle(thread, pause_s=pause_s)
    finally:
        db.close()


def http_json(url: str, method: str = "GET", body: Any = None, timeout: float = 30.0) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


@dataclass
class WebLoop:
    url: str
    proc: subprocess.Popen
    data_dir: Path
    log: Path

    def api(self, path: str, method: str = "GET", body: Any = None) -> Any:
        status, data = http_json(self.url + path, method, body)
        assert status < 400, (path, status, data)
        return data

    def status(self) -> dict:
        return self.api("/api/loop")

    def conversation(self) -> list[dict]:
        return self.api("/api/conversation?limit=500")["items"]

    def wait_for(self, predicate, timeout: float, what: str, every: float = 0.5):
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"run.py exited with {self.proc.returncode} while waiting for {what}:\n" + self.tail()
                )
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not within {timeout:.0f} s\n" + self.tail())
            time.sleep(every)

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def stop(self) -> int:
        """Ctrl-C (the loop saves and exits 0); killed if it outlives LOOP_STOP_S."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=LOOP_STOP_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=LOOP_STOP_S)
        return self.proc.returncode


@contextmanager
def web_loop(
    data_dir: Path,
    *,
    llm_url: str | None = None,
    ticks: str = "forever",
    pace_s: float | None = 1.5,
    start_s: float = LOOP_START_S,
    env: dict[str, str] | None = None,
    persona_dir: Path | None = None,
    thinking: str | None = "continuous",
) -> Iterator[WebLoop]:
    """`run.py --ticks … --port <free> --data-dir …` (with `--llm-url … --no-fallback`, or the embedded model), its
    output in a log file (a pipe nobody reads would stall it); yields once the web app answers, stops it after.
    `thinking`: the run's `cycle.thinking` — a persona that thinks on (the pages show its ticks) unless a test asks
    for another mode; None: the persona's own (its defaults: quiet until something arrives)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    if pace_s is not None:
        seed_pace(data_dir, pace_s)
    port = free_port()
    command = [sys.executable, "run.py", "--ticks", ticks, "--data-dir", str(data_dir), "--port", str(port)]
    if llm_url:
        command += ["--llm-url", llm_url, "--model", "scripted", "--no-fallback"]
    if persona_dir is not None:
        command += ["--persona", str(persona_dir)]
    log = data_dir / "run.log"
    mode = {"ANIMA_CYCLE__THINKING": thinking} if thinking else {}
    with open(log, "w") as out:
        proc = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "160", **mode, **(env or {})},
        )
    loop = WebLoop(f"http://127.0.0.1:{port}", proc, data_dir, log)
    try:

        def listening():
            try:
                return http_json(loop.url + "/api/loop", timeout=2)[0] == 200
            except OSError:
                return False

        loop.wait_for(listening, start_s, f"the web app of run.py on port {port}", every=0.3)
        yield loop
    finally:
        loop.stop()


# ---- a page of another origin ----------------------------------------------------------------------------------


@contextmanager
def other_origin(html: str) -> Iterator[str]:
    """A second web server (another port: another origin) serving one page; yields its URL."""
    body = html.encode()

    class Page(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="other-origin", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
