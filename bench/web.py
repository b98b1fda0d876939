"""Web benchmark (JSON): how fast the loop's steps reach a live client, and how fast the Talk page loads.

    python bench/web.py [--ticks 12] [--pause-s 0.2] [--page-loads 30] [--browser-loads 10] [--messages 100]

sse      the latency from a node finishing (its journal event's `at`, stamped as the step's update reaches the
         loop's stream listener) to the event arriving at an SSE client of /api/events, over a real uvicorn server
         (the app in a thread beside the loop, as `run.py` runs it) — the loop is an in-process persona on an instant
         FakeLLM writing through the LiveJournal, the client is httpx streaming in another thread. Goal: p95 ≤ 250 ms.
talk     GET / with `--messages` in the conversation: the server's time (httpx, sequential), and, when chromium is
         on this machine, the browser's DOMContentLoaded and load (Navigation Timing, from navigation start).
Progress goes to stderr, the JSON to stdout.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from graph.agent import build_agent
from graph.loop import Stopper, run_loop
from graph.loop.journal import LiveJournal
from graph.services import open_services
from persona.settings import Overrides
from tests.fakes.llm import FakeLLM
from tests.fakes.memory import HashEmbedder
from web.server import start_in_thread

GOAL_P95_MS = 250.0
BROWSER_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentiles(values: list[float]) -> dict[str, float | int]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)

    def pick(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))], 1)

    return {
        "n": len(ordered),
        "p50_ms": pick(0.5),
        "p95_ms": pick(0.95),
        "max_ms": round(ordered[-1], 1),
        "mean_ms": round(statistics.fmean(ordered), 1),
    }


class SSEClient(threading.Thread):
    """Reads /api/events and stamps each event's arrival."""

    def __init__(self, url: str) -> None:
        super().__init__(name="sse-client", daemon=True)
        self.url = url
        self.latencies_ms: list[float] = []
        self.kinds: dict[str, int] = {}
        self.ready = threading.Event()
        self.stop = threading.Event()
        self.error: str | None = None

    def run(self) -> None:
        try:
            with (
                httpx.Client(timeout=httpx.Timeout(10.0, read=30.0)) as client,
                client.stream("GET", self.url, headers={"Accept": "text/event-stream"}) as response,
            ):
                response.raise_for_status()
                self.ready.set()
                for line in response.iter_lines():
                    if self.stop.is_set():
                        return
                    if not line.startswith("data:"):
                        continue
                    arrived = time.time()
                    event = json.loads(line[5:].strip())
                    if event.get("kind") == "keepalive" or not event.get("at"):
                        continue
                    at = datetime.fromisoformat(event["at"]).timestamp()
                    self.latencies_ms.append((arrived - at) * 1000.0)
                    self.kinds[event["kind"]] = self.kinds.get(event["kind"], 0) + 1
        except Exception as exc:  # noqa: BLE001 - reported in the JSON
            if not self.stop.is_set():
                self.error = f"{type(exc).__name__}: {exc}"
            self.ready.set()


def make_agent(data_dir: Path):
    fake = FakeLLM("fake")
    services = open_services(
        data_dir=str(data_dir),
        embedded=False,
        providers={"fake": fake},
        entries=[{"id": "fake", "provider": "fake", "priority": 100}],
        embedder=HashEmbedder(),
    )
    return build_agent("repl", services=services, data_dir=str(data_dir), checkpointer="memory", thread_id="main")


def bench_sse(agent, url: str, ticks: int, pause_s: float, min_events: int) -> dict:
    client = SSEClient(url + "/api/events")
    client.start()
    client.ready.wait(15)
    if client.error:
        return {"error": client.error}
    time.sleep(0.3)  # the stream's cursor is set: every event journaled from now on is delivered
    journal = LiveJournal(agent.services.db, agent.thread_id)
    sent, rounds = 0, 0
    try:
        while rounds == 0 or (sent < min_events and rounds < 5):
            rounds += 1
            progress(f"sse: {ticks} tick(s) with the journal on (round {rounds})…")
            for _ in range(ticks):
                run_loop(agent, 1, stopper=Stopper(), on_stream=journal, autonomy=False)
                if pause_s:
                    time.sleep(pause_s)
            time.sleep(0.2)  # the journal's writer flushes
            sent = len_events(agent)
    finally:
        journal.close()
    deadline = time.monotonic() + 10
    while len(client.latencies_ms) < sent and time.monotonic() < deadline:
        time.sleep(0.05)
    client.stop.set()
    result = {**percentiles(client.latencies_ms), "journaled": sent, "kinds": client.kinds, "goal_p95_ms": GOAL_P95_MS}
    result["meets_goal"] = bool(client.latencies_ms) and result["p95_ms"] <= GOAL_P95_MS
    return result


