"""The bound of index-time expansion: what recall an ideal expander would give, measured by
appending to every evidence turn the answers of the questions it is evidence for ("facts" a perfect extractor
would state: names, places, resolved dates) and running bench/locomo.py's protocol on that corpus, beside plain
BM25 on the same corpus. An LLM expander can only do worse than this (it does not know which facts will be
asked about); a small gain here means the expander is not worth its cost.

    python bench/ideal_expansion.py --data ../shared/data/locomo/locomo_dev.json --cache-dir /tmp/c
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.locomo import run  # noqa: E402
from bench.multilingual import bm25  # noqa: E402


def expanded(samples: list[dict]) -> list[dict]:
    out = copy.deepcopy(samples)
    for sample in out:
        facts: dict[str, list[str]] = defaultdict(list)
        for q in sample["qa"]:
            if q.get("category") != 5 and q.get("answer") not in (None, ""):
                for e in q.get("evidence") or []:
                    facts[e].append(str(q["answer"]))
        for key, turns in sample["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                for turn in turns:
                    if turn["dia_id"] in facts:
                        turn["text"] = (
                            f"{turn.get('text', '')} (facts: {'; '.join(dict.fromkeys(facts[turn['dia_id']]))})"
                        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--cache-dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "expanded.json"
        path.write_text(json.dumps(expanded(json.loads(args.data.read_text()))))
        got = run(path, [1, 5, 10], {}, None, None, None, cache_dir=args.cache_dir)
        result = {
            "benchmark": "ideal-expansion-bound",
            "data": str(args.data),
            "hybrid": {k: got[k] for k in ("recall@1", "recall@5", "recall@10", "mrr@10", "recall@5_by_category")},
            "bm25": bm25(path),
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
