"""A deterministic embedder for unit tests (real retrieval tests use the real MiniLM model)."""

from __future__ import annotations

import hashlib
import threading

import numpy as np

from memory.text import tokenize


class HashEmbedder:
    """Bag of hashed stems projected to `dim` dimensions: texts sharing words are similar."""

    name = "hash-test"

    def __init__(self, dim: int = 64):
        self.dim = dim
        self.calls = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in tokenize(text) or ["empty"]:
                digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
                rows[row, int.from_bytes(digest[:4], "little") % self.dim] += 1.0 if digest[4] % 2 else -1.0
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return rows / np.where(norms == 0, 1, norms)


class HeldEmbedder(HashEmbedder):
    """A HashEmbedder that stops inside `embed` on a call with a text holding `marker` (a long text being embedded)
    until `release` is set; `holding` is set once such a call waits, and `marked_calls` counts them."""

    def __init__(self, marker: str, dim: int = 64):
        super().__init__(dim)
        self.marker = marker
        self.holding = threading.Event()
        self.release = threading.Event()
        self.marked_calls = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        if any(self.marker in text for text in texts):
            self.marked_calls += 1
            self.holding.set()
            self.release.wait(timeout=120)  # (a bound, so a broken test ends instead of hanging the run)
        return super().embed(texts)
