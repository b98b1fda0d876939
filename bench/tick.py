"""Tick benchmark (JSON): what one tick costs and where the time goes, with an instant fake LLM at 10k/100k rows
and the real embedding model; on the embedded model, the tick's wall time against the model's own.

    python bench/tick.py [--rows 10000 100000] [--ticks 30] [--embedded-ticks 3]

The split of a tick (medians over the measured ticks):
  embedding_ms      inside the embedding model (novelty, the recall query, the memory index)
  sql_ms            inside the database driver (every statement of the memory SQL, commits included)
  checkpoint_ms     writing LangGraph checkpoints (the saver's own SQLite file)
  llm_ms            inside the (fake, instant) model calls
  orchestration_ms  everything else: the graph, prompt assembly, parsing, reflex bookkeeping
Every tick runs the persona's default settings: reflexes, drives and emotions on.
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

from sqlalchemy import event, insert  # noqa: E402

from graph.agent import build_agent  # noqa: E402
from graph.services import open_services  # noqa: E402
from llm.testing import FakeLLM  # noqa: E402
from memory.retrieval.embeddings import LocalEmbedder  # noqa: E402
from memory.models import Message, Note, Thread  # noqa: E402

TOPICS = ["tides", "lighthouses", "the moon", "sea birds", "storms", "old maps", "salt", "fog", "harbours", "stars"]


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Stopwatch:
    """Accumulated seconds per part of the tick."""

    def __init__(self) -> None:
        self.parts: dict[str, float] = {}

    def add(self, part: str, seconds: float) -> None:
        self.parts[part] = self.parts.get(part, 0.0) + seconds

    def take(self) -> dict[str, float]:
        parts, self.parts = self.parts, {}
        return parts


def timed(watch: Stopwatch, part: str, func):
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            watch.add(part, time.perf_counter() - started)
    return wrapper


def instrument(agent, embedder, fake, watch: Stopwatch) -> None:
    engine = agent.services.db.engine

    @event.listens_for(engine, "before_cursor_execute")
    def _start(conn, cursor, statement, parameters, context, executemany):
        conn.info.setdefault("started", []).append(time.perf_counter())

    @event.listens_for(engine, "after_cursor_execute")
    def _stop(conn, cursor, statement, parameters, context, executemany):
        watch.add("sql", time.perf_counter() - conn.info["started"].pop())

    @event.listens_for(engine, "commit")
    def _commit(conn):
        conn.info["commit_started"] = time.perf_counter()

    embedder.embed = timed(watch, "embedding", embedder.embed)
    fake.complete = timed(watch, "llm", fake.complete)
    saver = agent.checkpointer
    saver.put = timed(watch, "checkpoint", saver.put)
    saver.put_writes = timed(watch, "checkpoint", saver.put_writes)


def seed_rows(services, rows: int) -> None:
    with services.db.session() as s:
        s.merge(Thread(id="main"))
        s.commit()
        batch = 5000
        for start in range(0, rows, batch):
            n = min(batch, rows - start)
            s.execute(insert(Message), [{"thread_id": "main", "tick": 0, "kind": "response",
                                         "content": f"old thought {start + i} about {TOPICS[i % 10]} and light",
                                         "dedup_key": None} for i in range(n)])
            s.execute(insert(Note), [{"text": f"old note {start + i}", "source": "user", "read": True}
                                     for i in range(n)])
            s.commit()


def varied(prompt: str) -> str:
    """A new thought each tick, as a model would write it (with its own Emotions: line every other tick)."""
    n = len(prompt)
    topic, other = TOPICS[n % len(TOPICS)], TOPICS[(n // 7) % len(TOPICS)]
    text = f"Thinking about {topic} today, and how {other} might change them; idea {n} is new to me."
    return text + ("\nEmotions: curiosity:3 (a new idea)" if n % 2 else "")


def repeating(prompt: str) -> str:
    """Nearly the same thought every tick (the workload this bench used before the consent issue): the
    anti-stagnation reflexes fire on every tick."""
    return f"thought number {len(prompt)} about something new"


WORKLOADS = {"varied": varied, "repeating": repeating}


def fake_overhead(rows: int, ticks: int, embedder: LocalEmbedder, workload: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        fake = FakeLLM("fake", responses=WORKLOADS[workload])
        services = open_services(data_dir=tmp, embedded=False, providers={"fake": fake}, embedder=embedder,
                                 entries=[{"id": "fake", "provider": "fake", "priority": 1}])
        progress(f"seeding {rows} messages + {rows} notes…")
        seed_rows(services, rows)
        agent = build_agent("repl", services=services, checkpointer="sqlite")
        watch = Stopwatch()
        instrument(agent, embedder, fake, watch)
        for _ in range(3):  # warm-up: the embedding model loads, caches fill
            agent.tick()
        watch.take()
        totals, split = [], {k: [] for k in ("embedding", "sql", "checkpoint", "llm")}
        calls_before = len(fake.calls)
        for i in range(ticks):
            if workload == "varied" and i % 5 == 0:  # the human writes now and then: drives, recall, the reply
                with services.db.unit() as repos:
                    repos.notes.add(f"What do you think about {TOPICS[i % 10]}?", source="user")
            started = time.perf_counter()
            agent.tick()
            totals.append((time.perf_counter() - started) * 1000)
            parts = watch.take()
            for key in split:
                split[key].append(parts.get(key, 0.0) * 1000)
        calls = len(fake.calls) - calls_before
        agent.close()
        orchestration = [t - sum(split[k][i] for k in split) for i, t in enumerate(totals)]
        median = lambda xs: round(statistics.median(xs), 2)  # noqa: E731
        return {"workload": workload, "rows": rows, "ticks": ticks, "median_ms": median(totals),
                "p95_ms": round(sorted(totals)[int(0.95 * (len(totals) - 1))], 2),
                "split_median_ms": {"orchestration": median(orchestration), "sql": median(split["sql"]),
                                    "embedding": median(split["embedding"]), "checkpoint": median(split["checkpoint"]),
                                    "llm": median(split["llm"])},
                "llm_calls_per_tick": round(calls / ticks, 2)}


def embedded(ticks: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        agent = build_agent("repl", data_dir=tmp, embedded_context_window=4096)
        walls = []
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
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--ticks", type=int, default=30)
    parser.add_argument("--embedded-ticks", type=int, default=3)
    parser.add_argument("--workload", choices=sorted(WORKLOADS), nargs="+", default=sorted(WORKLOADS))
    args = parser.parse_args()
    embedder = LocalEmbedder()
    result = {"fake_llm": [fake_overhead(r, args.ticks, embedder, w) for w in args.workload for r in args.rows]}
    if args.embedded_ticks:
        result["embedded"] = embedded(args.embedded_ticks)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
