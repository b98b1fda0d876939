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

`--long`: long memories instead — each ~2,000 characters (consecutive LoCoMo turns joined, as a long assistant
answer), and every `--paste-every`-th one a 300,000-character paste (turns drawn at random), and so is the first
memory a tick writes while ingesting (whatever the size, one paste lands in a tick). Indexing is then
reported in characters/s as well as memories/s, and split in two: what the write's sync embeds (the whole text's
vector and the sentences of its first 8,000 characters: bounded per memory) and what the index's follow-up embeds
afterwards in the background (memory/followup.py: the sentences of the rest of a long text). While ingesting, the
follow-up thread
runs as it does beside the loop, and the writer's syncs (the tick's share) are timed, the paste's apart.

    python bench/retrieval_scale.py --sizes 10000 100000 --queries 200
    python bench/retrieval_scale.py --long --sizes 300 --queries 100
    python bench/retrieval_scale.py --sizes 10000 --turns 276

`--turns N`: the memories come from the first N turns only, so each turn recurs size/N times (each time with
another random sentence): a small corpus as full of near-copies as a large one (100k memories over LoCoMo dev's
2,760 turns: ~36 each), for the near-copy guard's cost (memory/retrieval/ranker.py: it reads further down the
ranking, then asks the engines for more candidates, when the near-copies leave fewer than k).
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
from datetime import UTC, datetime, timedelta
from pathlib import Path

STARTED = time.perf_counter()
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_DATA = ROOT.parent / "shared/data/locomo/locomo_dev.json"
START = datetime(2024, 1, 1, tzinfo=UTC)
LONG = False  # --long: long memories and pastes (module doc)
TURNS: int | None = None  # --turns: memories drawn from the first N turns only (module doc)


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


LONG_CHARS = 2000
PASTE_CHARS = 300_000
PASTE_EVERY = 150


def long_memories(turns: list[tuple[str, str]], start: int, count: int, seed: int = 1, paste_at: int = -1):
    """~2,000-character memories (consecutive turns joined); every PASTE_EVERY-th a 300,000-character paste, and
    the `paste_at`-th."""
    rng = random.Random(seed * 1_000_003 + start)
    for n in range(start, start + count):
        if n % PASTE_EVERY == PASTE_EVERY - 1 or n == paste_at:
            parts, size = [], 0
            while size < PASTE_CHARS:
                text = rng.choice(turns)[1]
                parts.append(text)
                size += len(text) + 1
            yield n, "User", " ".join(parts)[:PASTE_CHARS]
            continue
        speaker, text = turns[(n * 7) % len(turns)]
        at = (n * 7) % len(turns)
        while len(text) < LONG_CHARS:
            at = (at + 1) % len(turns)
            text = f"{text} {turns[at][1]}"
        yield n, speaker, text[: LONG_CHARS + 200]


def write(db, turns, start: int, count: int, paste_at: int = -1) -> None:
    from memory.store import record_turn

    with db.unit() as repos:
        made = long_memories(turns, start, count, paste_at=paste_at) if LONG else memories(turns, start, count)
        for n, speaker, text in made:
            record_turn(
                repos,
                ref=str(n),
                text=text,
                author=speaker,
                episode=f"e{n // 20}",
                created_at=START + timedelta(minutes=n),
            )


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
            print(
                f"  {label}: {number}/{len(questions)} queries, p95 so far {percentile(latencies, 95):.1f} ms",
                file=sys.stderr,
                flush=True,
            )
    return latencies


def summary(latencies: list[float]) -> dict:
    return {
        "p50": round(percentile(latencies, 50), 2),
        "p95": round(percentile(latencies, 95), 2),
        "mean": round(statistics.mean(latencies), 2) if latencies else None,
        "queries": len(latencies),
    }


