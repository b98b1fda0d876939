"""The learned ranker: trains a small pointwise gradient-boosted model over the hybrid ranking's features plus the
entity graph's activation and the 3-turn window, evaluates it leave-one-conversation-out, and writes the model
(memory/retrieval/ranker_model.json, read by memory/retrieval/learned.py).

Input: candidate lists dumped by bench/ltr_dump.py (the fused top `pool` per question with its parts).

    python bench/ltr_dump.py --data ../shared/data/locomo/locomo_dev.json --out /tmp/ltr.pickle --cache-dir /tmp/c
    python bench/train_ranker.py --dump /tmp/ltr.pickle              # LOCO figures + ablation, JSON on stdout
    python bench/train_ranker.py --dump /tmp/ltr.pickle --write      # and write the model trained on all of it
Prints JSON: per configuration, LOCO recall@1/5/10, MRR@10 and recall@5 by category, beside plain BM25 and the
hybrid ranking's own order on the same questions.
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.locomo import bm25_ranking  # noqa: E402
from memory.retrieval.entities import activation, extract  # noqa: E402
from memory.retrieval.learned import FEATURES, MODEL_PATH, GraphContext, candidate_features, export_model  # noqa: E402

KS = (1, 5, 10)


def metrics(rankings: list[tuple[int, list[str], list[str]]]) -> dict:
    recall: dict[int, list[float]] = {k: [] for k in KS}
    by_cat: dict[int, list[float]] = defaultdict(list)
    rr = []
    for category, ranked, evidence in rankings:
        ev = set(evidence)
        for k in KS:
            recall[k].append(len(ev & set(ranked[:k])) / len(ev))
        by_cat[category].append(len(ev & set(ranked[:5])) / len(ev))
        rank = next((n for n, r in enumerate(ranked[:10], 1) if r in ev), None)
        rr.append(1 / rank if rank else 0.0)
    return {**{f"recall@{k}": round(statistics.mean(v), 4) for k, v in recall.items()},
            "mrr@10": round(statistics.mean(rr), 4),
            "recall@5_by_category": {str(c): round(statistics.mean(v), 4) for c, v in sorted(by_cat.items())}}


def graph_of(conversation: dict) -> GraphContext:
    turns = conversation["turns"]
    entities = {t["ref"]: extract(f"{t['author']}: {t['text']}") for t in turns}
    return GraphContext.build(entities, order=[(t["session"], t["seq"], t["ref"]) for t in turns])


def build(dump: dict) -> list[dict]:
    """Per question: the feature matrix of its candidates, their refs, labels, and its conversation."""
    rows = []
    for number, conversation in enumerate(dump["conversations"]):
        graph = graph_of(conversation)
        for q in conversation["questions"]:
            cands = q["candidates"]
            if not cands:
                continue
            refs = [c["ref"] for c in cands]
            act = activation(extract(q["question"]), graph.holders, graph.entities_of, graph.documents)
            matrix = candidate_features(q["question"], refs, [c["score"] for c in cands], [c["parts"] for c in cands],
                                        act, graph)
            ev = set(q["evidence"])
            rows.append({"conversation": number, "category": q["category"], "question": q["question"],
                         "refs": refs, "x": matrix, "y": np.array([1 if r in ev else 0 for r in refs]),
                         "evidence": q["evidence"]})
    return rows


def fit(rows: list[dict], columns: list[int], seed: int = 0):
    from sklearn.ensemble import HistGradientBoostingClassifier

    x = np.vstack([r["x"][:, columns] for r in rows])
    y = np.concatenate([r["y"] for r in rows])
    model = HistGradientBoostingClassifier(max_iter=150, learning_rate=0.06, max_leaf_nodes=15, min_samples_leaf=40,
                                           l2_regularization=1.0, random_state=seed)
    model.fit(x, y)
    return model


def loco(rows: list[dict], columns: list[int]) -> list[tuple[int, list[str], list[str]]]:
    out = []
    for held in sorted({r["conversation"] for r in rows}):
        model = fit([r for r in rows if r["conversation"] != held], columns)
        for r in rows:
            if r["conversation"] == held:
                p = model.predict_proba(r["x"][:, columns])[:, 1]
                order = np.argsort(-p, kind="stable")
                out.append((r["category"], [r["refs"][i] for i in order], r["evidence"]))
    return out


ABLATIONS = {
    "all": [],
    "no_graph": ["activation", "activation_rank", "first_hop", "name_overlap"],
    "no_window": ["window_best", "window_mean", "window_gain"],
    "no_graph_no_window": ["activation", "activation_rank", "first_hop", "name_overlap",
                           "window_best", "window_mean", "window_gain"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump", type=Path, required=True)
    parser.add_argument("--write", action="store_true", help="write the model trained on every conversation")
    parser.add_argument("--ablations", nargs="*", default=list(ABLATIONS))
    args = parser.parse_args()
    dump = pickle.loads(args.dump.read_bytes())
    rows = build(dump)
    result: dict = {"data": dump["data"], "questions": len(rows), "pool": dump["pool"]}
    by_question = {(c["sample_id"], q["question"]): q for c in dump["conversations"] for q in c["questions"]}
    bm25 = []
    for conversation in dump["conversations"]:
        for q in conversation["questions"]:
            bm25.append((q["category"], bm25_ranking(conversation["turns"], q["question"]), q["evidence"]))
    result["bm25"] = metrics(bm25)
    result["hybrid_fused_order"] = metrics([(r["category"], r["refs"], r["evidence"]) for r in rows])
    result["pool_recall"] = round(statistics.mean(len(set(r["evidence"]) & set(r["refs"])) / len(set(r["evidence"]))
                                                  for r in rows), 4)
    for name in args.ablations:
        columns = [n for n, f in enumerate(FEATURES) if f not in ABLATIONS[name]]
        result[f"learned_{name}_loco"] = metrics(loco(rows, columns))
        print(name, result[f"learned_{name}_loco"], file=sys.stderr, flush=True)
    del by_question
    if args.write:
        model = fit(rows, list(range(len(FEATURES))))
        MODEL_PATH.write_text(json.dumps(export_model(model, FEATURES)))
        result["model"] = {"path": str(MODEL_PATH), "bytes": MODEL_PATH.stat().st_size}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
