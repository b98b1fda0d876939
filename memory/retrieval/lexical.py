"""BM25 over the documents of the database's full-text index (memory/repositories/lexical.py).

Okapi BM25 (k1 1.2, b 0.75) of weighted bags of tokens: an item's own tokens count 1, its neighbours'
`CONTEXT_WEIGHT` (the exchange a message belongs to says what it is about). The engine (FTS5 / PostgreSQL
full-text search) finds the candidates of a query's selective terms and counts the documents holding each term;
the scores of the items a query ranks are computed here from their stored tokens, so both engines rank alike.
Corpus statistics: the number of documents and each term's document count from the engine, the average length
and the distribution of scores (for z-normalisation) from a uniform random sample of documents (`CorpusSample`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

CONTEXT_WEIGHT = 0.5
K1, B = 1.2, 0.75


def bag(own: str, context: str) -> dict[str, float]:
    """A stored document (space-separated tokens) as weighted term counts."""
    weights: dict[str, float] = {}
    for token in own.split():
        weights[token] = weights.get(token, 0.0) + 1.0
    for token in context.split():
        weights[token] = weights.get(token, 0.0) + CONTEXT_WEIGHT
    return weights


def idf(documents: int, holding: int) -> float:
    return math.log(1 + (documents - holding + 0.5) / (holding + 0.5))


def selective_terms(frequencies: dict[str, int], postings_budget: int) -> list[str]:
    """The query terms whose documents the engine reads for candidates: rarest first, while their document counts
    add up to at most `postings_budget` (always the rarest, unless even it is over the budget: a term in most
    documents finds nothing in particular, and reading its postings costs time proportional to the corpus)."""
    chosen, read = [], 0
    for term, count in sorted(frequencies.items(), key=lambda kv: (kv[1], kv[0])):
        if count == 0:  # no document holds it
            continue
        if read + count > postings_budget:
            break
        chosen.append(term)
        read += count
    return chosen


def scores(documents: dict[int, tuple[str, str]], weights: dict[str, float], average_length: float) -> dict[int, float]:
    """BM25 of each stored document (own tokens, context tokens) for query terms weighted by their idf.

    A document holding none of the terms even as a substring scores 0 without being split (most of a query's
    neighbours and dense candidates); the others count only the terms found in them as substrings."""
    found = {}
    average = average_length or 1.0
    terms = list(weights.items())
    for item_id, (own, context) in documents.items():
        present = [(term, w) for term, w in terms if term in own or term in context]
        if not present:
            found[item_id] = 0.0
            continue
        own_tokens, context_tokens = own.split(), context.split()
        norm = K1 * (1 - B + B * (len(own_tokens) + CONTEXT_WEIGHT * len(context_tokens)) / average)
        total = 0.0
        for term, w in present:
            if tf := own_tokens.count(term) + CONTEXT_WEIGHT * context_tokens.count(term):
                total += w * tf * (K1 + 1) / (tf + norm)
        found[item_id] = total
    return found


@dataclass
class CorpusSample:
    """A uniform random sample of the documents, as one inverted index: its BM25 scores for a query give the mean and
    spread of the corpus's scores (z-normalisation), and its lengths the average length."""

    ids: list[int]
    lengths: np.ndarray
    postings: dict[str, tuple[np.ndarray, np.ndarray]]  # term -> (document rows, weights)

    @classmethod
    def of(cls, documents: dict[int, tuple[str, str]]) -> "CorpusSample":
        ids = sorted(documents)
        lengths = np.zeros(len(ids), dtype=np.float32)
        rows: dict[str, tuple[list[int], list[float]]] = {}
        for row, item_id in enumerate(ids):
            own, context = documents[item_id]
            terms: dict[str, float] = {}  # bag(), inlined (2,048 documents at every start)
            for token in own.split():
                terms[token] = terms.get(token, 0.0) + 1.0
            for token in context.split():
                terms[token] = terms.get(token, 0.0) + CONTEXT_WEIGHT
            lengths[row] = sum(terms.values())
            for term, weight in terms.items():
                where, how = rows.setdefault(term, ([], []))
                where.append(row)
                how.append(weight)
        postings = {t: (np.asarray(r, dtype=np.int64), np.asarray(w, dtype=np.float32)) for t, (r, w) in rows.items()}
        return cls(ids, lengths, postings)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def average_length(self) -> float:
        return float(self.lengths.mean()) if len(self.lengths) else 1.0

    def holding(self, term: str) -> int:
        found = self.postings.get(term)
        return len(found[0]) if found is not None else 0

    def mean_std(self, weights: dict[str, float], average_length: float) -> tuple[float, float]:
        """Mean and standard deviation of the sample's BM25 scores for these idf-weighted terms (zeros included)."""
        if not len(self.ids):
            return 0.0, 0.0
        total = np.zeros(len(self.ids), dtype=np.float32)
        norm = K1 * (1 - B + B * self.lengths / (average_length or 1.0))
        for term, w in weights.items():
            found = self.postings.get(term)
            if found is None:
                continue
            rows, tf = found
            total[rows] += w * tf * (K1 + 1) / (tf + norm[rows])
        return float(total.mean()), float(total.std())
