"""Candidate generation for list and multi-hop questions, measured leave-one-conversation-out offline over a dump of
the hybrid ranking of (nearly) every turn (bench/ltr_dump.py with `--pool 1000 --set candidates=1000`: the fused
score of each turn as anima's `MemoryIndex.search` computes it), so a variant that pulls a turn into the results
from outside the usual candidates is measured with that turn's own fused score.

Variants (each with a small grid; for every held-out conversation the grid point best on the others is used):
  pool       the fused order cut to the turns the usual candidate search finds: the full-text engine's top
             `candidates` by BM25 ∪ the top `candidates` by dense similarity (∪ their episode neighbours) —
             100 (as shipped), 200, 300
  decompose  query decomposition without an LLM: each content word of the question is its own sub-query (BM25 of
             that word alone, and the dense similarity of the word alone), the sub-queries' rankings merged with
             the fused one by reciprocal rank (weight w of the sub-queries against the fused order's 1)
  sessions   per-session diversity: a result already chosen from a session costs the next one from the same
             session δ (in units of the fused scores' spread over the top 10)
  expand     pseudo-relevance over the entity graph (memory/retrieval/entities.py): the entities of the top 3
             hits seed an activation; turns it reaches gain g · z(activation)
  word_score the decomposition as a score instead of a merge: the mean over the content words of each word's dense
             similarity to the turn's best sentence, z-normalised over the conversation, added with weight w
  session_doc  per-session retrieval: each session's turns' whole vectors averaged and its text as one BM25 document;
             the question's similarity to the session (z over the sessions) added to its turns with weight g
`--list-only`: the variant applies only to questions read as asking for a list (`asks_for_list`), the others keep the
fused order.

    B=~/.cache/anima/bench
    python bench/ltr_dump.py --data ../shared/data/locomo/locomo_dev.json --out $B/locomo-dump-full.pickle \
        --pool 1000 --set candidates=1000 --cache-dir /tmp/c        # and the same for bench/data/project_chat*.json
    python bench/candidate_lab.py --dump $B/locomo-dump-full.pickle \
        --chat-dumps $B/project_chat-dump-full.pickle $B/project_chat_long-dump-full.pickle [--list-only]
Prints JSON: per variant (LOCO) recall@1/5/10, MRR@10, recall@5 by category, and the project chats' figures with
the grid point chosen on all of LoCoMo.
"""

from __future__ import annotations

import argparse
import itertools
import json
import pickle
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.locomo import bm25_ranking, ranking_metrics  # noqa: E402
from bench.rerank_lab import Conversation, unit, zscored  # noqa: E402
from memory.retrieval.entities import activation, extract  # noqa: E402
from memory.text import STOP_WORDS, tokenize  # noqa: E402

KS = [1, 5, 10]
WORD = re.compile(r"[A-Za-z][\w'’-]*")


# "what books has …", "which cities …", "what kinds of art …", "what are some …", "how many games …", "what has X
# done/read …", "what do X and Y both …", "list …": a question whose answer gathers several memories
_PLURAL = r"(?!(?:does|has|was|is|goes|says|gets|this|his|its|us|yes)\b)(?:[a-z][a-z-]*[^s\W]s|[a-z-]*ies)"  # "books",
# "cities"; not "does", "was", "class"
_ASKS_FOR_LIST = re.compile(
    rf"^\W*(?:(?:what|which)\s+(?:(?:kinds?|types?|sorts?)\s+of\s+)?(?:(?!(?:does|has|is|was|did|do)\b)[a-z-]+\s+)?"
    rf"{_PLURAL}\b|(?:what|which)\s+(?:are|were)\s+(?:some|the|all)\b|how\s+many\b|list\b|name\b)|\bboth\b|\ball\s+the\b",
    re.IGNORECASE,
)


def asks_for_list(text: str) -> bool:
    """Whether a query asks for several things gathered from several memories (a list: "What books has Melanie
    read?", "Which cities has Jon visited?", "How many hikes …", "… both …"), which several sessions each hold a
    part of."""
    return bool(_ASKS_FOR_LIST.search(text))


