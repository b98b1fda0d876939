"""Channels benchmark (JSON): a message in over Matrix → a note → a tick with the instant fake LLM → the reply out
in the room, against a real Synapse (tests/integration/synapse_server.py: its own venv, loopback, SQLite).

Printed: `latency_ms` p50/p95 (the human's send → the reply seen in the room), its parts (`in_ms`: send → note
recorded; `tick_ms`; `out_ms`: tick done → reply seen), `messages_per_s` (sequential round trips) and the
runner's outbox figures. One warm-up tick runs first. `out_ms` includes the runner's outbox poll (0.25 s at most)
and the human client's own 20 ms poll of the room.

    python bench/channels.py [--messages 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from channels.runner import ChannelRunner  # noqa: E402
from graph.agent import build_agent  # noqa: E402
from graph.services import open_services  # noqa: E402
from managers import Managers  # noqa: E402
from tests.fakes.llm import FakeLLM  # noqa: E402
from tests.fakes.memory import HashEmbedder  # noqa: E402
from tests.integration.matrix_human import MatrixHuman  # noqa: E402
from tests.integration.matrix_sender import matrix_settings  # noqa: E402
from tests.integration.synapse_server import synapse_server  # noqa: E402

PASSWORD = "anima-bench"


def reply_to(prompt: str) -> str:
    """The instant model: a thought that answers the latest question it was shown with messages.send."""
    asked = prompt.rsplit("question #", 1)[-1].split()[0] if "question #" in prompt else "?"
    return (f"Someone asked me something; I answer at once.\n# Commands:\n"
            f'[{{"cmd_id": "r1", "type": "messages.send", "args": {{"text": "answer #{asked}"}}}}]\n# End commands')


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))], 1)


def wait(check, timeout_s: float = 60, poll_s: float = 0.02):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(poll_s)
    raise TimeoutError(f"{check} within {timeout_s}s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, synapse_server(Path(tmp) / "synapse") as server:
        anima, ada_id = server.register("anima", PASSWORD), server.register("ada", "ada-pw")
        os.environ["MATRIX_TEST_PASSWORD"] = PASSWORD
        fake = FakeLLM("fake", responses=reply_to)
        services = open_services(data_dir=str(Path(tmp) / "data"), embedded=False, providers={"fake": fake},
                                 entries=[{"id": "fake", "provider": "fake", "priority": 1}], embedder=HashEmbedder())
        agent = build_agent("repl", services=services, data_dir=str(Path(tmp) / "data"), checkpointer="memory")
        db = services.db
        with db.unit() as repos:
            people = Managers(repos).people
            people.add_identity(people.owner().id, "matrix", ada_id)
        runner = ChannelRunner(db, matrix_settings(server.url, anima, poll_wait_s=5)).start()
        loop = asyncio.new_event_loop()
        try:
            ada = loop.run_until_complete(MatrixHuman(server.url, ada_id, "ada-pw").__aenter__())
            room = loop.run_until_complete(ada.room_with(anima))
            loop.run_until_complete(ada.wait_member(room, anima))
            agent.tick()  # warm-up: the graph's first run, caches (not measured)
            total, ins, ticks, outs = [], [], [], []
            started_all = time.perf_counter()
            for i in range(args.messages):
                with db.unit() as repos:
                    seen = repos.notes.newest_id()
                sent = time.perf_counter()
                loop.run_until_complete(ada.say(room, f"question #{i} — what do you think?"))

                def arrived(after: int = seen):
                    with db.unit() as repos:
                        return [n for n in repos.notes.list(after_id=after) if n.source == "channel"]

                wait(arrived)
                noted = time.perf_counter()
                agent.tick()
                ticked = time.perf_counter()
                loop.run_until_complete(ada.wait_message(room, anima, f"answer #{i}", timeout_s=60,
                                                           poll_s=0.02))
                seen_at = time.perf_counter()
                total.append((seen_at - sent) * 1000)
                ins.append((noted - sent) * 1000)
                ticks.append((ticked - noted) * 1000)
                outs.append((seen_at - ticked) * 1000)
            elapsed = time.perf_counter() - started_all
            with db.unit() as repos:
                rows = Managers(repos).channels.outbox(limit=10_000)
            loop.run_until_complete(ada.__aexit__(None, None, None))
        finally:
            runner.stop()
            loop.close()
            db.close()
    print(json.dumps({
        "bench": "channels", "transport": "matrix (Synapse on loopback, matrix-nio)", "llm": "instant fake",
        "messages": args.messages,
        "latency_ms": {"p50": percentile(total, 0.5), "p95": percentile(total, 0.95)},
        "in_ms": {"p50": percentile(ins, 0.5), "p95": percentile(ins, 0.95)},
        "tick_ms": {"p50": percentile(ticks, 0.5), "p95": percentile(ticks, 0.95)},
        "out_ms": {"p50": percentile(outs, 0.5), "p95": percentile(outs, 0.95)},
        "messages_per_s": round(args.messages / elapsed, 2),
        "outbox": {"sent": sum(r.state == "sent" for r in rows), "failed": sum(r.state == "failed" for r in rows),
                   "attempts_max": max((r.attempts for r in rows), default=0)},
        "mean_latency_ms": round(statistics.mean(total), 1),
    }, indent=2))


if __name__ == "__main__":
    main()
