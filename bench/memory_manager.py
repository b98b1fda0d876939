"""What the memory manager archives: near-copies caught, distinct memories wrongly archived, pass speed.

The LoCoMo dialog turns of the first `--conversations` conversations stand in for the persona's own
thoughts (written as `msg:` memories, the only conversation memories the manager may touch). After them, a
near-copy of every `--copy-every`-th turn is written, in one of three forms:
- the same words;
- one word dropped;
- a short phrase added ("…, I think.").

Then manager passes run until every memory has been assessed.

    python bench/memory_manager.py --data ../shared/data/locomo/locomo_dev.json --conversations 2

Prints one JSON object on stdout, progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.locomo import sessions  # noqa: E402
from memory import Database  # noqa: E402
from memory.retrieval.embeddings import LocalEmbedder  # noqa: E402
from memory.retrieval.index import MemoryIndex  # noqa: E402
from memory.store import record_turn  # noqa: E402
from memory.upkeep.manager import ManagerSettings, information, run_pass  # noqa: E402


def near_copy(text: str, form: int, rng: random.Random) -> str:
    words = text.split()
    if form == 0:
        return text
    if form == 1 and len(words) > 3:
        del words[rng.randrange(len(words))]
        return " ".join(words)
    return text.rstrip(".!?") + ", I think."


def run(data: Path, conversations: int, copy_every: int, mode: str) -> dict:
    rng = random.Random(7)
    samples = json.loads(data.read_text())[:conversations]
    turns = [
        (t.get("speaker", ""), t.get("text", ""))
        for s in samples
        for _, _, ts in sessions(s["conversation"])
        for t in ts
        if t.get("text")
    ]
    with tempfile.TemporaryDirectory(prefix="anima-manager-") as tmp:
        db = Database.open(tmp)
        index = MemoryIndex(db, LocalEmbedder(), chroma_path=Path(tmp) / "chroma")
        originals, copies = {}, {}
        with db.unit() as repos:
            for n, (who, text) in enumerate(turns):
                originals[f"msg:{n}"] = text
                record_turn(repos, ref=f"msg:{n}", text=text, author=who, episode="bench")
            for n in range(0, len(turns), copy_every):
                ref = f"msg:copy-{n}"
                copies[ref] = n % 3
                record_turn(
                    repos, ref=ref, text=near_copy(turns[n][1], n % 3, rng), author=turns[n][0], episode="bench-copies"
                )
        print(f"indexing {len(originals)} turns and {len(copies)} near-copies …", file=sys.stderr, flush=True)
        started = time.perf_counter()
        index.sync(progress=True)
        indexing_s = time.perf_counter() - started
        config = ManagerSettings(mode=mode, grace_items=0, lru_tiers=[], max_per_pass=500, log_decisions=False)
        assessed, passes, pass_seconds = 0, 0, []
        while True:
            started = time.perf_counter()
            with db.unit() as repos:
                report = run_pass(repos, index, config)
            pass_seconds.append(time.perf_counter() - started)
            index.sync()
            passes += 1
            assessed += report.assessed
            print(f"pass {passes}: assessed {assessed}/{len(originals) + len(copies)}", file=sys.stderr, flush=True)
            if report.assessed == 0 and not report.archived:
                break
        with db.unit() as repos:
            archived_rows = repos.items.archived(limit=1_000_000)
            archived = {i.ref for i in archived_rows}
            closest = {
                i.ref: ((i.meta or {}).get("similarity"), repos.items.many([(i.meta or {}).get("similar_to") or 0]))
                for i in archived_rows
            }
            closest = {
                ref: (sim, next(iter(rows.values())).text if rows else None) for ref, (sim, rows) in closest.items()
            }
        index.close()
        db.close()
    wrongly = [ref for ref in originals if ref in archived]
    trivia = [ref for ref in wrongly if information(originals[ref]) < config.effective().novelty_threshold]
    by_form = {
        name: round(
            sum(1 for ref, f in copies.items() if f == form and ref in archived)
            / max(1, sum(1 for f in copies.values() if f == form)),
            3,
        )
        for form, name in enumerate(("same words", "one word dropped", "phrase added"))
    }
    return {
        "mode": mode,
        "turns": len(originals),
        "near_copies": len(copies),
        "near_copies_archived": round(sum(1 for ref in copies if ref in archived) / max(1, len(copies)), 3),
        "near_copies_archived_by_form": by_form,
        "originals_archived": round(len(wrongly) / max(1, len(originals)), 3),
        "originals_archived_as_trivia": len(trivia),
        "originals_archived_as_repetition": len(wrongly) - len(trivia),
        "examples_archived_as_repetition": [
            {"text": originals[r], "closest_older": closest[r][1], "similarity": closest[r][0]}
            for r in wrongly
            if r not in trivia
        ][:6],
        "examples_archived_as_trivia": [originals[r] for r in trivia][:5],
        "passes": passes,
        "ms_per_item_assessed": round(1000 * sum(pass_seconds) / max(1, assessed), 2),
        "indexing_s": round(indexing_s, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"
    )
    parser.add_argument("--conversations", type=int, default=2)
    parser.add_argument("--copy-every", type=int, default=10)
    parser.add_argument("--mode", default="standard")
    args = parser.parse_args()
    if not args.data.exists():
        parser.error(f"no such file: {args.data}")
    print(json.dumps(run(args.data, args.conversations, args.copy_every, args.mode), indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
