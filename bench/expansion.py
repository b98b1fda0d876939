"""Index-time expansion by the configured model (memory/expansion.py), measured with the embedded
model on a small LoCoMo subset, beside the bound of an ideal expander and plain BM25 on the same subset.

The embedded model (Gemma 3 270M through llama.cpp) takes seconds per memory on an idle machine (minutes at a load
of 25 on 2 cores), so the subset is small: the first `--turns` turns of the first `--conversations` dev conversations (a
few dozen memories) and the
questions whose evidence lies wholly inside them. Every variant writes the same turns through anima's write path
into a fresh store and ranks the questions with `MemoryIndex.search` (as bench/locomo.py does):
  none   no expansion;
  llm    each turn expanded by the model through the follow-up (`FollowUp.expand`: the prompt of
         memory/upkeep/prompts.py, JSON-constrained), then indexed (its words and one more vector);
  ideal  each evidence turn expanded with the answers of the questions it is evidence for (what a perfect
         extractor would state: bench/ideal_expansion.py's bound, on this subset);
  bm25   plain BM25 over the turns.
Prints JSON: recall@1/5/10 and MRR@10 per variant, the seconds the model took per memory, and sample expansions.

    python bench/expansion.py --data ../shared/data/locomo/locomo_dev.json --turns 40
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.locomo import conversation_store, record_conversation, sessions  # noqa: E402
from bench.mpnet import bench_embedder  # noqa: E402
from bench.train_ranker import bm25_ranking, metrics  # noqa: E402

METRICS = ("recall@1", "recall@5", "recall@10", "mrr@10")


def subset(sample: dict, turns: int) -> tuple[dict, list[dict]]:
    """The sample cut to its first `turns` turns, and its questions answered wholly inside them."""
    kept, left = {}, turns
    conversation = sample["conversation"]
    for number, _, ts in sessions(conversation):
        if left <= 0:
            break
        kept[f"session_{number}"] = ts[:left]
        kept[f"session_{number}_date_time"] = conversation.get(f"session_{number}_date_time", "")
        left -= len(ts[:left])
    refs = {t["dia_id"] for key, ts in kept.items() if not key.endswith("date_time") for t in ts}
    questions = [q for q in sample["qa"] if q.get("category") != 5 and q.get("evidence") and set(q["evidence"]) <= refs]
    return {
        **sample,
        "conversation": {**{k: v for k, v in conversation.items() if k.startswith("speaker")}, **kept},
    }, questions


def ranked(index, sample_id: str, question: str) -> list[str]:
    from memory.retrieval.index import Query

    return [h.item.ref.split(":", 1)[1] for h in index.search(Query(text=question, k=10))]


def variant(sample: dict, questions: list[dict], embedder, expand) -> tuple[list, list[tuple[str, str]], float]:
    """Rankings of the questions after writing the turns and expanding them with `expand` (None: none)."""
    from memory.retrieval.index import MemoryIndex

    samples: list[tuple[str, str]] = []
    model_s = 0.0
    with conversation_store(None) as (db, tmp):
        recorded = record_conversation(db, sample)
        now = max((t["at"] for t in recorded if t["at"]), default=datetime.now(UTC)) + timedelta(days=1)
        index = MemoryIndex(db, embedder, chroma_path=tmp / "chroma", clock=lambda: now)
        index.sync(progress=False)
        if expand is not None:
            with db.reading() as repos:
                items = [(i.id, i.ref, i.text, i.author, i.created_at) for i in repos.items.indexed(limit=None)]
            index.follow_up.expander = expand
            t0 = time.perf_counter()
            for item_id, _ref, text, author, created in items:
                index.follow_up.expand(item_id, text, author, created)
            model_s = time.perf_counter() - t0
            with db.reading() as repos:
                samples = [
                    (i.text[:120], str((i.meta or {}).get("expansion", ""))[:240])
                    for i in repos.items.indexed(limit=None)[:4]
                ]
            index.sync()
        rankings = [
            (q["category"], ranked(index, sample["sample_id"], str(q["question"])), q["evidence"]) for q in questions
        ]
        index.close()
    return rankings, samples, model_s


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--turns", type=int, default=40, help="turns of each conversation (memories)")
    parser.add_argument("--conversations", type=int, default=1)
    parser.add_argument("--skip", type=int, default=0, help="dev conversations skipped first")
    parser.add_argument("--max-tokens", type=int, default=120, help="of each expansion (a turn's facts fit)")
    args = parser.parse_args()
    from graph.services import open_services
    from llm.embedded_model import assemble_model
    from memory.expansion import expander
    from nodes.upkeep import generator

    assemble_model()
    data = Path(tempfile.mkdtemp(prefix="anima-expansion-bench-"))
    services = open_services(data_dir=str(data), embedded_context_window=4096, timezone="UTC")
    llm = expander(generator(services, "expand", args.max_tokens, thread_id="bench", tick=0))
    embedder = bench_embedder(None)
    out: dict = {
        "benchmark": "index-time-expansion",
        "data": str(args.data),
        "model": services.llms.primary_id,
        "variants": {},
    }
    results: dict[str, list] = defaultdict(list)
    memories, model_s, shown = 0, 0.0, []
    for sample in json.loads(args.data.read_text())[args.skip : args.skip + args.conversations]:
        cut, questions = subset(sample, args.turns)
        facts: dict[str, list[str]] = defaultdict(list)
        for q in questions:
            for e in q["evidence"]:
                facts[e].append(str(q.get("answer", "")))
        ideal = {ref: "; ".join(dict.fromkeys(v)) for ref, v in facts.items()}

        def ideal_expand(text: str, author: str, when: datetime, _ideal=ideal, _cut=cut) -> str:
            ref = next(
                (
                    t["dia_id"]
                    for _, _, ts in sessions(_cut["conversation"])
                    for t in ts
                    if t.get("text") == text and t.get("speaker") == author
                ),
                None,
            )
            return _ideal.get(ref or "", "")

        turns = [
            {"ref": t["dia_id"], "text": t["text"], "author": t["speaker"], "at": when}
            for _, when, ts in sessions(cut["conversation"])
            for t in ts
        ]
        memories += len(turns)
        results["bm25"] += [(q["category"], bm25_ranking(turns, str(q["question"])), q["evidence"]) for q in questions]
        for name, expand in (("none", None), ("ideal", ideal_expand), ("llm", llm)):
            print(
                f"[{sample['sample_id']}] {name}: {len(turns)} memories, {len(questions)} questions",
                file=sys.stderr,
                flush=True,
            )
            rankings, samples, seconds = variant(cut, questions, embedder, expand)
            results[name] += rankings
            if name == "llm":
                model_s += seconds
                shown += samples
    for name, rankings in results.items():
        out["variants"][name] = {k: v for k, v in metrics(rankings).items() if k in METRICS}
    out["memories"] = memories
    out["questions"] = len(results["none"])
    out["model_seconds_per_memory"] = round(model_s / max(1, memories), 2)
    out["sample_expansions"] = [{"text": t, "expansion": e} for t, e in shown]
    print(json.dumps(out, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
