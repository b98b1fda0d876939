"""Re-ranking components measured leave-one-conversation-out on LoCoMo-format conversations, offline over a dump of
the hybrid ranking (so each component costs seconds to try, not a re-ingestion).

The dump (`--dump PATH`, written by bench/ltr_dump.py on first use): per conversation, every turn's stored vectors
(whole item first, then its sentences) and per question the fused top `--pool` with the ranker's parts (MMR off),
through anima's write path and `MemoryIndex.search`, as bench/locomo.py ingests. With `--second-model all-mpnet-base-v2`
a second dump
of that model's vectors is made and its dense similarity can be fused in.

Components (each with a small grid; for every held-out conversation the grid point best on the other ones is used):
  session_score   each candidate gains w · z(its session's mean of its two best fused scores): episode-level
                  retrieval folded into the turns' score (the turns of the sessions that match best rise)
  diversity       MMR also takes δ per result already chosen from the same session (several evidence turns a
                  question asks for are in different sessions)
  rocchio         dense pseudo-relevance feedback: the query vector moved towards the mean of the top 3 (β), the
                  candidates re-scored by it (weight g, z-normalised over the conversation)
  rm3             lexical pseudo-relevance feedback: the 10 best-weighted new terms of the top 3 as a second BM25
                  query (weight g)
  second_model    z(a second embedding model's dense score) added with weight g (needs --second-model)
`--learned`: a pointwise gradient-boosted ranker (scikit-learn) over the fused top 50's parts plus session, list
and similarity features (`features`), trained LOCO, with each feature group left out in turn.
The reference rows are the hybrid ranking as shipped (fused order, then MMR λ 0.7, as bench/locomo.py) and plain
BM25 on the same questions. Each component alone, all of them, and all but one (the ablation) are reported (the
combinations take, per held-out conversation, each component's value chosen without that conversation):
recall@1/5/10, MRR@10 and recall@5 by category, JSON on stdout.

    python bench/rerank_lab.py --data ../shared/data/locomo/locomo_dev.json --dump ~/.cache/anima/bench/dump.pickle
    python bench/rerank_lab.py … --second-model all-mpnet-base-v2 --second-dump ~/.cache/anima/bench/mpnet.pickle
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import pickle
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.locomo import bm25_ranking, ranking_metrics  # noqa: E402
from bench.ltr_dump import dump  # noqa: E402
from memory.text import date_words, tokenize  # noqa: E402

KS = [1, 5, 10]
MMR_POOL = 60  # the shipped ranker's MMR pool for k = 10: max(6k, 30)
GRIDS: dict[str, dict[str, list[float]]] = {
    "session_score": {"session_w": [0.0, 0.2, 0.5, 1.0]},
    "diversity": {"delta": [0.0, 0.05, 0.1, 0.2]},
    "rocchio": {"rocchio": [0.0, 0.15, 0.3]},
    "rm3": {"rm3": [0.0, 0.05, 0.1, 0.2]},
    "second_model": {"second": [0.0, 0.25, 0.5, 1.0]},
}


def dumped(data: Path, out: Path, pool: int, model: str | None, cache_dir: Path | None) -> list[dict]:
    """The dump's conversations: read from `out`, or made by bench/ltr_dump.py (anima's write path and search) and
    written there."""
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(pickle.dumps(dump(data, pool, cache_dir, {}, model)))
    conversations: list[dict] = pickle.loads(out.read_bytes())["conversations"]
    return conversations


def unit(v: np.ndarray) -> np.ndarray:
    return v / (np.linalg.norm(v) + 1e-9)


class Conversation:
    """One dumped conversation, with what the components read: whole-item vectors, sessions, BM25 statistics."""

    def __init__(self, raw: dict, second: dict | None):
        self.turns, self.questions = raw["turns"], raw["questions"]
        self.refs = [t["ref"] for t in self.turns]
        self.row = {r: n for n, r in enumerate(self.refs)}
        self.session = {t["ref"]: t["session"] for t in self.turns}
        self.whole = np.vstack([unit(raw["vectors"][r][0].astype(np.float32)) for r in self.refs])
        self.docs = [tokenize(f"{date_words(t['at'])} {t['author']} {t['text']}") for t in self.turns]
        self.df: dict[str, int] = defaultdict(int)
        for d in self.docs:
            for w in set(d):
                self.df[w] += 1
        self.avg = sum(map(len, self.docs)) / max(1, len(self.docs))
        self.tf: list[dict[str, int]] = []
        for d in self.docs:
            counts: dict[str, int] = defaultdict(int)
            for w in d:
                counts[w] += 1
            self.tf.append(counts)
        self.second: dict[str, np.ndarray] = {}
        if second is not None:  # a second model's dense score per question: 0.6 best vector + 0.4 whole (as dense)
            by_question = {q["question"]: q["vector"] for q in second["questions"]}
            stacked = [second["vectors"][r].astype(np.float32) for r in self.refs]
            for q in self.questions:
                qv = unit(by_question[q["question"]].astype(np.float32))
                scores = np.array([0.6 * (m @ qv).max() + 0.4 * (m[0] @ qv) for m in stacked])
                self.second[q["question"]] = (scores - scores.mean()) / (scores.std() + 1e-9)

    def idf(self, term: str) -> float:
        n, held = len(self.docs), self.df.get(term, 0)
        return math.log(1 + (n - held + 0.5) / (held + 0.5))

    def bm25(self, weights: dict[str, float], k1: float = 1.2, b: float = 0.75) -> np.ndarray:
        out = np.zeros(len(self.docs))
        for term, weight in weights.items():
            if not self.df.get(term):
                continue
            idf = self.idf(term)
            for i, tf in enumerate(self.tf):
                f = tf.get(term)
                if f:
                    out[i] += weight * idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len(self.docs[i]) / self.avg))
        return out


def zscored(values: np.ndarray) -> np.ndarray:
    return (values - values.mean()) / (values.std() + 1e-9)


def mmr(pool: list[str], score: dict[str, float], c: Conversation, k: int, lam: float, delta: float) -> list[str]:
    """bench/locomo.py's MMR (min-max relevance, whole-vector redundancy), plus δ per pick from the same session."""
    values = np.array([score[r] for r in pool])
    relevance = (values - values.min()) / (values.max() - values.min() + 1e-9)
    matrix = np.vstack([c.whole[c.row[r]] for r in pool])
    similarity = matrix @ matrix.T
    chosen: list[int] = []
    left = list(range(len(pool)))
    taken: dict[int, int] = defaultdict(int)
    while left and len(chosen) < k:
        redundancy = similarity[np.ix_(left, chosen)].max(axis=1) if chosen else np.zeros(len(left))
        penalty = delta * np.array([taken[c.session[pool[i]]] for i in left])
        best = left[int(np.argmax(lam * relevance[left] - (1 - lam) * redundancy - penalty))]
        chosen.append(best)
        left.remove(best)
        taken[c.session[pool[best]]] += 1
    return [pool[i] for i in chosen]


