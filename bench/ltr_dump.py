"""Candidate lists for learning to rank: per LoCoMo-format question, the hybrid ranking's top `--pool` candidates
with the ranker's feature parts, written to a pickle that bench/train_ranker.py reads (the ingestion and search
are bench/locomo.py's: anima's write path and `MemoryIndex.search`, with MMR off so the list is the fused order).

    python bench/ltr_dump.py --data ../shared/data/locomo/locomo_dev.json --out /tmp/ltr.pickle --cache-dir /tmp/c
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.locomo import CachedEmbedder, conversation_store, record_conversation  # noqa: E402
from bench.mpnet import bench_embedder  # noqa: E402
from memory.followup import LONG_TEXT  # noqa: E402
from memory.models import MemoryItem  # noqa: E402
from memory.retrieval.index import MemoryIndex, Query, RetrievalSettings  # noqa: E402


def dump(data: Path, pool: int, cache_dir: Path | None, overrides: dict[str, str], model: str | None = None) -> dict:
    """Per conversation: its turns, every item's stored vectors (whole item first, then its sentences) by ref, and
    per question its fused top `pool` with their parts and the question's vector (`model`: bench_embedder's)."""
    samples = json.loads(data.read_text())
    embedder = bench_embedder(model, None, "float32")
    if cache_dir:
        embedder = CachedEmbedder(embedder, cache_dir)
    config = RetrievalSettings(**overrides)
    conversations = []
    for sample in samples:
        with conversation_store(None) as (db, tmp):
            turns_out = record_conversation(db, sample)
            now = (max((t["at"] for t in turns_out if t["at"]), default=None) or datetime.now(UTC)) + timedelta(days=1)
            index = MemoryIndex(db, embedder, chroma_path=tmp / "chroma", config=config, clock=lambda: now)  # noqa: B023 - called within this iteration
            index.sync(progress=True)
            with db.reading() as repos:  # a long text's parts past the write's, as bench/locomo.py adds them
                long_items = [
                    item.id for item in repos.items.after(0, len(turns_out) + 1) if len(item.text or "") > LONG_TEXT
                ]
            for item_id in long_items:
                index.follow_up.deepen(item_id)
            with db.unit() as repos:
                refs = {row.id: row.ref.split(":", 1)[1] for row in repos.session.query(MemoryItem).all()}
                vectors = {refs[i]: v for i, v in index.caches.vectors_of(repos, list(refs)).items()}
            valid = {t["ref"] for t in turns_out}
            questions = []
            for q in sample["qa"]:
                evidence = [e for e in q.get("evidence") or [] if e in valid]
                if q.get("category") == 5 or not evidence:
                    continue
                hits = index.search(
                    Query(
                        text=str(q["question"]),
                        k=pool,
                        mmr_lambda=1.0,
                        asker=q.get("asker"),
                        addressee=q.get("addressee"),
                    )
                )
                questions.append(
                    {
                        "question": str(q["question"]),
                        "category": int(q["category"]),
                        "evidence": evidence,
                        "vector": index.embed_texts([str(q["question"])])[0],
                        "candidates": [
                            {"ref": h.item.ref.split(":", 1)[1], "score": h.score, "parts": h.parts} for h in hits
                        ],
                    }
                )
            index.close()
        conversations.append(
            {
                "sample_id": sample["sample_id"],
                "turns": turns_out,
                "questions": questions,
                "now": now,
                "vectors": vectors,
            }
        )
        print(f"{sample['sample_id']}: {len(questions)} questions", file=sys.stderr, flush=True)
    if isinstance(embedder, CachedEmbedder):
        embedder.save()
    return {"data": str(data), "pool": pool, "conversations": conversations}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--pool", type=int, default=100)
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--embed-model", default=None, help="all-mpnet-base-v2 (bench/mpnet.py); else the app's")
    args = parser.parse_args()
    result = dump(args.data, args.pool, args.cache_dir, dict(item.split("=", 1) for item in args.set), args.embed_model)
    args.out.write_bytes(pickle.dumps(result))
    print(json.dumps({"out": str(args.out), "conversations": len(result["conversations"])}))


if __name__ == "__main__":
    main()
