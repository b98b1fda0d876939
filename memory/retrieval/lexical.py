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


@dataclass(frozen=True)
class Shape:
    """How an item's stored tokens are scored. `context_cap`: its neighbours' words weigh at most this share of the
    length of what they accompany (a short message between two long replies is not scored as the replies), None:
    always CONTEXT_WEIGHT. `passage`: own tokens per passage; an item longer than one scores as its best passage
    (passages overlap by half), so a long text is neither buried by its length nor lifted by the sheer number of
    words it holds. None: the whole item, one document."""

    context_cap: float | None = None
    passage: int | None = None
    context_floor: int = 0  # own tokens the cap counts at least (a "Wow, really?" keeps its exchange's words)


WHOLE = Shape()


def passages(own: list[str], context: list[str], shape: Shape = WHOLE) -> list[tuple[int, int, float]]:
    """The (start, end) of each passage of an item's own tokens and the weight its context's tokens get in it."""
    size = len(own)
    spans = [(0, size)]
    if shape.passage and size > shape.passage:
        step = max(1, shape.passage // 2)
        spans = [(at, min(size, at + shape.passage)) for at in range(0, size - shape.passage + step, step)]
    found = []
    for start, end in spans:
        weight = CONTEXT_WEIGHT
        if shape.context_cap is not None and context:
            weight = min(weight, shape.context_cap * max(1, end - start, shape.context_floor) / len(context))
        found.append((start, end, weight))
    return found


def scores(
    documents: dict[int, tuple[str, str]], weights: dict[str, float], average_length: float, shape: Shape = WHOLE
) -> dict[int, float]:
    """BM25 of each stored document (own tokens, context tokens) for query terms weighted by their idf (an item
    in passages: its best passage's, `Shape`).

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
        in_context = {term: context_tokens.count(term) for term, _ in present}
        spans = passages(own_tokens, context_tokens, shape)
        if len(spans) == 1:  # the whole item: each term counted at C speed, once
            counts = {term: own_tokens.count(term) for term, _ in present}
        else:  # where each term occurs, in one pass over the tokens (a long query's terms × a long text's tokens)
            wanted = {term for term, _ in present}
            at: dict[str, list[int]] = {term: [] for term in wanted}
            for n, token in enumerate(own_tokens):
                if token in wanted:
                    at[token].append(n)
        best = 0.0
        for start, end, context_weight in spans:
            norm = K1 * (1 - B + B * ((end - start) + context_weight * len(context_tokens)) / average)
            total = 0.0
            for term, w in present:
                own_tf = counts[term] if len(spans) == 1 else sum(1 for n in at[term] if start <= n < end)
                if tf := own_tf + context_weight * in_context[term]:
                    total += w * tf * (K1 + 1) / (tf + norm)
            best = max(best, total)
        found[item_id] = best
    return found


@dataclass
class CorpusSample:
    """A uniform random sample of the documents, as one inverted index: its BM25 scores for a query give the mean and
    spread of the corpus's scores (z-normalisation), and its lengths the average length."""

    ids: list[int]
    lengths: np.ndarray  # per row: a document, or a passage of one (`owners`)
    postings: dict[str, tuple[np.ndarray, np.ndarray]]  # term -> (rows, weights)
    owners: np.ndarray | None = None  # per row, the document it belongs to (None: a row per document)
    shape: Shape = WHOLE

    @classmethod
    def of(cls, documents: dict[int, tuple[str, str]], shape: Shape = WHOLE) -> CorpusSample:
        ids = sorted(documents)
        lengths: list[float] = []
        owners: list[int] = []  # the document each row (a passage, or the whole document) belongs to
        rows: dict[str, tuple[list[int], list[float]]] = {}
        for number, item_id in enumerate(ids):
            own, context = documents[item_id]
            own_tokens, context_tokens = own.split(), context.split()
            for start, end, context_weight in passages(own_tokens, context_tokens, shape):
                row = len(lengths)
                terms: dict[str, float] = {}  # bag(), inlined (2,048 documents at every start)
                for token in own_tokens[start:end]:
                    terms[token] = terms.get(token, 0.0) + 1.0
                for token in context_tokens:
                    terms[token] = terms.get(token, 0.0) + context_weight
                lengths.append((end - start) + context_weight * len(context_tokens))
                owners.append(number)
                for term, weight in terms.items():
                    where, how = rows.setdefault(term, ([], []))
                    where.append(row)
                    how.append(weight)
        postings = {t: (np.asarray(r, dtype=np.int64), np.asarray(w, dtype=np.float32)) for t, (r, w) in rows.items()}
        return cls(ids, np.asarray(lengths, dtype=np.float32), postings, np.asarray(owners, dtype=np.int64), shape)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def average_length(self) -> float:
        return float(self.lengths.mean()) if len(self.lengths) else 1.0

    def holding(self, term: str) -> int:
        found = self.postings.get(term)
        if found is None:
            return 0
        return len(found[0]) if self.owners is None else len(np.unique(self.owners[found[0]]))

    def mean_std(self, weights: dict[str, float], average_length: float) -> tuple[float, float]:
        """Mean and standard deviation of the sample's BM25 scores for these idf-weighted terms (zeros included)."""
        if not len(self.ids):
            return 0.0, 0.0
        total = np.zeros(len(self.lengths), dtype=np.float32)
        norm = K1 * (1 - B + B * self.lengths / (average_length or 1.0))
        for term, w in weights.items():
            found = self.postings.get(term)
            if found is None:
                continue
            rows, tf = found
            total[rows] += w * tf * (K1 + 1) / (tf + norm[rows])
        if self.owners is not None and len(self.owners) != len(self.ids):  # a document scores as its best passage
            best = np.zeros(len(self.ids), dtype=np.float32)
            np.maximum.at(best, self.owners, total)
            total = best
        return float(total.mean()), float(total.std())