class Lab:
    """The dumped conversations, with each question's full fused ranking and what the variants read."""

    def __init__(self, raw: list[dict], embed: Callable[[list[str]], np.ndarray]):
        self.conversations = [Conversation(r, None) for r in raw]
        self.embed = embed
        for c, r in zip(self.conversations, raw):
            rows = [np.vstack([unit(v.astype(np.float32)) for v in r["vectors"][ref]]) for ref in c.refs]
            c.sentence_matrix = np.vstack(rows)
            c.sentence_starts = np.r_[0, np.cumsum([len(m) for m in rows])[:-1]].astype(np.int64)
            c.entities = {ref: extract(t["text"]) for ref, t in zip(c.refs, c.turns)}
            holders: dict[str, list[str]] = defaultdict(list)
            for ref, found in c.entities.items():
                for e in found:
                    holders[e].append(ref)
            c.holders = dict(holders)
            sessions = sorted(set(c.session.values()))
            c.session_index = {s: n for n, s in enumerate(sessions)}
            c.session_vectors = np.vstack(
                [unit(np.mean([c.whole[c.row[r]] for r in c.refs if c.session[r] == s], axis=0)) for s in sessions]
            )
            for q in c.questions:
                q["fused"] = {x["ref"]: float(x["score"]) for x in q["candidates"]}
                q["parts"] = {x["ref"]: x["parts"] for x in q["candidates"]}
        words = sorted({w for c in self.conversations for q in c.questions for w in self.content_words(q["question"])})
        self.word_vectors = dict(zip(words, (unit(v) for v in embed(words)))) if words else {}

    @staticmethod
    def content_words(question: str) -> list[str]:
        return list(
            dict.fromkeys(w.lower() for w in WORD.findall(question) if w.lower() not in STOP_WORDS and tokenize(w))
        )


def usual_pool(c: Conversation, q: dict, size: int) -> set[str]:
    """The turns the shipped candidate search finds: the BM25 top `size` ∪ the dense top `size`, with neighbours."""
    parts = q["parts"]
    refs = list(parts)
    by_bm25 = sorted(
        (r for r in refs if parts[r]["bm25"] > min(p["bm25"] for p in parts.values())), key=lambda r: -parts[r]["bm25"]
    )[:size]
    by_dense = sorted(refs, key=lambda r: -parts[r]["dense"])[:size]
    found = set(by_bm25) | set(by_dense)
    return found


def decomposed(
    lab: Lab, c: Conversation, q: dict, fused_order: list[str], weight: float, k_rrf: float = 60.0
) -> dict[str, float]:
    """Reciprocal-rank merge of the fused order (weight 1) and each content word's BM25 and dense order (weight
    `weight`, shared among the sub-queries)."""
    merged: dict[str, float] = defaultdict(float)
    for rank, ref in enumerate(fused_order):
        merged[ref] += 1 / (k_rrf + rank + 1)
    if not weight:
        return dict(merged)
    if "sub_lists" not in q:
        q["sub_lists"] = sub_lists(lab, c, q["question"])
    for lists in q["sub_lists"]:
        for order in lists:
            for rank, ref in enumerate(order):
                merged[ref] += weight / len(q["sub_lists"]) / len(lists) / (k_rrf + rank + 1)
    return dict(merged)


def sub_lists(lab: Lab, c: Conversation, question: str) -> list[list[list[str]]]:
    """Per content word of the question (not the speakers' names): its BM25 order and its dense order (best
    sentence), the top 100 of each."""
    words = [w for w in lab.content_words(question) if w in lab.word_vectors]
    names = {a.lower() for a in {t["author"] for t in c.turns}}
    words = [w for w in words if w.split("'")[0].split("’")[0] not in names]
    found = []
    for w in words:
        lists = []
        lexical = c.bm25({s: 1.0 for s in tokenize(w)})
        if lexical.max() > 0:
            lists.append([c.refs[i] for i in np.argsort(-lexical)[:100] if lexical[i] > 0])
        sims = np.maximum.reduceat(c.sentence_matrix @ lab.word_vectors[w], c.sentence_starts)
        lists.append([c.refs[i] for i in np.argsort(-sims)[:100]])
        found.append(lists)
    return found


