"""An in-process BM25 index that is updated item by item (Okapi BM25, k1=1.2, b=0.75).

Postings are kept per term as growing lists and turned into numpy arrays the first time a query needs
them after a change, so a query costs a few vector operations per query term even at 100k items.
Documents are weighted bags of tokens: an item's own text counts 1, its neighbours' text
`CONTEXT_WEIGHT` (the exchange a message belongs to says what it is about).
Scores come back for every live document (zeros included), so callers can normalise over the corpus.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

CONTEXT_WEIGHT = 0.5


@dataclass
class _Postings:
    docs: list[int] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    arrays: tuple[np.ndarray, np.ndarray] | None = None

    def add(self, doc: int, weight: float) -> None:
        self.docs.append(doc)
        self.weights.append(weight)
        self.arrays = None

    def as_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self.arrays is None:
            self.arrays = (np.asarray(self.docs, dtype=np.int64), np.asarray(self.weights, dtype=np.float32))
        return self.arrays


class BM25Index:
    def __init__(self, k1: float = 1.2, b: float = 0.75):
        self.k1, self.b = k1, b
        self.postings: dict[str, _Postings] = {}
        self.item_of_doc: list[int] = []  # internal doc number -> memory item id
        self.doc_of_item: dict[int, int] = {}
        self.lengths: list[float] = []
        self.alive: list[bool] = []
        self.live_count = 0
        self.live_length = 0.0
        self._arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return self.live_count

    def upsert(self, item_id: int, tokens: list[str], context_tokens: list[str] = ()) -> None:
        self.remove(item_id)
        bag: Counter[str] = Counter()
        for token in tokens:
            bag[token] += 1.0
        for token in context_tokens:
            bag[token] += CONTEXT_WEIGHT
        doc = len(self.item_of_doc)
        self.item_of_doc.append(item_id)
        self.doc_of_item[item_id] = doc
        length = float(sum(bag.values()))
        self.lengths.append(length)
        self.alive.append(True)
        self.live_count += 1
        self.live_length += length
        for token, weight in bag.items():
            self.postings.setdefault(token, _Postings()).add(doc, weight)
        self._arrays = None

    def remove(self, item_id: int) -> None:
        doc = self.doc_of_item.pop(item_id, None)
        if doc is None:
            return
        self.alive[doc] = False
        self.live_count -= 1
        self.live_length -= self.lengths[doc]
        self._arrays = None
        if len(self.item_of_doc) > 1000 and self.live_count < 0.6 * len(self.item_of_doc):
            self._compact()

    def _compact(self) -> None:
        """Renumber live documents, dropping the postings of dead ones (after many updates/deletes)."""
        alive = np.asarray(self.alive)
        new_number = np.cumsum(alive) - 1
        for token in list(self.postings):
            docs, weights = self.postings[token].as_arrays()
            keep = alive[docs]
            if not keep.any():
                del self.postings[token]
                continue
            self.postings[token] = _Postings(new_number[docs[keep]].tolist(), weights[keep].tolist())
        self.item_of_doc = [item for item, live in zip(self.item_of_doc, self.alive) if live]
        self.lengths = [length for length, live in zip(self.lengths, self.alive) if live]
        self.alive = [True] * len(self.item_of_doc)
        self.doc_of_item = {item: doc for doc, item in enumerate(self.item_of_doc)}

    def _doc_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._arrays is None:
            self._arrays = (np.asarray(self.lengths, dtype=np.float32), np.asarray(self.alive, dtype=bool),
                            np.asarray(self.item_of_doc, dtype=np.int64))
        return self._arrays

    def scores(self, query_tokens: list[str]) -> "Scores":
        """BM25 scores of every document for a query; documents sharing no term (and dead ones) score 0."""
        lengths, alive, items = self._doc_arrays()
        total = np.zeros(len(lengths), dtype=np.float32)
        if self.live_count:
            average = self.live_length / self.live_count or 1.0
            norm = self.k1 * (1 - self.b + self.b * lengths / average)
            for token in set(query_tokens):
                postings = self.postings.get(token)
                if postings is None:
                    continue
                docs, weights = postings.as_arrays()
                live = alive[docs]
                df = int(live.sum())
                if not df:
                    continue
                idf = math.log(1 + (self.live_count - df + 0.5) / (df + 0.5))
                docs, weights = docs[live], weights[live]
                total[docs] += idf * weights * (self.k1 + 1) / (weights + norm[docs])
        return Scores(total, alive, items, self.doc_of_item)


@dataclass
class Scores:
    values: np.ndarray  # per internal document
    alive: np.ndarray
    items: np.ndarray  # item id per internal document
    doc_of_item: dict[int, int]

    def of(self, item_id: int) -> float:
        doc = self.doc_of_item.get(item_id)
        return float(self.values[doc]) if doc is not None else 0.0

    def mean_std(self) -> tuple[float, float]:
        """Over every live document (zeros included): the corpus statistics z-normalisation needs."""
        live = self.values[self.alive]
        return (float(live.mean()), float(live.std())) if len(live) else (0.0, 0.0)

    def top(self, n: int) -> list[int]:
        """Item ids of the `n` best-scoring documents with a score above 0, best first."""
        hits = np.flatnonzero(self.values > 0)
        if len(hits) > n:
            hits = hits[np.argpartition(-self.values[hits], n)[:n]]
        hits = hits[np.argsort(-self.values[hits])]
        return self.items[hits].tolist()