def rerank(c: Conversation, q: dict, p: dict[str, float]) -> list[str]:
    score = {x["ref"]: float(x["score"]) for x in q["candidates"]}
    refs = list(score)
    rows = np.array([c.row[r] for r in refs])
    top = sorted(refs, key=score.__getitem__, reverse=True)[:3]
    if p.get("rocchio"):
        moved = unit(
            unit(q["vector"].astype(np.float32)) + 0.3 * unit(np.mean([c.whole[c.row[r]] for r in top], axis=0))
        )
        z = zscored(c.whole @ moved)
        for r, n in zip(refs, rows):
            score[r] += p["rocchio"] * z[n]
    if p.get("rm3"):
        weights: dict[str, float] = defaultdict(float)
        for r in top:
            doc = c.docs[c.row[r]]
            for w in set(doc):
                weights[w] += c.tf[c.row[r]][w] / len(doc) * c.idf(w)
        asked = set(tokenize(q["question"]))
        expansion = dict(sorted(((w, v) for w, v in weights.items() if w not in asked), key=lambda x: -x[1])[:10])
        z = zscored(c.bm25(expansion))
        for r, n in zip(refs, rows):
            score[r] += p["rm3"] * z[n]
    if p.get("second") and c.second:
        z = c.second[q["question"]]
        for r, n in zip(refs, rows):
            score[r] += p["second"] * z[n]
    if p.get("session_w"):
        by_session: dict[int, list[float]] = defaultdict(list)
        for r in refs:
            by_session[c.session[r]].append(score[r])
        best_two = {s: float(np.mean(sorted(v, reverse=True)[:2])) for s, v in by_session.items()}
        mean, std = float(np.mean(list(best_two.values()))), float(np.std(list(best_two.values()))) + 1e-9
        for r in refs:
            score[r] += p["session_w"] * (best_two[c.session[r]] - mean) / std
    ordered = sorted(refs, key=score.__getitem__, reverse=True)
    return mmr(ordered[:MMR_POOL], score, c, max(KS), 0.7, p.get("delta", 0.0))


