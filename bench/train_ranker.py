"""The learned ranker: trains a small pointwise gradient-boosted model over the hybrid ranking's features plus the
entity graph's activation and the 3-turn window, evaluates it leave-one-conversation-out, and writes the model
(memory/retrieval/ranker_model.json, read by memory/retrieval/learned.py).

Input: candidate lists dumped by bench/ltr_dump.py (the fused top `pool` per question with its parts).

    python bench/ltr_dump.py --data ../shared/data/locomo/locomo_dev.json --out /tmp/ltr.pickle --cache-dir /tmp/c
    python bench/train_ranker.py --dump /tmp/ltr.pickle              # LOCO figures + ablation, JSON on stdout
    python bench/train_ranker.py --dump /tmp/ltr.pickle --write      # and write the model trained on all of it
    python bench/train_ranker.py --dump /tmp/ltr.pickle /tmp/chat.pickle /tmp/long.pickle   # across styles (LOCO
        over every conversation of every dump; the project chats dumped from bench/data/project_chat*.json)
    python bench/train_ranker.py --dump … --second-model multilingual-e5-small-q4 --cache-dir /tmp/c   # + e5 features
Prints JSON: per configuration and per dump, LOCO recall@1/5/10, MRR@10 and recall@5 by category, beside plain BM25
and the hybrid ranking's own order on the same questions.
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
    return {
        **{f"recall@{k}": round(statistics.mean(v), 4) for k, v in recall.items()},
        "mrr@10": round(statistics.mean(rr), 4),
        "recall@5_by_category": {str(c): round(statistics.mean(v), 4) for c, v in sorted(by_cat.items())},
    }


def graph_of(conversation: dict) -> GraphContext:
    turns = conversation["turns"]
    entities = {t["ref"]: extract(f"{t['author']}: {t['text']}") for t in turns}
    return GraphContext.build(entities, order=[(t["session"], t["seq"], t["ref"]) for t in turns])


def build(dump: dict, dataset: str = "", first: int = 0) -> list[dict]:
    """Per question: the feature matrix of its candidates, their refs, labels, its conversation (numbered from
    `first`) and its dataset."""
    rows = []
    for number, conversation in enumerate(dump["conversations"], first):
        graph = graph_of(conversation)
        turn = {t["ref"]: (t["author"], t["text"]) for t in conversation["turns"]}
        stored = conversation.get("vectors", {})
        for q in conversation["questions"]:
            cands = q["candidates"]
            if not cands:
                continue
            refs = [c["ref"] for c in cands]
            act = activation(extract(q["question"]), graph.holders, graph.entities_of, graph.documents)
            matrix = candidate_features(
                q["question"],
                refs,
                [c["score"] for c in cands],
                [c["parts"] for c in cands],
                act,
                graph,
                turns=[turn[r] for r in refs],
                query_vector=q.get("vector"),
                vectors=[stored.get(r) for r in refs],
            )
            ev = set(q["evidence"])
            rows.append(
                {
                    "conversation": number,
                    "dataset": dataset,
                    "category": q["category"],
                    "question": q["question"],
                    "refs": refs,
                    "x": matrix,
                    "y": np.array([1 if r in ev else 0 for r in refs]),
                    "evidence": q["evidence"],
                }
            )
    return rows


SECOND = ["dense2", "dense2_best", "dense2_rank"]


def second_embedding(dumps: list[dict], model: str, cache_dir: Path | None) -> dict[tuple[int, str], np.ndarray]:
    """A second embedding model's vectors of every turn ("author: text" whole, then each `chunks` piece, as the
    index embeds it) and of every question, keyed (conversation number, ref or "?question")."""
    from bench.locomo import CachedEmbedder
    from bench.mpnet import bench_embedder
    from memory.text import chunks

    embedder = bench_embedder(model, None, "float32")
    if cache_dir:
        embedder = CachedEmbedder(embedder, cache_dir)
    out: dict[tuple[int, str], np.ndarray] = {}
    number = 0
    for dump in dumps:
        for conversation in dump["conversations"]:
            texts, keys, sizes = [], [], []
            for t in conversation["turns"]:
                pieces = [f"{t['author']}: {t['text']}", *(f"{t['author']}: {p}" for p in chunks(t["text"]))]
                texts += pieces
                keys.append(t["ref"])
                sizes.append(len(pieces))
            questions = [q["question"] for q in conversation["questions"]]
            flat = np.asarray(embedder.embed(texts + questions), dtype=np.float32)
            at = 0
            for key, size in zip(keys, sizes):
                out[(number, key)] = flat[at : at + size]
                at += size
            for q in questions:
                out[(number, "?" + q)] = flat[at]
                at += 1
            number += 1
            print(f"second embedding: conversation {number}", file=sys.stderr, flush=True)
    if isinstance(embedder, CachedEmbedder):
        embedder.save()
    return out


def second_features(rows: list[dict], vectors: dict[tuple[int, str], np.ndarray]) -> None:
    """Append `SECOND` to each row's matrix: the second model's whole-item and best-piece similarity, z-scored
    within the candidates, and the rank of the whole-item one."""
    for r in rows:
        qv = vectors[(r["conversation"], "?" + r["question"])]
        whole, best = [], []
        for ref in r["refs"]:
            sims = vectors[(r["conversation"], ref)] @ qv
            whole.append(float(sims[0]))
            best.append(float(sims.max()))
        w, b = np.array(whole), np.array(best)
        z = [(v - v.mean()) / (v.std() + 1e-9) for v in (w, b)]
        order = np.argsort(-w, kind="stable")
        ranks = np.empty(len(w))
        ranks[order] = np.arange(len(w))
        r["x"] = np.hstack([r["x"], z[0][:, None], z[1][:, None], np.log1p(ranks)[:, None]])


def fit(rows: list[dict], columns: list[int], seed: int = 0, balanced: bool = False):
    """`balanced`: each dataset's questions weigh as much in all as another's (a small set is not drowned)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    x = np.vstack([r["x"][:, columns] for r in rows])
    y = np.concatenate([r["y"] for r in rows])
    weight = None
    if balanced:
        per = defaultdict(int)
        for r in rows:
            per[r["dataset"]] += 1
        weight = np.concatenate([np.full(len(r["y"]), len(rows) / (len(per) * per[r["dataset"]])) for r in rows])
    model = HistGradientBoostingClassifier(
        max_iter=150,
        learning_rate=0.06,
        max_leaf_nodes=15,
        min_samples_leaf=40,
        l2_regularization=1.0,
        random_state=seed,
    )
    model.fit(x, y, sample_weight=weight)
    return model


