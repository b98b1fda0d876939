"""The retrieval caches' corpus statistics (memory/retrieval/caches.py): document counts and term frequencies kept
between queries, asked again when the corpus has moved."""

import threading
from types import SimpleNamespace

from memory.retrieval import caches as caching
from memory.retrieval.caches import RetrievalCaches


class Lexical:
    """The full-text repository's counting side, recording what it is asked."""

    def __init__(self, held: dict[str, int], documents: int):
        self.held, self.documents, self.asked = held, documents, []

    def document_frequencies(self, terms, cap):
        self.asked.append(sorted(terms))
        return {t: self.held.get(t, 0) for t in terms}

    def count(self):
        return self.documents

    def sample(self, size):
        return {n: (f"word{n}", "") for n in range(1, min(size, self.documents) + 1)}


def test_term_counts_are_kept_until_the_documents_are_counted_again_and_absent_terms_are_asked_again(monkeypatch):
    monkeypatch.setattr(caching, "RECOUNT_ALWAYS_BELOW", 10)
    lexical = Lexical({"carolin": 400, "adopt": 12}, documents=1000)
    repos = SimpleNamespace(items=SimpleNamespace(lexical=lexical))
    caches = RetrievalCaches(None, None, threading.RLock())
    caches.corpus_sample(repos, 16)

    assert caches.document_frequencies(repos, ["carolin", "adopt", "heron"], 100) == {
        "carolin": 400,
        "adopt": 12,
        "heron": 0,
    }
    assert caches.document_frequencies(repos, ["adopt", "heron"], 100) == {"adopt": 12, "heron": 0}
    assert lexical.asked == [["adopt", "carolin", "heron"], ["heron"]]  # a count of 0 is not kept: asked again

    lexical.held.update(heron=1, adopt=13)  # a memory about a heron and an adoption is written
    caches.applied = 5  # the journal moved by under a hundredth of the 1,000 documents: the counts stand
    caches.corpus_sample(repos, 16)
    assert caches.document_frequencies(repos, ["adopt", "heron"], 100) == {"adopt": 12, "heron": 1}

    caches.applied = 20  # past a hundredth: the documents are counted again, and every term with them
    lexical.documents = 1012
    caches.corpus_sample(repos, 16)
    assert caches.document_frequencies(repos, ["adopt"], 100) == {"adopt": 13} and lexical.asked[-1] == ["adopt"]


class Embedder:
    """A deterministic embedder recording the thread of each call and what it was asked."""

    name = "counting"

    def __init__(self):
        self.calls: list[tuple[str, list[str]]] = []

    def embed(self, texts):
        import numpy as np

        self.calls.append((threading.current_thread().name, list(texts)))
        if "boom" in texts:
            raise RuntimeError("the model failed")
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)


def test_a_query_is_embedded_on_the_embedding_thread_meanwhile_and_kept_like_any_other_text():
    import numpy as np
    import pytest

    from memory.retrieval.caches import EmbeddingCache
    from memory.retrieval.settings import RetrievalSettings

    embedder = Embedder()
    cache = EmbeddingCache(embedder, threading.RLock(), RetrievalSettings())
    with cache._lock:  # a search holds the index's lock while its vectors are made elsewhere
        vectors = cache.start_texts(["where is Ann", "Ann: where am I"])
        assert np.array_equal(vectors(), np.array([[12, 1], [15, 1]], dtype=np.float32))
    assert embedder.calls == [(embedder.calls[0][0], ["where is Ann", "Ann: where am I"])]
    assert embedder.calls[0][0].startswith("query-embedding")

    again = cache.start_texts(["Ann: where am I"])  # kept: not embedded again
    assert np.array_equal(again(), np.array([[15, 1]], dtype=np.float32)) and len(embedder.calls) == 1
    assert np.array_equal(cache.embed_texts(["where is Ann"]), np.array([[12, 1]], dtype=np.float32))

    failing = cache.start_texts(["boom"])
    with pytest.raises(RuntimeError, match="the model failed"):
        failing()  # the search sees the model's error, as when it embedded itself
    cache.close()
