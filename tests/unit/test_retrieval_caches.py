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

    assert caches.document_frequencies(repos, ["carolin", "adopt", "heron"], 100) == {"carolin": 400, "adopt": 12,
                                                                                      "heron": 0}
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