def word_similarity(lab: Lab, c: Conversation, question: str) -> np.ndarray | None:
    """Per turn: the mean over the question's content words (not the speakers' names) of the word's dense
    similarity to the turn's best sentence (None: no such word)."""
    names = {a.lower() for a in {t["author"] for t in c.turns}}
    words = [
        w for w in lab.content_words(question) if w in lab.word_vectors and w.split("'")[0].split("’")[0] not in names
    ]
    if not words:
        return None
    return np.vstack(
        [np.maximum.reduceat(c.sentence_matrix @ lab.word_vectors[w], c.sentence_starts) for w in words]
    ).mean(axis=0)


def diverse_top(order: list[str], score: dict[str, float], c: Conversation, k: int, delta: float) -> list[str]:
    """The top `k` with δ off a candidate per result already chosen from its session (δ × the top 10's spread)."""
    if not delta:
        return order[:k]
    head = order[:60]
    spread = (score[head[0]] - score[head[min(9, len(head) - 1)]]) or 1.0
    chosen: list[str] = []
    taken: dict[int, int] = defaultdict(int)
    left = list(head)
    while left and len(chosen) < k:
        best = max(left, key=lambda r: score[r] - delta * spread * taken[c.session[r]])
        chosen.append(best)
        left.remove(best)
        taken[c.session[best]] += 1
    return chosen


def rank(lab: Lab, c: Conversation, q: dict, p: dict[str, float], list_only: bool) -> list[str]:
    fused = dict(q["fused"])
    if list_only and not asks_for_list(q["question"]):
        p = {"pool": p.get("pool", 100)}
    pool = usual_pool(c, q, int(p.get("pool", 100)))
    refs = [r for r in fused if r in pool]
    score = {r: fused[r] for r in refs}
    if p.get("expand"):
        top = sorted(refs, key=score.__getitem__, reverse=True)[:3]
        seeds = [e for r in top for e in c.entities[r] if not e.startswith("w:")]
        act = activation(seeds, c.holders, c.entities, len(c.refs), damping=0.0)
        if act:
            values = np.array([act.get(r, 0.0) for r in c.refs])
            z = dict(zip(c.refs, zscored(values)))
            for r in c.refs:  # what the activation reaches joins the pool
                if act.get(r) and r not in score and r in fused:
                    score[r] = fused[r]
            for r in score:
                score[r] += p["expand"] * z[r]
    if p.get("session_doc"):
        qv = unit(q["vector"].astype(np.float32))
        z = zscored(c.session_vectors @ qv)
        for r in score:
            score[r] += p["session_doc"] * z[c.session_index[c.session[r]]]
    if p.get("word_score"):
        if "word_sims" not in q:
            q["word_sims"] = word_similarity(lab, c, q["question"])
        if q["word_sims"] is not None:
            z = zscored(q["word_sims"])
            for r in score:
                score[r] += p["word_score"] * z[c.row[r]]
    order = sorted(score, key=score.__getitem__, reverse=True)
    if p.get("decompose"):
        merged = decomposed(lab, c, q, order, p["decompose"])
        for r in merged:
            if r not in score and r in fused:
                score[r] = fused[r]
        order = sorted(merged, key=merged.__getitem__, reverse=True)
        score = merged
    return diverse_top(order, score, c, max(KS), p.get("delta", 0.0))


GRIDS: dict[str, dict[str, list[float]]] = {
    "pool": {"pool": [100, 200, 300]},
    "decompose": {"decompose": [0.0, 0.05, 0.1, 0.25, 0.5, 1.0]},
    "sessions": {"delta": [0.0, 0.1, 0.25, 0.5, 1.0]},
    "expand": {"expand": [0.0, 0.1, 0.25, 0.5]},
    "session_doc": {"session_doc": [0.0, 0.1, 0.25, 0.5]},
    "word_score": {"word_score": [0.0, 0.05, 0.1, 0.25]},
    "session_doc+word_score": {"session_doc": [0.0, 0.1, 0.25], "word_score": [0.0, 0.05, 0.1]},
    "decompose+sessions": {"decompose": [0.0, 0.25, 0.5, 1.0], "delta": [0.0, 0.1, 0.25, 0.5]},
}