def measure(size: int, data: Path, queries: int, tick_writes: int, tick_seconds: float, model: str) -> dict:
    from bench.mpnet import bench_embedder
    from memory import Database
    from memory.retrieval.index import MemoryIndex

    turns, questions = corpus(data)
    turns = turns[:TURNS] if TURNS else turns
    rng = random.Random(2)
    asked = [rng.choice(questions) for _ in range(queries)]
    with tempfile.TemporaryDirectory(prefix="anima-scale-") as tmp:
        db = Database.open(tmp)
        t0 = time.perf_counter()
        for first in range(0, size, 5000):
            write(db, turns, first, min(5000, size - first))
            print(
                f"[{size}] wrote {min(size, first + 5000)}/{size} rows (and their full-text documents)",
                file=sys.stderr,
                flush=True,
            )
        write_s = time.perf_counter() - t0
        clock = lambda: START + timedelta(minutes=size + 60)  # noqa: E731
        index = MemoryIndex(db, bench_embedder(model), chroma_path=Path(tmp) / "chroma", clock=clock)
        t0 = time.perf_counter()
        index.sync(progress=True)
        index_s = time.perf_counter() - t0
        vectors = index.collection.count()
        with db.reading() as repos:
            chars = sum(len(item.text) for item in repos.items.indexed(limit=None))
        follow_s, windows = 0.0, 0
        if LONG:  # what the follow-up embeds after the writes: every later part of the long texts
            t0 = time.perf_counter()
            windows = index.follow_up.run_pending().deep_parts
            follow_s = time.perf_counter() - t0

        index.search(asked[0])  # starts the background copy of the vectors into memory
        if index.caches.warmup is not None:
            index.caches.warmup.join(timeout=1800)
        warm = timed_queries(index, asked, f"[{size}] warm")

        stop, written, sync_ms, paste_ms = threading.Event(), [size], [], []
        if LONG:
            index.follow_up.start()  # as beside the loop: the new memories' later parts, in the background

        def tick_writer():
            while not stop.is_set():
                # long memories: the first tick while ingesting pastes (its write and sync are timed apart)
                pasted = written[0] == size or any(
                    n % PASTE_EVERY == PASTE_EVERY - 1 for n in range(written[0], written[0] + tick_writes)
                )
                t = time.perf_counter()
                write(db, turns, written[0], tick_writes, paste_at=size)
                written[0] += tick_writes
                index.sync()  # what the loop does after a tick commits
                (paste_ms if LONG and pasted else sync_ms).append((time.perf_counter() - t) * 1000)
                stop.wait(tick_seconds)

        writer = threading.Thread(target=tick_writer, name="tick-writer")
        writer.start()
        try:
            ingesting = timed_queries(index, asked, f"[{size}] while ingesting")
        finally:
            stop.set()
            writer.join()
        deeper_rounds = index.ranker.deeper_rounds
        follow_up_behind = 0
        if LONG:
            with db.reading() as repos:
                follow_up_behind = repos.items.newest_id() - repos.config.follow_up_cursor
        index.close()
        db.close()
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

        restart = subprocess.run(
            [
                sys.executable,
                __file__,
                "--restart",
                tmp,
                "--queries",
                str(min(queries, 50)),
                "--data",
                str(data),
                "--clock-minutes",
                str(size + 60),
                "--embed-model",
                model,
            ],
            stdout=subprocess.PIPE,
            text=True,
            timeout=1800,
        )
        if restart.returncode != 0:
            raise RuntimeError(f"the restarted process failed (exit {restart.returncode})")
        after_restart = json.loads(restart.stdout.strip().splitlines()[-1])
    long = (
        {
            "memory_chars": LONG_CHARS,
            "paste_chars": PASTE_CHARS,
            "paste_every": PASTE_EVERY,
            "follow_up": {
                "seconds": round(follow_s, 1),
                "parts": windows,
                "parts_per_s": round(windows / follow_s, 1) if follow_s else None,
                "note": "after the writes' sync, in the background: the sentence parts past the first 8,000 "
                "characters of the longer texts (memory/followup.py)",
            },
            "paste_write_and_sync_ms": [round(v, 1) for v in paste_ms],
            "follow_up_behind_at_end": follow_up_behind,
        }
        if LONG
        else None
    )
    return {
        "memories": size,
        **({"turns": len(turns), "recurrences_per_turn": round(size / len(turns), 1)} if TURNS else {}),
        "vectors": vectors,
        "indexing": {
            "memories_per_s": round(size / index_s, 1),
            "chars_per_s": round(chars / index_s),
            "chars": chars,
            "seconds": round(index_s, 1),
            "sql_write_s": round(write_s, 1),
            "note": "embedding + Chroma; SQL rows and full-text documents are written before (sql_write_s)",
        },
        **({"long": long} if long else {}),
        "warm_ms": summary(warm),
        "near_copy_guard": {
            "deeper_rounds": deeper_rounds,
            "searches": 1 + 2 * len(asked),
            "note": "rounds in which a search asked the engines for more candidates because the "
            "near-copies among them left fewer than 5 (memory/retrieval/ranker.py)",
        },
        "while_ingesting_ms": {
            **summary(ingesting),
            "memories_written": written[0] - size,
            "rate": f"{tick_writes} every {tick_seconds} s, index.sync() after each",
            "sync_p95_ms": round(percentile(sync_ms, 95), 1),
        },
        "after_restart": after_restart,
        "peak_rss_mb": round(rss_mb, 1),
    }


