"""The learned ranker: a small gradient-boosted model (trained by bench/train_ranker.py on the dev conversations;
`--write` saves it as JSON in memory/retrieval/ranker_model.json) that re-orders the hybrid ranking's top candidates.
It is measured, not on the search path: leave one conversation out it scored within a point of the hand-set order
(docs/memory.md, "How well it finds"), so no model file ships and search never loads one.

Its features, per candidate (`FEATURES`): the fused score's parts (BM25, dense, author, recency, importance,
"when", period, asks, neighbours, answers), the fused score, its rank and its gap to the best; the entity graph's
activation (memory/retrieval/entities.py: both hops, the first hop alone, its rank among the candidates, how many
of the query's names the memory holds); and the 3-turn window (the best and the mean fused score of the memory and
its two neighbours among the candidates: a window scores by its best member). The model is evaluated in pure
Python/numpy (no scikit-learn at run time): each tree is a node table.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from memory.retrieval.entities import activation, extract
from memory.text import chunks, sentences, tokenize

MODEL_PATH = Path(__file__).with_name("ranker_model.json")
PARTS = ["bm25", "dense", "author", "recency", "importance", "when", "period", "asks", "neighbours", "answers"]
GRAPH_FEATURES = [
    "score",
    "rank",
    "gap",
    "activation",
    "activation_rank",
    "first_hop",
    "name_overlap",
    "window_best",
    "window_mean",
    "window_gain",
    "query_names",
    "query_length",
]
# what lets the model learn when a question turn is evidence (in LoCoMo a question tells less than its reply; in a
# user–assistant project chat the human's questions hold most of the evidence): whether the turn asks, states,
# which of its parts the query meets (words and meaning), its length against the pool's, and the pool's style
TURN_FEATURES = [
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
FEATURES = [*PARTS, *GRAPH_FEATURES, *TURN_FEATURES]


@dataclass
class GraphContext:
    """What the features read of the entity graph: entity → holders, holder → entities, and each holder's
    neighbours in its episode (for the windows)."""

    holders: dict[str, list[Hashable]]
    entities_of: dict[Hashable, list[str]]
    documents: int
    neighbours: dict[Hashable, list[Hashable]] = field(default_factory=dict)

    @classmethod
    def build(
        cls, entities: Mapping[Hashable, list[str]], order: Sequence[tuple[Any, int, Hashable]] = ()
    ) -> GraphContext:
        holders: dict[str, list[Hashable]] = defaultdict(list)
        for key, found in entities.items():
            for entity in found:
                holders[entity].append(key)
        neighbours: dict[Hashable, list[Hashable]] = defaultdict(list)
        place = {(episode, seq): key for episode, seq, key in order}
        for episode, seq, key in order:
            neighbours[key] = [n for step in (-1, 1) if (n := place.get((episode, seq + step))) is not None]
        return cls(dict(holders), dict(entities), len(entities), dict(neighbours))


def _rank_scaled(values: np.ndarray) -> np.ndarray:
    order = np.argsort(-values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values))
    return np.log1p(ranks)


def candidate_features(
    question: str,
    keys: Sequence[Hashable],
    scores: Sequence[float],
    parts: Sequence[Mapping[str, float]],
    act: Mapping[Hashable, float],
    graph: GraphContext,
    first_hop: Mapping[Hashable, float] | None = None,
    turns: Sequence[tuple[str, str]] | None = None,
    query_vector: np.ndarray | None = None,
    vectors: Sequence[np.ndarray | None] | None = None,
) -> np.ndarray:
    """The feature matrix (rows = candidates in their fused order, columns = `FEATURES`)."""
    n = len(keys)
    score = np.asarray(scores, dtype=np.float64)
    query_entities = extract(question)
    names = {e for e in query_entities if e.startswith("n:")}
    hop: Mapping[Hashable, float] = (
        first_hop
        if first_hop is not None
        else activation(query_entities, graph.holders, graph.entities_of, graph.documents, damping=0.0)
    )
    activated = np.array([act.get(k, 0.0) for k in keys])
    top_act = activated.max() if n and activated.max() > 0 else 1.0
    first = np.array([hop.get(k, 0.0) for k in keys]) / top_act
    by_key = dict(zip(keys, score.tolist()))
    floor = float(score.min()) if n else 0.0
    window_best = np.empty(n)
    window_mean = np.empty(n)
    for row, key in enumerate(keys):
        around = [by_key.get(m, floor) for m in graph.neighbours.get(key, [])]
        members = [score[row], *around]
        window_best[row] = max(members)
        window_mean[row] = sum(members) / len(members)
    name_overlap = np.array([len(names & set(graph.entities_of.get(k, ()))) for k in keys], dtype=np.float64)
    matrix = np.zeros((n, len(FEATURES)))
    for col, part in enumerate(PARTS):
        matrix[:, col] = [p.get(part, 0.0) for p in parts]
    column = {f: i for i, f in enumerate(FEATURES)}
    matrix[:, column["score"]] = score
    matrix[:, column["rank"]] = np.log1p(np.arange(n))
    matrix[:, column["gap"]] = score - (score.max() if n else 0.0)
    matrix[:, column["activation"]] = activated / top_act
    matrix[:, column["activation_rank"]] = _rank_scaled(activated) if n else 0.0
    matrix[:, column["first_hop"]] = first
    matrix[:, column["name_overlap"]] = name_overlap
    matrix[:, column["window_best"]] = window_best
    matrix[:, column["window_mean"]] = window_mean
    matrix[:, column["window_gain"]] = window_best - score
    matrix[:, column["query_names"]] = len(names)
    matrix[:, column["query_length"]] = math.log1p(len(question.split()))
    if turns is not None:
        start = column["is_question"]
        matrix[:, start : start + len(TURN_FEATURES)] = turn_features(
            question, turns, query_vector, vectors or [None] * n
        )
    return matrix


def _asks(sentence: str) -> bool:
    return sentence.rstrip().endswith("?")


def turn_features(
    question: str,
    turns: Sequence[tuple[str, str]],
    query_vector: np.ndarray | None,
    vectors: Sequence[np.ndarray | None],
) -> np.ndarray:
    """`TURN_FEATURES` of each candidate ((author, text) in the fused order; its stored vectors, row 0 the whole
    item, then one per `memory.text.chunks` piece; `query_vector` the query's)."""
    n = len(turns)
    out = np.zeros((n, len(TURN_FEATURES)))
    if not n:
        return out
    words = set(tokenize(question))
    lengths = np.array([math.log1p(len(text)) for _, text in turns])
    asks = np.array([_asks(text) for _, text in turns], dtype=np.float64)
    by_author: dict[str, list[float]] = defaultdict(list)
    for (author, _), a in zip(turns, asks):
        by_author[author].append(a)
    pool_length = float(np.median(lengths))
    for row, (author, text) in enumerate(turns):
        pieces = sentences(text) or [text]
        asking = [p for p in pieces if _asks(p)]
        stating = [p for p in pieces if not _asks(p)]
        out[row, 0] = asks[row]
        out[row, 1] = len(stating) / len(pieces)
        if words:
            out[row, 2] = len(words & set(tokenize(" ".join(asking)))) / len(words)
            out[row, 3] = len(words & set(tokenize(" ".join(stating)))) / len(words)
        stored = vectors[row] if row < len(vectors) else None
        if query_vector is not None and stored is not None and len(stored):
            parts = chunks(text)
            sims = np.asarray(stored, dtype=np.float32) @ np.asarray(query_vector, dtype=np.float32)
            piece_sims = sims[1 : 1 + len(parts)] if parts else sims[:1]
            kinds = [_asks(p) for p in parts] if parts else [_asks(text)]
            asked = [float(v) for v, k in zip(piece_sims, kinds) if k]
            stated = [float(v) for v, k in zip(piece_sims, kinds) if not k]
            out[row, 4] = max(asked, default=0.0)
            out[row, 5] = max(stated, default=0.0)
        out[row, 6] = lengths[row]
        out[row, 7] = lengths[row] - pool_length
        out[row, 10] = float(np.mean(by_author[author]))
    out[:, 8] = asks.mean()
    out[:, 9] = pool_length
    return out


def export_model(model: Any, features: Sequence[str]) -> dict[str, Any]:
    """A fitted scikit-learn HistGradientBoostingClassifier (binary) as JSON: per tree its node table."""
    trees = []
    for predictors in model._predictors:
        nodes = predictors[0].nodes
        trees.append(
            {
                "feature": nodes["feature_idx"].astype(int).tolist(),
                "threshold": [float(t) for t in nodes["num_threshold"]],
                "left": nodes["left"].astype(int).tolist(),
                "right": nodes["right"].astype(int).tolist(),
                "leaf": nodes["is_leaf"].astype(int).tolist(),
                "missing_left": nodes["missing_go_to_left"].astype(int).tolist(),
                "value": [round(float(v), 9) for v in nodes["value"]],
            }
        )
    return {
        "kind": "gradient-boosted-trees",
        "features": list(features),
        "baseline": float(np.ravel(model._baseline_prediction)[0]),
        "trees": trees,
    }


@dataclass
class TreeModel:
    """The exported model, evaluated row by row (a few dozen candidates × ~150 shallow trees)."""

    features: list[str]
    baseline: float
    trees: list[dict[str, list[Any]]]

    def score(self, matrix: np.ndarray) -> np.ndarray:
        out = np.full(len(matrix), self.baseline)
        for tree in self.trees:
            feature, threshold, left, right, leaf, missing_left, value = (
                tree["feature"],
                tree["threshold"],
                tree["left"],
                tree["right"],
                tree["leaf"],
                tree["missing_left"],
                tree["value"],
            )
            for row in range(len(matrix)):
                node = 0
                x = matrix[row]
                while not leaf[node]:
                    v = x[feature[node]]
                    if v != v:
                        node = left[node] if missing_left[node] else right[node]
                    else:
                        node = left[node] if v <= threshold[node] else right[node]
                out[row] += value[node]
        return out


@lru_cache(maxsize=2)
def load_model(path: str = str(MODEL_PATH)) -> TreeModel | None:
    """The shipped model, or None when there is none (the hybrid order stands)."""
    file = Path(path)
    if not file.exists():
        return None
    data = json.loads(file.read_text())
    return TreeModel(data["features"], data["baseline"], data["trees"])
