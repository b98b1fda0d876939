"""A2A throughput (JSON): messages per second into a persona's A2A endpoint, sent by the a2a-sdk's own client to a
real `run.py serve` process (the web app over a fresh data dir, SQLite) on loopback.

  delivered      each message becomes a note from the peer and its task answers at once ("still thinking":
                 `a2a.reply_wait_s` is set to 0.01 s) — the endpoint's own cost: JSON-RPC, card, note stored
  round_trip     each message is answered: a responder in this process writes the persona's reply the moment the
                 note is stored (the PeerManager's `send`, as the persona's `messages.send` would), and the client
                 waits for the completed task — the whole path without a model's thinking time

Each is measured sequentially (one client, one message at a time) and with `--concurrency` clients at once. The
clients are the anonymous caller (loopback, no credential); the endpoint's rate limits and caps on unanswered
messages are lifted for this run (environment), since it measures the path, not the limits.

    python bench/mesh_a2a.py [--messages 200] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import UTC
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(data_dir: Path, port: int, reply_wait_s: float) -> subprocess.Popen[str]:
    log = open(data_dir / "serve.log", "w")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        [sys.executable, "run.py", "serve", "--data-dir", str(data_dir), "--port", str(port)],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "ANIMA_A2A__REPLY_WAIT_S": str(reply_wait_s), **UNLIMITED},
    )


UNLIMITED = {
    "ANIMA_A2A__RATE_PER_MINUTE": "100000",
    "ANIMA_A2A__RATE_TOTAL_PER_MINUTE": "1000000",
    "ANIMA_A2A__OPEN_PER_CALLER": "10000",
    "ANIMA_A2A__OPEN_TOTAL": "100000",
}


def wait_ready(url: str, proc: subprocess.Popen[str], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"run.py serve exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/.well-known/agent-card.json", timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError("run.py serve did not answer")


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


async def send_many(url: str, count: int, concurrency: int, sender: str) -> tuple[float, dict[str, int]]:
    """`count` messages by `concurrency` a2a-sdk clients; (seconds, task states seen)."""
    import httpx
    from a2a.client import ClientConfig, create_client
    from a2a.helpers import new_text_message
    from a2a.types import Role, SendMessageRequest, TaskState

    states: dict[str, int] = {}
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)

    async def worker(n: int) -> None:
        async with httpx.AsyncClient(timeout=60) as http:
            client = await create_client(url, client_config=ClientConfig(streaming=False, httpx_client=http))
            while not queue.empty():
                i = queue.get_nowait()
                message = new_text_message(f"Message {i} from {sender}-{n}.", role=Role.ROLE_USER)
                message.metadata.update({"from": f"{sender}-{n}"})
                async for event in client.send_message(SendMessageRequest(message=message)):
                    state = TaskState.Name(event.task.status.state) if event.HasField("task") else "message"
                    states[state] = states.get(state, 0) + 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(n) for n in range(concurrency)))
    return time.perf_counter() - started, states


def responder(data_dir: Path, stop_event: threading.Event) -> threading.Thread:
    """Answers every waiting A2A task at once, as the persona's messages.send to that peer would."""
    from datetime import datetime

    from managers import ManagerDeps, Managers
    from memory import Database
    from persona.settings import stored_settings

    def run() -> None:
        db = Database.open(data_dir)
        try:
            while not stop_event.is_set():
                with db.unit() as repos:
                    waiting = repos.peers.waiting_all()
                    for row in waiting:
                        Managers(repos, ManagerDeps(settings=stored_settings(db))).peers.send(
                            row.peer_name,
                            f"Answer to note {row.note_id}.",
                            thread_id="main",
                            llm_id=None,
                            now=datetime.now(UTC),
                            note_id=row.note_id,
                        )
                if not waiting:
                    time.sleep(0.002)
        finally:
            db.close()

    thread = threading.Thread(target=run, name="responder", daemon=True)
    thread.start()
    return thread


def measure(kind: str, count: int, concurrency: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="anima-bench-a2a-") as tmp:
        data_dir = Path(tmp)
        port = free_port()
        proc = serve(data_dir, port, reply_wait_s=0.01 if kind == "delivered" else 30.0)
        url = f"http://127.0.0.1:{port}"
        stop_event = threading.Event()
        try:
            wait_ready(url, proc)
            thread = responder(data_dir, stop_event) if kind == "round_trip" else None
            result: dict[str, object] = {}
            for label, clients in (("sequential", 1), (f"concurrent_{concurrency}", concurrency)):
                seconds, states = asyncio.run(send_many(url, count, clients, f"{kind}-{label}"))
                result[label] = {
                    "messages": count,
                    "seconds": round(seconds, 3),
                    "messages_per_s": round(count / seconds, 1),
                    "task_states": states,
                }
                print(f"{kind} {label}: {count / seconds:.1f} msg/s", file=sys.stderr)
            stop_event.set()
            if thread is not None:
                thread.join(timeout=10)
            return result
        finally:
            stop_event.set()
            stop(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    import a2a

    report = {
        "a2a_sdk": getattr(a2a, "__version__", "1.3.0"),
        "transport": "JSON-RPC over HTTP, loopback",
        "server": "run.py serve (SQLite)",
        "cpu_count": os.cpu_count(),
        "delivered": measure("delivered", args.messages, args.concurrency),
        "round_trip": measure("round_trip", args.messages, args.concurrency),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
