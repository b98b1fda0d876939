"""Turn-level recall@k on LoCoMo-format conversations, through anima's own memory write path and retrieval.

Protocol (../shared/data/locomo/README.md): per conversation, the corpus is every dialog turn (with its
session date and speaker); queries are the QA items of categories 1-4 whose evidence ids exist;
recall@k = mean over questions of |evidence ∩ top-k| / |evidence|. Each conversation gets a fresh
database and Chroma collection; turns are written with `memory.store.record_turn` (what the tick uses for
conversation turns) and searched with `MemoryIndex.search` (what auto_recall and `memory.search` use).

    python bench/locomo.py --data ../shared/data/locomo/locomo_dev.json --k 1 5 10
    python bench/locomo.py --data … --set dense_weight=0 --set author_boost=0   # ablations
Prints one JSON object on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory import Database  # noqa: E402
from memory.retrieval.embeddings import LocalEmbedder, open_embedder  # noqa: E402
from memory.retrieval.index import MemoryIndex, Query, RetrievalSettings  # noqa: E402
from memory.store import record_turn  # noqa: E402


def parse_session_date(text: str) -> datetime | None:
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            return datetime.strptime(text.strip(), fmt).replace(tzinfo=timezone.utc)
        except (ValueError, AttributeError):
            continue
    return None


def sessions(conversation: dict) -> list[tuple[int, datetime | None, list[dict]]]:
    found = []
    for key, turns in conversation.items():
        if key.startswith("session_") and isinstance(turns, list):
            number = int(key.split("_")[1])
            found.append((number, parse_session_date(conversation.get(f"{key}_date_time", "")), turns))
    return sorted(found, key=lambda s: s[0])


def percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def run(data_path: Path, ks: list[int], overrides: dict[str, str], embed_url: str | None, embed_model: str | None,
        limit: int | None) -> dict:
    samples = json.loads(data_path.read_text())
    if limit:
        samples = samples[:limit]
    embedder = open_embedder(embed_url, embed_model) if embed_url else LocalEmbedder()
    config = RetrievalSettings(**overrides)
    recall: dict[int, list[float]] = {k: [] for k in ks}
    by_category: dict[int, list[float]] = defaultdict(list)
    latencies: list[float] = []
    ingest_seconds = 0.0
    turns_total = 0
    per_conversation = []
    top = max(ks)
    for number, sample in enumerate(samples, 1):
        conversation = sample["conversation"]
        with tempfile.TemporaryDirectory(prefix="anima-locomo-") as tmp:
            db = Database.open(tmp)
            last_time = None
            started = time.perf_counter()
            with db.unit() as repos:
                for session, when, turns in sessions(conversation):
                    for position, turn in enumerate(turns):
                        at = (when + timedelta(seconds=position)) if when else None
                        last_time = at or last_time
                        record_turn(repos, ref=f"{sample['sample_id']}:{turn['dia_id']}", text=turn.get("text", ""),
                                    author=turn.get("speaker", ""), episode=f"{sample['sample_id']}:session_{session}",
                                    created_at=at)
                        turns_total += 1
            now = (last_time or datetime.now(timezone.utc)) + timedelta(days=1)
            index = MemoryIndex(db, embedder, chroma_path=Path(tmp) / "chroma", config=config, clock=lambda: now)
            index.sync(progress=True)
            ingest_seconds += time.perf_counter() - started
            valid = {t["dia_id"] for _, _, turns in sessions(conversation) for t in turns}
            questions = [q for q in sample["qa"] if q.get("category") != 5
                         and [e for e in q.get("evidence") or [] if e in valid]]
            conv_recall = []
            for q in questions:
                evidence = {e for e in q["evidence"] if e in valid}
                t0 = time.perf_counter()
                hits = index.search(Query(text=str(q["question"]), k=top))
                latencies.append((time.perf_counter() - t0) * 1000)
                found = [h.item.ref.split(":", 1)[1] for h in hits]
                for k in ks:
                    recall[k].append(len(evidence & set(found[:k])) / len(evidence))
                value = len(evidence & set(found[:5])) / len(evidence)
                by_category[int(q["category"])].append(value)
                conv_recall.append(value)
            per_conversation.append({"sample_id": sample["sample_id"], "questions": len(questions),
                                     "recall@5": round(statistics.mean(conv_recall), 4) if conv_recall else None})
            print(f"[{number}/{len(samples)}] {sample['sample_id']}: {len(questions)} questions, "
                  f"recall@5 {per_conversation[-1]['recall@5']}", file=sys.stderr, flush=True)
            db.close()
    return {
        "benchmark": "locomo-turn-recall",
        "data": str(data_path),
        "conversations": len(samples),
        "turns": turns_total,
        "questions": len(recall[ks[0]]),
        **{f"recall@{k}": round(statistics.mean(v), 4) for k, v in recall.items() if v},
        "recall@5_by_category": {str(c): round(statistics.mean(v), 4) for c, v in sorted(by_category.items())},
        "per_conversation": per_conversation,
        "query_latency_ms": {"p50": round(percentile(latencies, 50), 2), "p95": round(percentile(latencies, 95), 2),
                             "mean": round(statistics.mean(latencies), 2) if latencies else 0},
        "ingest_seconds": round(ingest_seconds, 2),
        "embedder": embedder.name,
        "config": config.__dict__,
    }


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    logging.getLogger("memory.retrieval.index").setLevel(logging.INFO)  # "indexed N/M memories (rate)" while embedding
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json")
    parser.add_argument("--k", type=int, nargs="+", default=[1, 5, 10])
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="override a RetrievalSettings field, e.g. dense_weight=0")
    parser.add_argument("--embed-url", default=None, help="an OpenAI-compatible /v1 server for embeddings")
    parser.add_argument("--embed-model", default=None)
    parser.add_argument("--limit", type=int, default=None, help="only the first N conversations")
    args = parser.parse_args()
    if not args.data.exists():
        parser.error(f"no such file: {args.data}")
    overrides = dict(item.split("=", 1) for item in args.set)
    print(json.dumps(run(args.data, sorted(args.k), overrides, args.embed_url, args.embed_model, args.limit), indent=2))


if __name__ == "__main__":
    main()