def restarted(directory: str, data: Path, queries: int, clock_minutes: int, model: str) -> dict:
    """A new process over the same stores: the first query's time, from opening the index to the results."""
    from bench.mpnet import bench_embedder
    from memory import Database
    from memory.retrieval.index import MemoryIndex, Query

    imports_s = time.perf_counter() - STARTED
    _, questions = corpus(data)
    rng = random.Random(3)
    asked = [rng.choice(questions) for _ in range(queries + 1)]
    t0 = time.perf_counter()
    db = Database.open(directory)
    index = MemoryIndex(
        db,
        bench_embedder(model),
        chroma_path=Path(directory) / "chroma",
        clock=lambda: START + timedelta(minutes=clock_minutes),
    )
    hits = index.search(Query(text=asked[0], k=5))
    first_ms = (time.perf_counter() - t0) * 1000
    assert len(hits) == 5
    next_queries = timed_queries(index, asked[1:], "after restart")
    still_copying = index.caches.warmup is not None and index.caches.warmup.is_alive()
    index.close()
    db.close()
    return {
        "first_query_ms": round(first_ms, 1),
        "python_imports_s": round(imports_s, 2),
        "next_queries_ms": summary(next_queries),
        "vectors_still_copying_meanwhile": still_copying,
    }


def main() -> None:
    global LONG, PASTE_EVERY, TURNS
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    logging.getLogger("memory.retrieval.index").setLevel(logging.INFO)  # "indexed N/M memories (rate)" while embedding
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--tick-writes", type=int, default=2, help="memories a tick writes (a thought and a note)")
    parser.add_argument("--tick-seconds", type=float, default=1.0, help="seconds between two ticks' writes")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--embed-model",
        default="all-MiniLM-L6-v2",
        choices=["all-MiniLM-L6-v2", "all-MiniLM-L6-v2-int8", "all-mpnet-base-v2", "all-mpnet-base-v2-int8"],
    )
    parser.add_argument(
        "--long",
        action="store_true",
        help="long memories (~2,000 characters) and 300,000-character pastes (module doc)",
    )
    parser.add_argument("--paste-every", type=int, default=150)
    parser.add_argument(
        "--turns",
        type=int,
        default=None,
        help="draw the memories from the first N LoCoMo turns only: each turn recurs size/N times (module doc)",
    )
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # internal: measure one size here
    parser.add_argument("--restart", default=None, help=argparse.SUPPRESS)  # internal: a restarted process
    parser.add_argument("--clock-minutes", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    LONG, PASTE_EVERY, TURNS = args.long, args.paste_every, args.turns
    if not args.data.exists():
        parser.error(f"no such file: {args.data} (LoCoMo-format texts and questions)")
    if args.restart is not None:
        print(json.dumps(restarted(args.restart, args.data, args.queries, args.clock_minutes, args.embed_model)))
        return
    if args.one is not None:
        print(
            json.dumps(
                measure(args.one, args.data, args.queries, args.tick_writes, args.tick_seconds, args.embed_model)
            )
        )
        return
    results = []
    for size in args.sizes:
        print(f"== {size} memories (embedding them takes a while: progress below)", file=sys.stderr, flush=True)
        run = subprocess.run(
            [
                sys.executable,
                __file__,
                "--one",
                str(size),
                "--queries",
                str(args.queries),
                *(["--long", "--paste-every", str(args.paste_every)] if args.long else []),
                *(["--turns", str(args.turns)] if args.turns else []),
                "--tick-writes",
                str(args.tick_writes),
                "--tick-seconds",
                str(args.tick_seconds),
                "--data",
                str(args.data),
                "--embed-model",
                args.embed_model,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        if run.returncode != 0:
            sys.exit(f"the {size}-memory run failed (exit {run.returncode})")
        results.append(json.loads(run.stdout.strip().splitlines()[-1]))
    print(
        json.dumps(
            {
                "benchmark": "retrieval-scale" + (" (long memories)" if args.long else ""),
                "embedder": f"{args.embed_model} (onnxruntime)",
                "store": "sqlite (FTS5) + chroma",
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