def recall5(rows: list[tuple[int, list[str], set[str]]]) -> float:
    return statistics.mean(len(ev & set(r[:5])) / len(ev) for _, r, ev in rows) if rows else 0.0


def loco(lab: Lab, grid: dict[str, list[float]], list_only: bool) -> tuple[dict, list[dict], dict, list]:
    points = [dict(zip(grid, values)) for values in itertools.product(*grid.values())]
    runs = {
        n: [
            [(q["category"], rank(lab, c, q, point, list_only), set(q["evidence"])) for q in c.questions]
            for c in lab.conversations
        ]
        for n, point in enumerate(points)
    }
    held_out, chosen = [], []
    for held in range(len(lab.conversations)):
        best = max(runs, key=lambda n: recall5([x for m, rows in enumerate(runs[n]) if m != held for x in rows]))
        chosen.append(points[best])
        held_out += runs[best][held]
    overall = max(runs, key=lambda n: recall5([x for rows in runs[n] for x in rows]))
    every_point = [
        {
            **points[n],
            "recall@5": round(recall5([x for rows in runs[n] for x in rows]), 4),
            "by_category": [
                round(recall5([x for rows in runs[n] for x in rows if x[0] == cat]), 4) for cat in (1, 2, 3, 4)
            ],
        }
        for n in runs
    ]
    return ranking_metrics(held_out, KS), chosen, points[overall], every_point


def chats(labs: list[Lab], point: dict[str, float], list_only: bool) -> dict:
    rows = [
        (q["category"], rank(lab, c, q, point, list_only), set(q["evidence"]))
        for lab in labs
        for c in lab.conversations
        for q in c.questions
    ]
    return {k: v for k, v in ranking_metrics(rows, KS).items() if k != "by_category"}


def brief(metrics: dict) -> dict:
    return {
        **{k: metrics[k] for k in ("recall@1", "recall@5", "recall@10", "mrr@10")},
        "recall@5_by_category": [metrics["by_category"][c]["recall@5"] for c in sorted(metrics["by_category"])],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump", type=Path, required=True)
    parser.add_argument("--chat-dumps", type=Path, nargs="*", default=[])
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/locomo-cache-recall"))
    parser.add_argument("--variants", nargs="*", default=list(GRIDS))
    parser.add_argument("--list-only", action="store_true")
    args = parser.parse_args()
    from bench.locomo import CachedEmbedder
    from bench.mpnet import bench_embedder

    embedder = CachedEmbedder(bench_embedder(None, None, "float32"), args.cache_dir)
    lab = Lab(pickle.loads(args.dump.read_bytes())["conversations"], embedder.embed)
    chat_labs = [Lab(pickle.loads(p.read_bytes())["conversations"], embedder.embed) for p in args.chat_dumps]
    embedder.save()
    every = [(q["category"], q, c) for c in lab.conversations for q in c.questions]
    listed = [q for _, q, _ in every if asks_for_list(q["question"])]
    out: dict[str, Any] = {
        "questions": len(every),
        "read_as_lists": len(listed),
        "lists_by_category": {
            str(k): sum(1 for cat, q, _ in every if cat == k and asks_for_list(q["question"])) for k in (1, 2, 3, 4)
        },
        "bm25": brief(
            ranking_metrics(
                [(cat, bm25_ranking(c.turns, q["question"]), set(q["evidence"])) for cat, q, c in every], KS
            )
        ),
        "fused": brief(
            ranking_metrics([(cat, rank(lab, c, q, {}, False), set(q["evidence"])) for cat, q, c in every], KS)
        ),
        "fused_chats": chats(chat_labs, {}, False),
    }
    for name in args.variants:
        metrics, chosen, overall, grid = loco(lab, GRIDS[name], args.list_only)
        out[name] = {
            **brief(metrics),
            "chosen": chosen,
            "chosen_on_all": overall,
            "grid": grid,
            "chats": chats(chat_labs, overall, args.list_only),
        }
        print(name, json.dumps(out[name]), file=sys.stderr, flush=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