def loco(rows: list[dict], columns: list[int], balanced: bool = False) -> list[tuple[int, list[str], list[str], str]]:
    """Leave one conversation out (of every dataset's): each conversation ranked by a model trained on the rest."""
    out = []
    for held in sorted({r["conversation"] for r in rows}):
        model = fit([r for r in rows if r["conversation"] != held], columns, balanced=balanced)
        for r in rows:
            if r["conversation"] == held:
                p = model.predict_proba(r["x"][:, columns])[:, 1]
                order = np.argsort(-p, kind="stable")
                out.append((r["category"], [r["refs"][i] for i in order], r["evidence"], r["dataset"]))
    return out


def per_dataset(rankings: list[tuple[int, list[str], list[str], str]]) -> dict:
    return {
        name: metrics([(c, ranked, ev) for c, ranked, ev, d in rankings if d == name])
        for name in sorted({d for *_, d in rankings})
    }


TURN = [
    "is_question",
    "states",
    "overlap_asking",
    "overlap_stating",
    "dense_asking",
    "dense_stating",
    "length",
    "length_vs_pool",
    "pool_questions",
    "pool_length",
    "author_asks_share",
]
ABLATIONS = {
    "all": [],
    "no_turn": TURN,
    "no_graph": ["activation", "activation_rank", "first_hop", "name_overlap"],
    "no_window": ["window_best", "window_mean", "window_gain"],
    "no_graph_no_window": [
        "activation",
        "activation_rank",
        "first_hop",
        "name_overlap",
        "window_best",
        "window_mean",
        "window_gain",
    ],
    "no_graph_no_window_no_turn": [
        "activation",
        "activation_rank",
        "first_hop",
        "name_overlap",
        "window_best",
        "window_mean",
        "window_gain",
        *TURN,
    ],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dump",
        type=Path,
        nargs="+",
        required=True,
        help="one or more dumps (e.g. LoCoMo dev and the project chats): LOCO runs across all",
    )
    parser.add_argument("--write", action="store_true", help="write the model trained on every conversation")
    parser.add_argument("--balanced", action="store_true", help="each dump's questions weigh the same in all")
    parser.add_argument("--ablations", nargs="*", default=list(ABLATIONS))
    parser.add_argument(
        "--second-model",
        default=None,
        help="a second embedding model's similarities as features (all-mpnet-base-v2, "
        "multilingual-e5-small-q4); measured only, not written to the model",
    )
    parser.add_argument("--cache-dir", type=Path, default=None, help="the second model's embeddings between runs")
    args = parser.parse_args()
    rows: list[dict] = []
    bm25, hybrid = [], []
    first = 0
    result: dict = {"data": [], "balanced": args.balanced, "second_model": args.second_model}
    dumps = [pickle.loads(path.read_bytes()) for path in args.dump]
    for dump in dumps:
        name = Path(dump["data"]).stem
        result["data"].append(dump["data"])
        got = build(dump, name, first)
        first += len(dump["conversations"])
        rows += got
        for conversation in dump["conversations"]:
            for q in conversation["questions"]:
                if q["candidates"]:
                    bm25.append(
                        (q["category"], bm25_ranking(conversation["turns"], q["question"]), q["evidence"], name)
                    )
        hybrid += [(r["category"], r["refs"], r["evidence"], name) for r in got]
    names = list(FEATURES)
    if args.second_model:
        second_features(rows, second_embedding(dumps, args.second_model, args.cache_dir))
        names += SECOND
        ABLATIONS["no_second"] = SECOND
    result["questions"] = {name: sum(1 for r in rows if r["dataset"] == name) for name in {r["dataset"] for r in rows}}
    result["bm25"] = per_dataset(bm25)
    result["hybrid_fused_order"] = per_dataset(hybrid)
    result["pool_recall"] = round(
        statistics.mean(len(set(r["evidence"]) & set(r["refs"])) / len(set(r["evidence"])) for r in rows), 4
    )
    for name in args.ablations:
        columns = [n for n, f in enumerate(names) if f not in ABLATIONS[name]]
        result[f"learned_{name}_loco"] = per_dataset(loco(rows, columns, args.balanced))
        print(name, json.dumps(result[f"learned_{name}_loco"]), file=sys.stderr, flush=True)
    if args.write and not args.second_model:
        model = fit(rows, list(range(len(FEATURES))), balanced=args.balanced)
        MODEL_PATH.write_text(json.dumps(export_model(model, FEATURES)))
        result["model"] = {"path": str(MODEL_PATH), "bytes": MODEL_PATH.stat().st_size}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