def loco(conversations: list[Conversation], grid: dict[str, list[float]]) -> tuple[dict, list[dict]]:
    """Per held-out conversation, the grid point with the best recall@5 on the others; the held-out rankings'
    metrics."""
    points = [dict(zip(grid, values)) for values in itertools.product(*grid.values())]
    runs: dict[int, list[list[tuple[int, list[str], set[str]]]]] = {}
    for n, point in enumerate(points):
        runs[n] = [
            [(q["category"], rerank(c, q, point), set(q["evidence"])) for q in c.questions] for c in conversations
        ]

    def recall5(rows: list[tuple[int, list[str], set[str]]]) -> float:
        return statistics.mean(len(ev & set(r[:5])) / len(ev) for _, r, ev in rows) if rows else 0.0

    held_out, chosen = [], []
    for held in range(len(conversations)):
        best = max(runs, key=lambda n: recall5([x for m, rows in enumerate(runs[n]) if m != held for x in rows]))
        chosen.append(points[best])
        held_out += runs[best][held]
    return ranking_metrics(held_out, KS), chosen


PARTS = ["bm25", "dense", "author", "recency", "importance", "when", "period", "asks", "neighbours", "answers"]
FEATURE_GROUPS = ("session", "lists", "similarity")
LEARNED_POOL = 50


def features(c: Conversation, q: dict, groups: tuple[str, ...]) -> tuple[np.ndarray, list[str]]:
    """Per candidate of the fused top 50: the ranker's parts, its score, rank and gap to the best; `session`: its
    session's best and mean-of-two scores, the session's rank, how many of the top 20 share it, its rank within the
    session and its gap to the session's best; `lists`: its rank by BM25 alone, by dense alone, and the better of
    the two; `similarity`: its whole-vector similarity to the top 5's mean and to the top 1."""
    candidates = q["candidates"][:LEARNED_POOL]
    refs = [x["ref"] for x in candidates]
    score = np.array([x["score"] for x in candidates])
    parts = np.array([[x["parts"].get(k, 0.0) for k in PARTS] for x in candidates])
    columns = [parts, score[:, None], np.arange(len(refs))[:, None], (score.max() - score)[:, None]]
    if "session" in groups:
        sessions = [c.session[r] for r in refs]
        by: dict[int, list[float]] = defaultdict(list)
        for s, v in zip(sessions, score):
            by[s].append(float(v))
        best = {s: max(v) for s, v in by.items()}
        two = {s: float(np.mean(sorted(v, reverse=True)[:2])) for s, v in by.items()}
        order = {s: n for n, s in enumerate(sorted(best, key=best.__getitem__, reverse=True))}
        in_top = defaultdict(int, {s: sessions[:20].count(s) for s in set(sessions[:20])})
        seen: dict[int, int] = defaultdict(int)
        within = []
        for s in sessions:
            within.append(seen[s])
            seen[s] += 1
        columns.append(
            np.array(
                [[best[s], two[s], order[s], in_top[s], w, best[s] - v] for s, w, v in zip(sessions, within, score)]
            )
        )
    if "lists" in groups:
        by_bm25, by_dense = np.argsort(np.argsort(-parts[:, 0])), np.argsort(np.argsort(-parts[:, 1]))
        columns.append(np.c_[by_bm25, by_dense, np.minimum(by_bm25, by_dense)])
    if "similarity" in groups:
        matrix = np.vstack([c.whole[c.row[r]] for r in refs])
        columns.append(np.c_[matrix @ unit(matrix[:5].mean(axis=0)), matrix @ matrix[0]])
    return np.hstack(columns), refs


