"""Hybrid retrieval at scale: query latency p50/p95 and peak memory at 10k and 100k memories.

Memories are real, distinct texts: each is a LoCoMo dialog turn joined with a sentence of another turn,
written through `memory.store.record_turn` (20 turns per episode, two authors) and embedded with the real
model into Chroma. Queries are LoCoMo questions, searched with `MemoryIndex.search` exactly as auto_recall
does. Each size runs in its own process so the peak RSS (ru_maxrss: model, Chroma, BM25, vector cache)
belongs to that size alone. The first query of a process (lazy loads) is reported apart, and so is a
restarted index over the same stores (BM25 rebuilt from SQL, vectors warmed from Chroma in the background).

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
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_DATA = ROOT.parent / "shared/data/locomo/locomo_dev.json"


def corpus(data: Path) -> tuple[list[tuple[str, str]], list[str]]:
    samples = json.loads(data.read_text())
    turns, questions = [], []
    for sample in samples:
        for key, value in sample["conversation"].items():
            if key.startswith("session_") and isinstance(value, list):
                turns += [(t.get("speaker", ""), t.get("text", "")) for t in value if t.get("text")]
        questions += [str(q["question"]) for q in sample["qa"] if q.get("category") != 5]
    return turns, questions


def memories(turns: list[tuple[str, str]], size: int, seed: int = 1):
    rng = random.Random(seed)
    from memory.text import sentences

    pieces = [s for _, text in turns for s in sentences(text)] or ["…"]
    for n in range(size):
        speaker, text = turns[n % len(turns)]
        yield speaker, f"{text} {rng.choice(pieces)}"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))] if ordered else 0.0


def measure(size: int, data: Path, queries: int) -> dict:
    from memory import Database
    from memory.retrieval.embeddings import LocalEmbedder
    from memory.retrieval.index import MemoryIndex, Query
    from memory.store import record_turn

    turns, questions = corpus(data)
    with tempfile.TemporaryDirectory(prefix="anima-scale-") as tmp:
        db = Database.open(tmp)
        start = datetime(2024, 1, 1, tzinfo=timezone.utc)
        t0 = time.perf_counter()
        batch = 5000
        stream = memories(turns, size)
        for first in range(0, size, batch):
            with db.unit() as repos:
                for n in range(first, min(size, first + batch)):
                    speaker, text = next(stream)
                    record_turn(repos, ref=str(n), text=text, author=speaker, episode=f"e{n // 20}",
                                created_at=start + timedelta(minutes=n))
            print(f"[{size}] wrote {min(size, first + batch)}/{size} rows", file=sys.stderr, flush=True)
        write_s = time.perf_counter() - t0
        index = MemoryIndex(db, LocalEmbedder(), chroma_path=Path(tmp) / "chroma",
                            clock=lambda: start + timedelta(minutes=size + 60))
        t0 = time.perf_counter()
        index.sync(progress=True)
        embed_s = time.perf_counter() - t0
        rng = random.Random(2)
        asked = [rng.choice(questions) for _ in range(queries + 1)]
        t0 = time.perf_counter()
        index.search(Query(text=asked[0], k=5))
        cold_ms = (time.perf_counter() - t0) * 1000
        latencies = []
        for number, question in enumerate(asked[1:], 1):
            t0 = time.perf_counter()
            hits = index.search(Query(text=question, k=5))
            latencies.append((time.perf_counter() - t0) * 1000)
            assert len(hits) == 5
            if number % 50 == 0:
                print(f"[{size}] {number}/{queries} queries, p50 so far {percentile(latencies, 50):.1f} ms",
                      file=sys.stderr, flush=True)
        vectors = index.collection.count()
        # a restarted persona: a new index over the same stores (BM25 rebuilt from SQL, vectors warmed from Chroma)
        t0 = time.perf_counter()
        restarted = MemoryIndex(db, index.embedder, chroma_path=Path(tmp) / "chroma", clock=index.clock)
        restarted.search(Query(text=asked[0], k=5))
        restart_first_ms = (time.perf_counter() - t0) * 1000
        deadline = time.monotonic() + 600
        while len(restarted._vectors) < size and time.monotonic() < deadline:
            time.sleep(1)
        warm_s = (time.perf_counter() - t0)
        after = []
        for question in asked[1:]:
            t0 = time.perf_counter()
            restarted.search(Query(text=question, k=5))
            after.append((time.perf_counter() - t0) * 1000)
        db.close()
    return {
        "memories": size,
        "vectors": vectors,
        "query_latency_ms": {"p50": round(percentile(latencies, 50), 2), "p95": round(percentile(latencies, 95), 2),
                             "mean": round(statistics.mean(latencies), 2), "first_query": round(cold_ms, 1)},
        "after_restart": {"first_query_ms": round(restart_first_ms, 1), "vectors_warm_after_s": round(warm_s, 1),
                          "p50": round(percentile(after, 50), 2), "p95": round(percentile(after, 95), 2)},
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "sql_write_s": round(write_s, 1),
        "embed_and_index_s": round(embed_s, 1),
        "embed_rate_per_s": round(size / embed_s, 1) if embed_s else None,
        "queries": queries,
    }


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    logging.getLogger("memory.retrieval.index").setLevel(logging.INFO)  # "indexed N/M memories (rate)" while embedding
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # internal: measure one size here
    args = parser.parse_args()
    if not args.data.exists():
        parser.error(f"no such file: {args.data} (LoCoMo-format texts and questions)")
    if args.one is not None:
        print(json.dumps(measure(args.one, args.data, args.queries)))
        return
    results = []
    for size in args.sizes:
        print(f"== {size} memories (embedding them takes a while: progress below)", file=sys.stderr, flush=True)
        run = subprocess.run([sys.executable, __file__, "--one", str(size), "--queries", str(args.queries),
                              "--data", str(args.data)], stdout=subprocess.PIPE, text=True)
        if run.returncode != 0:
            sys.exit(f"the {size}-memory run failed (exit {run.returncode})")
        results.append(json.loads(run.stdout.strip().splitlines()[-1]))
    print(json.dumps({"benchmark": "retrieval-scale", "embedder": "all-MiniLM-L6-v2", "store": "sqlite + chroma",
                      "results": results}, indent=2))


if __name__ == "__main__":
    main()