def len_events(agent) -> int:
    with agent.services.db.unit() as repos:
        return len(repos.live_events.after(0, 100_000))


def seed_conversation(agent, messages: int) -> None:
    with agent.services.db.unit() as repos:
        for i in range(messages):
            if i % 2 == 0:
                repos.notes.add(
                    f"Note {i} from the human: what do you make of the tide tables this week?", source="user"
                )
            else:
                repos.notes.add(
                    f"Reply {i}: the tides run late; I keep a list of the gulls that come back.",
                    source="llm",
                    tags=["outgoing"],
                )


def bench_talk_http(url: str, loads: int) -> dict:
    times = []
    with httpx.Client(timeout=30.0) as client:
        client.get(url + "/")  # warm: templates compiled, persona read
        for _ in range(loads):
            started = time.perf_counter()
            answer = client.get(url + "/")
            times.append((time.perf_counter() - started) * 1000.0)
            answer.raise_for_status()
        size = len(answer.content)
    return {**percentiles(times), "bytes": size}


def bench_talk_browser(url: str, loads: int) -> dict:
    chromium = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if chromium is None:
        return {"skipped": "no chromium on this machine (make test installs it)"}
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return {"skipped": "playwright is not installed"}
    dcl, load = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=BROWSER_ARGS, timeout=30_000)
        try:
            context = browser.new_context()
            page = context.new_page()
            page.set_default_timeout(15_000)
            page.goto(url + "/", wait_until="load")  # warm: the static files cached, as for a human's next visit
            for _ in range(loads):
                page.goto(url + "/", wait_until="load")
                timing = page.evaluate("""() => { const n = performance.getEntriesByType('navigation')[0];
                    return {dcl: n.domContentLoadedEventEnd - n.startTime, load: n.loadEventEnd - n.startTime}; }""")
                dcl.append(timing["dcl"])
                load.append(timing["load"])
            items = page.locator("#conversation .bubble").count()
        finally:
            browser.close()
    return {"dom_content_loaded": percentiles(dcl), "load": percentiles(load), "bubbles_shown": items}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=12)
    parser.add_argument("--pause-s", type=float, default=0.2, help="between ticks, as a paced loop")
    parser.add_argument("--min-events", type=int, default=50)
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--page-loads", type=int, default=30)
    parser.add_argument("--browser-loads", type=int, default=10)
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="anima-bench-web-"))
    agent = make_agent(data_dir)
    port = free_port()
    web = start_in_thread(Overrides.of(data_dir=str(data_dir)), "127.0.0.1", port)
    progress(f"web app at {web.url} over {data_dir}")
    try:
        sse = bench_sse(agent, web.url, args.ticks, args.pause_s, args.min_events)
        progress(f"sse: {sse}")
        seed_conversation(agent, args.messages)
        progress(f"talk: {args.page_loads} GET / with {args.messages} messages…")
        http = bench_talk_http(web.url, args.page_loads)
        progress(f"talk: {args.browser_loads} browser loads…")
        try:
            browser = bench_talk_browser(web.url, args.browser_loads)
        except Exception as exc:  # noqa: BLE001 - the browser part is optional
            browser = {"skipped": f"{type(exc).__name__}: {exc}"[:300]}
    finally:
        web.stop()
        agent.close()
        shutil.rmtree(data_dir, ignore_errors=True)
    print(
        json.dumps(
            {"sse_event_latency": sse, "talk_page": {"messages": args.messages, "http_get": http, "browser": browser}},
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
