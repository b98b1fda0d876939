"""Recall on a dev set of another style than LoCoMo: long user–assistant project chats (bench/data/project_chat*.json,
written for anima, evidence turns marked by hand): the assistant's answers are long (~1,500 characters in
project_chat_long.json) and most of the evidence (33 of 44 evidence turns there) is in the human's own short
questions and remarks, the opposite of LoCoMo's two chatting friends. It checks that the ranking generalises rather
than fits LoCoMo.

The ranking runs exactly as bench/locomo.py runs it (anima's write path, the hybrid `MemoryIndex.search`), beside
plain BM25 over the same turns (bench/train_ranker.py's reference). Prints JSON: per file and overall, recall@1/5/10
and MRR@10 for both, and recall@5 split by whose turn the evidence is (the human's or the assistant's).

    python bench/project_chat.py [--data bench/data/project_chat_long.json …] [--cache-dir /tmp/c]
    python bench/project_chat.py --set question_penalty=0   # an ablation, as bench/locomo.py's
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.locomo import run, sessions  # noqa: E402
from bench.multilingual import bm25 as plain_bm25  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
FILES = [DATA / "project_chat.json", DATA / "project_chat_long.json"]
METRICS = ("recall@1", "recall@5", "recall@10", "mrr@10")


def questions(path: Path) -> list[tuple[list[dict], dict]]:
    """(the conversation's turns, a question) for every question with evidence (bench/locomo.py's selection)."""
    found = []
    for sample in json.loads(path.read_text()):
        turns = [
            {"ref": t["dia_id"], "text": t["text"], "author": t["speaker"], "at": when}
            for _, when, ts in sessions(sample["conversation"])
            for t in ts
        ]
        valid = {t["ref"] for t in turns}
        for q in sample["qa"]:
            if q.get("category") != 5 and [e for e in q.get("evidence") or [] if e in valid]:
                found.append((turns, q))
    return found


def bm25(path: Path) -> dict:
    return {k: v for k, v in plain_bm25(path).items() if k in METRICS}


def by_speaker(path: Path) -> dict[str, int]:
    """How many evidence turns are the human's, and how many the assistant's."""
    counts = {"human": 0, "assistant": 0}
    for turns, q in questions(path):
        author = {t["ref"]: t["author"] for t in turns}
        for e in q["evidence"]:
            counts["assistant" if author.get(e, "").lower() == "assistant" else "human"] += 1
    return counts


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, nargs="+", default=FILES)
    parser.add_argument("--cache-dir", type=Path, default=None, help="keep the embeddings between runs")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a RetrievalSettings field, e.g. when_boost=0 (as bench/locomo.py)",
    )
    args = parser.parse_args()
    if bad := [item for item in args.set if "=" not in item]:
        parser.error(f"--set takes NAME=VALUE, not {bad[0]!r}")
    overrides = dict(item.split("=", 1) for item in args.set)
    out: dict = {
        "benchmark": "project-chat-recall",
        "embedder": "all-MiniLM-L6-v2 (onnxruntime)",
        "settings": overrides,
        "files": {},
    }
    weighted: dict[str, dict[str, list[tuple[float, int]]]] = {"anima": {}, "bm25": {}}
    for path in args.data:
        got = run(path, [1, 5, 10], overrides, None, None, None, cache_dir=args.cache_dir)
        ours = {k: got[k] for k in METRICS}
        plain = bm25(path)
        n = len(questions(path))
        out["files"][path.name] = {
            "questions": n,
            "evidence_turns": by_speaker(path),
            "anima": ours,
            "bm25": plain,
            "anima_over_bm25_recall@5": round(ours["recall@5"] / plain["recall@5"], 3) if plain["recall@5"] else None,
        }
        for name, figures in (("anima", ours), ("bm25", plain)):
            for k in METRICS:
                weighted[name].setdefault(k, []).append((figures[k], n))
    total = sum(n for _, n in weighted["anima"]["recall@5"])
    out["overall"] = {
        name: {k: round(sum(v * n for v, n in pairs) / total, 4) for k, pairs in figures.items()}
        for name, figures in weighted.items()
    }
    out["overall"]["questions"] = total
    out["overall"]["anima_over_bm25_recall@5"] = (
        round(out["overall"]["anima"]["recall@5"] / out["overall"]["bm25"]["recall@5"], 3)
        if out["overall"]["bm25"]["recall@5"]
        else None
    )
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
