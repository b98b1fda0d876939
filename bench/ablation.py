"""The shipped ranking with each of its parts removed in turn, on LoCoMo dev and on our project chats: recall@5 (and
LoCoMo's by category, MRR@10) of each variant beside the whole, so a note's ablation table comes from one run.

Each variant is a `RetrievalSettings` override run through bench/locomo.py and bench/project_chat.py exactly as
they run (anima's write path, `MemoryIndex.search`); the embeddings are kept in `--cache-dir` between variants.
Progress goes to stderr; one JSON object on stdout.

    python bench/ablation.py --cache-dir /tmp/locomo-cache
    python bench/ablation.py --only author_boost=0 when_boost=0
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared/data/locomo/locomo_dev.json"
VARIANTS = {  # what is removed -> the override that removes it
    "the dense engine (words only)": "dense_weight=0",
    "the lexical engine (meaning only)": "dense_weight=1",
    "sentence vectors (the whole memory's vector only)": "best_vector_weight=0",
    "the author boost": "author_boost=0",
    "each named author's first-person query": "each_author_query=false",
    "the neighbours' share": "neighbour_weight=0",
    "a reply's share of its question": "answer_weight=0",
    "the question penalty": "question_penalty=0",
    "the 'when' boost": "when_boost=0",
    "the period boost": "period_boost=0",
    "recency": "recency_weight=0",
    "importance": "importance_weight=0",
    "the near-copy guard": "duplicate_similarity=1.01",
}


def figures(command: list[str]) -> dict:
    done = subprocess.run([sys.executable, *command], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed (exit {done.returncode})")
    return json.loads(done.stdout)


def measure(setting: str | None, data: Path, cache_dir: Path | None) -> dict:
    sets = ["--set", setting] if setting else []
    cache = ["--cache-dir", str(cache_dir)] if cache_dir else []
    locomo = figures(["bench/locomo.py", "--data", str(data), *sets, *cache])
    chats = figures(["bench/project_chat.py", *sets, *cache])
    return {
        "locomo": {
            "recall@5": locomo["recall@5"],
            "mrr@10": locomo["mrr@10"],
            "recall@5_by_category": locomo["recall@5_by_category"],
        },
        "project_chats": {
            "recall@5": chats["overall"]["anima"]["recall@5"],
            "mrr@10": chats["overall"]["anima"]["mrr@10"],
        },
        "bm25": {"locomo": locomo["bm25"]["recall@5"], "project_chats": chats["overall"]["bm25"]["recall@5"]},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--cache-dir", type=Path, default=None, help="keep the embeddings between variants")
    parser.add_argument("--only", nargs="+", default=None, metavar="NAME=VALUE", help="these overrides only")
    args = parser.parse_args()
    if not args.data.exists():
        parser.error(f"no such file: {args.data} (LoCoMo-format conversations)")
    chosen = {name: s for name, s in VARIANTS.items() if args.only is None or s in args.only}
    if args.only and (unknown := set(args.only) - set(chosen.values())):
        chosen.update({s: s for s in sorted(unknown)})
    started = time.monotonic()
    print("[ablation] the whole ranking", file=sys.stderr, flush=True)
    whole = measure(None, args.data, args.cache_dir)
    rows = []
    for n, (name, setting) in enumerate(chosen.items(), 1):
        print(
            f"[ablation] {n}/{len(chosen)} without {name} ({setting}), {time.monotonic() - started:.0f} s so far",
            file=sys.stderr,
            flush=True,
        )
        got = measure(setting, args.data, args.cache_dir)
        rows.append(
            {
                "without": name,
                "setting": setting,
                **got,
                "change": {
                    "locomo": round(got["locomo"]["recall@5"] - whole["locomo"]["recall@5"], 4),
                    "project_chats": round(got["project_chats"]["recall@5"] - whole["project_chats"]["recall@5"], 4),
                },
            }
        )
    print(json.dumps({"benchmark": "ranking-ablation", "whole": whole, "without": rows}, indent=2))


if __name__ == "__main__":
    main()