def learned_loco(conversations: list[Conversation], groups: tuple[str, ...]) -> dict:
    """A pointwise gradient-boosted ranker (scikit-learn) over `features`, trained on all conversations but the
    held-out one; its order of the held-out questions' top 50, then the rest of the fused order."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    rows = []
    for n, c in enumerate(conversations):
        for q in c.questions:
            x, refs = features(c, q, groups)
            rows.append((n, q, x, refs, np.array([r in set(q["evidence"]) for r in refs], dtype=int)))
    held_out = []
    for held in range(len(conversations)):
        train = [r for r in rows if r[0] != held]
        model = HistGradientBoostingClassifier(
            max_iter=150,
            learning_rate=0.06,
            max_leaf_nodes=15,
            min_samples_leaf=40,
            l2_regularization=1.0,
            random_state=0,
        )
        model.fit(np.vstack([r[2] for r in train]), np.concatenate([r[4] for r in train]))
        for n, q, x, refs, _ in rows:
            if n == held:
                order = [refs[i] for i in np.argsort(-model.predict_proba(x)[:, 1], kind="stable")]
                rest = [r["ref"] for r in q["candidates"][LEARNED_POOL:]]
                held_out.append((q["category"], order + rest, set(q["evidence"])))
    return ranking_metrics(held_out, KS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"
    )
    parser.add_argument("--dump", type=Path, required=True, help="the dump (written here if absent)")
    parser.add_argument("--pool", type=int, default=150)
    parser.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache/anima/bench")
    parser.add_argument("--second-model", default=None, help="e.g. all-mpnet-base-v2 (bench/mpnet.py)")
    parser.add_argument("--second-dump", type=Path, default=None)
    parser.add_argument("--components", nargs="*", default=list(GRIDS))
    parser.add_argument(
        "--learned",
        action="store_true",
        help="also the learned ranker, LOCO: the ranker's parts alone, with every feature group, and "
        "with each group left out",
    )
    args = parser.parse_args()
    raw = dumped(args.data, args.dump, args.pool, None, args.cache_dir)
    second = None
    if args.second_model:
        if not args.second_dump:
            parser.error("--second-model needs --second-dump")
        second = dumped(args.data, args.second_dump, args.pool, args.second_model, args.cache_dir)
    components = [c for c in args.components if c != "second_model" or second is not None]
    conversations = [Conversation(r, second[n] if second else None) for n, r in enumerate(raw)]
    every = [(q["category"], q, c) for c in conversations for q in c.questions]
    result: dict[str, Any] = {
        "benchmark": "locomo-rerank-loco",
        "data": str(args.data),
        "conversations": len(conversations),
        "questions": len(every),
        "pool": args.pool,
        "bm25": ranking_metrics(
            [(cat, bm25_ranking(c.turns, q["question"]), set(q["evidence"])) for cat, q, c in every], KS
        ),
        "hybrid": ranking_metrics([(cat, rerank(c, q, {}), set(q["evidence"])) for cat, q, c in every], KS),
    }
    for name in components:
        result[name], result[f"{name}_chosen"] = loco(conversations, GRIDS[name])
        print(name, result[name]["recall@5"], file=sys.stderr, flush=True)
    if len(components) > 1:  # each held-out conversation with every component's value chosen without it

        def combined(names: list[str]) -> dict:
            held_out = []
            for held, c in enumerate(conversations):
                point = {k: v for name in names for k, v in result[f"{name}_chosen"][held].items()}
                held_out += [(q["category"], rerank(c, q, point), set(q["evidence"])) for q in c.questions]
            return ranking_metrics(held_out, KS)

        result["all"] = combined(components)
        for name in components:
            result[f"all_minus_{name}"] = combined([other for other in components if other != name])
    if args.learned:
        result["learned_parts_only"] = learned_loco(conversations, ())
        result["learned_all"] = learned_loco(conversations, FEATURE_GROUPS)
        for group in FEATURE_GROUPS:
            result[f"learned_minus_{group}"] = learned_loco(
                conversations, tuple(g for g in FEATURE_GROUPS if g != group)
            )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
