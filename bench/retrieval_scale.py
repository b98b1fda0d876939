"""Hybrid retrieval at scale: indexing rate, query latency warm and while a tick writes, the first query after a
restart, and peak memory, at 10k and 100k memories.

Memories are real, distinct texts: each is a LoCoMo dialog turn joined with a sentence of another turn,
written through `memory.store.record_turn` (20 turns per episode, two authors), their full-text documents in
the same transaction, and embedded with the real model into Chroma (`MemoryIndex.sync`, timed: the indexing
rate). Queries are LoCoMo questions, searched with `MemoryIndex.search` exactly as auto_recall does:
- warm: once the background copy of the vectors into memory is done;
- while ingesting: another thread writes memories at a tick's rate (`--tick-writes` every `--tick-seconds`)
  and syncs the index after each write, as the loop does;
- after a restart: a new process opens the same stores and searches; the time from opening the index to the
  first results includes loading the embedding model and opening Chroma (Python's own imports are reported
  apart), then the next queries while the vectors are still being copied in the background.
Each size runs in its own process so the peak RSS (ru_maxrss) belongs to that size alone.

    python bench/retrieval_scale.py --sizes 10000 100000 --queries 200
Progress goes to stderr; one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

STARTED = time.perf_counter()
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_DATA = ROOT.parent / "shared/data/locomo/locomo_dev.json"
START = datetime(2024, 1, 1, tzinfo=timezone.utc)


def corpus(data: Path) -> tuple[list[tuple[str, str]], list[str]]:
    samples = json.loads(data.read_text())
    turns, questions = [], []
    for sample in samples:
        for key, value in sample["conversation"].items():
            if key.startswith("session_") and isinstance(value, list):
                turns += [(t.get("speaker", ""), t.get("text", "")) for t in value if t.get("text")]
        questions += [str(q["question"]) for q in sample["qa"] if q.get("category") != 5]
    return turns, questions


def memories(turns: list[tuple[str, str]], start: int, count: int, seed: int = 1):
    from memory.text import sentences

    rng = random.Random(seed * 1_000_003 + start)
    pieces = [s for _, text in turns for s in sentences(text)] or ["…"]
    for n in range(start, start + count):
        speaker, text = turns[n % len(turns)]
        yield n, speaker, f"{text} {rng.choice(pieces)}"


def write(db, turns, start: int, count: int) -> None:
    from memory.store import record_turn

    with db.unit() as repos:
        for n, speaker, text in memories(turns, start, count):
            record_turn(repos, ref=str(n), text=text, author=speaker, episode=f"e{n // 20}",
                        created_at=START + timedelta(minutes=n))


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))] if ordered else 0.0


def timed_queries(index, questions: list[str], label: str) -> list[float]:
    from memory.retrieval.index import Query

    latencies = []
    for number, question in enumerate(questions, 1):
        t0 = time.perf_counter()
        hits = index.search(Query(text=question, k=5))
        latencies.append((time.perf_counter() - t0) * 1000)
        assert len(hits) == 5
        if number % 50 == 0:
            print(f"  {label}: {number}/{len(questions)} queries, p95 so far {percentile(latencies, 95):.1f} ms",
                  file=sys.stderr, flush=True)
    return latencies


def summary(latencies: list[float]) -> dict:
    return {"p50": round(percentile(latencies, 50), 2), "p95": round(percentile(latencies, 95), 2),
            "mean": round(statistics.mean(latencies), 2) if latencies else None, "queries": len(latencies)}


def measure(size: int, data: Path, queries: int, tick_writes: int, tick_seconds: float, model: str) -> dict:
    from memory import Database
    from bench.mpnet import bench_embedder
    from memory.retrieval.index import MemoryIndex

    turns, questions = corpus(data)
    rng = random.Random(2)
    asked = [rng.choice(questions) for _ in range(queries)]
    with tempfile.TemporaryDirectory(prefix="anima-scale-") as tmp:
        db = Database.open(tmp)
        t0 = time.perf_counter()
        for first in range(0, size, 5000):
            write(db, turns, first, min(5000, size - first))
            print(f"[{size}] wrote {min(size, first + 5000)}/{size} rows (and their full-text documents)",
                  file=sys.stderr, flush=True)
        write_s = time.perf_counter() - t0
        clock = lambda: START + timedelta(minutes=size + 60)  # noqa: E731
        index = MemoryIndex(db, bench_embedder(model), chroma_path=Path(tmp) / "chroma", clock=clock)
        t0 = time.perf_counter()
        index.sync(progress=True)
        index_s = time.perf_counter() - t0
        vectors = index.collection.count()

        index.search(asked[0])  # starts the background copy of the vectors into memory
        if index.caches.warmup is not None:
            index.caches.warmup.join(timeout=1800)
        warm = timed_queries(index, asked, f"[{size}] warm")

        stop, written, sync_ms = threading.Event(), [size], []

        def tick_writer():
            while not stop.is_set():
                write(db, turns, written[0], tick_writes)
                written[0] += tick_writes
                t = time.perf_counter()
                index.sync()  # what the loop does after a tick commits
                sync_ms.append((time.perf_counter() - t) * 1000)
                stop.wait(tick_seconds)

        writer = threading.Thread(target=tick_writer, name="tick-writer")
        writer.start()
        try:
            ingesting = timed_queries(index, asked, f"[{size}] while ingesting")
        finally:
            stop.set()
            writer.join()
        index.close()
        db.close()
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

        restart = subprocess.run([sys.executable, __file__, "--restart", tmp, "--queries", str(min(queries, 50)),
                                  "--data", str(data), "--clock-minutes", str(size + 60), "--embed-model", model],
                                 stdout=subprocess.PIPE, text=True, timeout=1800)
        if restart.returncode != 0:
            raise RuntimeError(f"the restarted process failed (exit {restart.returncode})")
        after_restart = json.loads(restart.stdout.strip().splitlines()[-1])
    return {
        "memories": size,
        "vectors": vectors,
        "indexing": {"memories_per_s": round(size / index_s, 1), "seconds": round(index_s, 1),
                     "sql_write_s": round(write_s, 1), "note": "embedding + Chroma; SQL rows and full-text "
                                                               "documents are written before (sql_write_s)"},
        "warm_ms": summary(warm),
        "while_ingesting_ms": {**summary(ingesting), "memories_written": written[0] - size,
                               "rate": f"{tick_writes} every {tick_seconds} s, index.sync() after each",
                               "sync_p95_ms": round(percentile(sync_ms, 95), 1)},
        "after_restart": after_restart,
        "peak_rss_mb": round(rss_mb, 1),
    }


def restarted(directory: str, data: Path, queries: int, clock_minutes: int, model: str) -> dict:
    """A new process over the same stores: the first query's time, from opening the index to the results."""
    from memory import Database
    from bench.mpnet import bench_embedder
    from memory.retrieval.index import MemoryIndex, Query

    imports_s = time.perf_counter() - STARTED
    _, questions = corpus(data)
    rng = random.Random(3)
    asked = [rng.choice(questions) for _ in range(queries + 1)]
    t0 = time.perf_counter()
    db = Database.open(directory)
    index = MemoryIndex(db, bench_embedder(model), chroma_path=Path(directory) / "chroma",
                        clock=lambda: START + timedelta(minutes=clock_minutes))
    hits = index.search(Query(text=asked[0], k=5))
    first_ms = (time.perf_counter() - t0) * 1000
    assert len(hits) == 5
    next_queries = timed_queries(index, asked[1:], "after restart")
    still_copying = index.caches.warmup is not None and index.caches.warmup.is_alive()
    index.close()
    db.close()
    return {"first_query_ms": round(first_ms, 1), "python_imports_s": round(imports_s, 2),
            "next_queries_ms": summary(next_queries), "vectors_still_copying_meanwhile": still_copying}


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    logging.getLogger("memory.retrieval.index").setLevel(logging.INFO)  # "indexed N/M memories (rate)" while embedding
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--tick-writes", type=int, default=2, help="memories a tick writes (a thought and a note)")
    parser.add_argument("--tick-seconds", type=float, default=1.0, help="seconds between two ticks' writes")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--embed-model", default="all-MiniLM-L6-v2", choices=["all-MiniLM-L6-v2", "all-MiniLM-L6-v2-int8",
                                                                         "all-mpnet-base-v2", "all-mpnet-base-v2-int8"])
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # internal: measure one size here
    parser.add_argument("--restart", default=None, help=argparse.SUPPRESS)  # internal: a restarted process
    parser.add_argument("--clock-minutes", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.data.exists():
        parser.error(f"no such file: {args.data} (LoCoMo-format texts and questions)")
    if args.restart is not None:
        print(json.dumps(restarted(args.restart, args.data, args.queries, args.clock_minutes, args.embed_model)))
        return
    if args.one is not None:
        print(json.dumps(measure(args.one, args.data, args.queries, args.tick_writes, args.tick_seconds,
                                 args.embed_model)))
        return
    results = []
    for size in args.sizes:
        print(f"== {size} memories (embedding them takes a while: progress below)", file=sys.stderr, flush=True)
        run = subprocess.run([sys.executable, __file__, "--one", str(size), "--queries", str(args.queries),
                              "--tick-writes", str(args.tick_writes), "--tick-seconds", str(args.tick_seconds),
                              "--data", str(args.data), "--embed-model", args.embed_model], stdout=subprocess.PIPE,
                             text=True)
        if run.returncode != 0:
            sys.exit(f"the {size}-memory run failed (exit {run.returncode})")
        results.append(json.loads(run.stdout.strip().splitlines()[-1]))
    print(json.dumps({"benchmark": "retrieval-scale", "embedder": f"{args.embed_model} (onnxruntime)",
                      "store": "sqlite (FTS5) + chroma", "results": results}, indent=2))


if __name__ == "__main__":
    main()
