"""Tick benchmark (JSON): orchestration overhead with an instant fake LLM at 10k/100k rows, and on the
embedded model the ratio of tick wall time to the model's own generation time; LLM calls/tokens per tick.

    python bench/tick.py [--rows 10000 100000] [--ticks 30] [--embedded-ticks 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import insert  # noqa: E402

from graph.agent import build_agent  # noqa: E402
from graph.services import RunOptions, open_services  # noqa: E402
from llm.testing import FakeLLM  # noqa: E402
from memory.models import Message, Note, Thread  # noqa: E402


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def seed_rows(services, rows: int) -> None:
    with services.db.session() as s:
        s.merge(Thread(id="main"))
        s.commit()
        batch = 5000
        for start in range(0, rows, batch):
            n = min(batch, rows - start)
            s.execute(insert(Message), [{"thread_id": "main", "tick": 0, "kind": "response",
                                         "content": f"old thought {start + i} about tides and light", "dedup_key": None}
                                        for i in range(n)])
            s.execute(insert(Note), [{"text": f"old note {start + i}", "source": "user", "read": True}
                                     for i in range(n)])
            s.commit()


def fake_overhead(rows: int, ticks: int, durability_note: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        fake = FakeLLM("fake", responses=lambda p: f"thought number {len(p)} about something new")
        services = open_services(RunOptions(data_dir=tmp, embedded=False), providers={"fake": fake},
                                 entries=[{"id": "fake", "provider": "fake", "priority": 1}])
        progress(f"seeding {rows} messages + {rows} notes…")
        seed_rows(services, rows)
        agent = build_agent("repl", services=services, data_dir=tmp, checkpointer="sqlite")
        agent.tick()  # warm-up
        times = []
        for i in range(ticks):
            started = time.perf_counter()
            agent.tick()
            times.append((time.perf_counter() - started) * 1000)
        with services.db.unit() as repos:
            totals = repos.llm_calls.totals("main")
        agent.close()
        return {"rows": rows, "ticks": ticks, "median_ms": round(statistics.median(times), 2),
                "p95_ms": round(sorted(times)[int(0.95 * (len(times) - 1))], 2),
                "llm_calls_per_tick": round(totals["calls"] / (ticks + 1), 2), "checkpointer": durability_note}


def embedded(ticks: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        agent = build_agent("repl", data_dir=tmp, embedded_context_window=4096)
        walls, llm_ms = [], []
        for i in range(ticks):
            progress(f"embedded tick {i + 1}/{ticks}…")
            started = time.perf_counter()
            state = agent.tick()
            walls.append((time.perf_counter() - started) * 1000)
        with agent.services.db.unit() as repos:
            rows = repos.ticks.recent(ticks)
            calls = repos.llm_calls.totals("main")
        agent.close()
        llm_ms = [t.llm_ms for t in rows]
        return {"ticks": ticks, "median_tick_ms": round(statistics.median(walls), 1),
                "median_llm_ms": round(statistics.median(llm_ms), 1),
                "tick_to_llm_ratio": round(sum(walls) / sum(llm_ms), 3),
                "llm_calls_per_tick": round(calls["calls"] / ticks, 2),
                "prompt_tokens_per_tick": round(calls["prompt_tokens"] / ticks, 1),
                "completion_tokens_per_tick": round(calls["completion_tokens"] / ticks, 1),
                "last_tokens_per_s": (state.get("llm") or {}).get("tokens_per_s")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--ticks", type=int, default=30)
    parser.add_argument("--embedded-ticks", type=int, default=3)
    args = parser.parse_args()
    result = {"fake_llm": [fake_overhead(r, args.ticks, "SqliteSaver, durability=sync (checkpoint after every step)")
                           for r in args.rows]}
    if args.embedded_ticks:
        result["embedded"] = embedded(args.embedded_ticks)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
