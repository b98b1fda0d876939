"""The memory index: Chroma for vectors, the database's full-text engine for words, and hybrid retrieval over both.

Persistence. The full-text documents are written in the same transaction as the catalogue row
(memory/repositories/lexical.py: FTS5 on SQLite, tsvector + GIN on PostgreSQL), so they are never behind. Vectors:
every change to `memory_items` is journalled in its own transaction (MemoryItemRepo); `sync()` replays the journal:
it embeds what changed, stores the vectors in `memory_vectors` and the whole-text vector in Chroma (Chroma's
position in the journal is kept in the collection's metadata, so a crash between the SQL commit and the Chroma
write is repaired by the next sync, from the stored vectors, embedding nothing again). Writers call `sync()` after
committing; `search()` calls it first, so writes from other processes (`run.py kb add`, `run.py say`) are seen too.
Nothing is rebuilt at start: a restarted persona's first search reads the few rows it ranks; the vectors are copied
into memory in the background (an accelerator).

Vectors. An item has a whole-item vector (the text prefixed with its author) and, when it has several sentences,
one vector per sentence, pooled from the same pass over the text when the embedder can (`embed_parts`;
`sentence_vectors: separate` encodes each on its own): a long message is found by its best sentence. All of them
are stored in the database (memory/repositories/vectors.py) and read by id to score the candidates; Chroma's index
holds only the whole-item vector (record id = item id), which finds the dense candidates. That is one record per
memory instead of 4.5 (bench/retrieval_scale.py's memories): inserting, and loading the index after a restart, cost
about a fifth as much, and the dense candidates are 100 memories rather than 200 records of fewer memories (LoCoMo
recall unchanged).

Retrieval (measured in bench/locomo.py, component by component with `--set`):
  candidates   = the full-text engine's matches of the query's selective terms ∪ Chroma's nearest vectors
  dense(item)  = 0.6 · best vector similarity + 0.4 · whole-item similarity
  BM25(item)   over the item's date, author and text, plus its neighbours' text at half weight
  both z-normalised against a uniform random sample of the corpus,
  fused = 0.3·z(BM25) + 0.7·z(dense) + author match + recency + importance
          + a "when …?" query's boost of items that say when + a named period's boost of items written then
          − the penalty of an item that asks a question (× the share of its sentences that ask)
          − the penalty of an item a newer one superseded (memory/updates.py: kept, findable, ranked lower),
  then each item takes 0.2 × the mean fused score of its neighbours in the same episode, and a reply also 0.3 ×
  the score of the question it answers; the first five are ordered again with each engine's vote (their ranks by
  BM25 and by the dense score among the first 30, in reciprocal-rank fusion's form: `engine_votes`), so of two close
  items the one both engines rank high goes first; then the k best are taken, passing over a near-copy (whole-item
  cosine ≥ 0.9) of one already taken (in meditation mode MMR, λ 0.3, picks them; `mmr_lambda` sets it for every
  mode); when the guard leaves fewer than k, the next pages of the ranking, then 4× (at most 16×) the engines'
  candidates.
When the query names a known author ("what did Caroline…"), the dense query is rewritten in that author's first
person ("Caroline: what did I…") and that author's items get a boost (memory/retrieval/query.py). A query naming
several: each one's items meet the query in their own first person, and the boost goes to those it asks about
("Jon and Gina" both; "what did Melanie say about Caroline's…" Melanie) (`each_author_query`).

The rooms. `MemoryIndex` is the facade its callers use; it composes, each in its own module under memory/retrieval/:
  vector_store.py  Chroma: the collection, its journal position, nearest-vector queries, batched writes
  journal.py       the write journal: what is pending for Chroma, and the sync that replays the catalogue's journal
  caches.py        what a process keeps: recent texts' vectors, ranking rows, documents, places, vectors, corpus
                   statistics, and their background warm-up
  ranker.py        the query (`Query`, `Hit`), candidates, the fused score, neighbours and MMR
  settings.py      the retrieval weights (`RetrievalSettings`)
One lock (the index's) guards what they keep in memory, held only for short steps: the sync embeds a changed
text and stores its vectors outside it (one sync at a time, under the journal's own lock), so a search is never
held up by another thread's long text; a search that finds another sync under way ranks without waiting for it
(the writer's own sync returns once its vectors are in: a writer that syncs then searches finds what it wrote).
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memory.clock import utcnow
from memory.db import Database
from memory.followup import FollowUp
from memory.retrieval.caches import EmbeddingCache, RetrievalCaches, record_texts
from memory.retrieval.embeddings import Embedder
from memory.retrieval.journal import WriteJournal
from memory.retrieval.ranker import Hit, Query, Ranker
from memory.retrieval.settings import RetrievalSettings
from memory.retrieval.vector_store import VectorStore, chroma_server_client, drop_chroma_database

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection

__all__ = ["Hit", "MemoryIndex", "Query", "RetrievalSettings", "chroma_server_client", "drop_chroma_database"]

log = logging.getLogger(__name__)


def _utc_now() -> datetime:
    return utcnow()


class MemoryIndex:
    """Hybrid retrieval over every tier (module doc): searches, the sync after a write, and the comparisons the
    memory manager makes, over the vector store, the write journal, the caches and the ranker it composes."""

    def __init__(
        self,
        db: Database,
        embedder: Embedder,
        *,
        chroma_path: str | Path | None = None,
        chroma_url: str | None = None,
        chroma_database: str | None = None,
        config: RetrievalSettings | None = None,
        clock: Callable[[], datetime] = _utc_now,
    ):
        self.db, self.embedder, self.clock = db, embedder, clock
        self.chroma_path, self.chroma_url = chroma_path, chroma_url
        self.chroma_database = chroma_database  # a deployment's persona: its own database on the Chroma server
        config = config or RetrievalSettings()
        self._lock = threading.RLock()
        self._loader: threading.Thread | None = None  # the embedding model, loaded while Chroma opens
        self.store = VectorStore(embedder, self._lock, path=chroma_path, url=chroma_url, database=chroma_database)
        self.caches = RetrievalCaches(db, embedder, self._lock)
        self.embedding = EmbeddingCache(embedder, self._lock, config)
        self.journal = WriteJournal(
            db, embedder, self._lock, store=self.store, caches=self.caches, embedding=self.embedding
        )
        self.ranker = Ranker(db, config, clock, caches=self.caches, store=self.store, journal=self.journal)
        # what follows a write, off the tick's path (event time, knowledge updates, a long text's other vectors,
        # the expansion): started by whoever runs the persona (graph/services.py), run by a fleet's indexing job
        self.follow_up = FollowUp(self)

    @property
    def config(self) -> RetrievalSettings:
        return self.ranker.config

    @config.setter
    def config(self, value: RetrievalSettings) -> None:
        self.ranker.config = self.embedding.config = value

    @property
    def collection(self) -> Collection:
        return self.store.collection

    record_texts = staticmethod(record_texts)

    def embed_texts(
        self, texts: list[str], cache_size: int = 512, documents: Iterable[tuple[str, str, Sequence[str]]] = ()
    ) -> np.ndarray:
        """Normalised vectors of whole texts, remembering the last `cache_size` (the reflexes embed the same
        recent outputs tick after tick). `documents`: memories about to be written (`record_texts`), embedded in
        the same call; the write then takes their vectors instead of embedding them again."""
        return self.embedding.embed_texts(texts, cache_size, documents)

    def sync(self, progress: bool = False, flush: bool = False, wait: bool = True) -> int:
        """Bring the vectors up to the journal (Chroma when enough has queued up, or when `flush` or `progress`
        asks: a bulk load); returns the number of items changed. `wait=False`: not when another thread's sync is
        embedding (a search; that thread's writer waits for its own sync)."""
        if self._loader is None and (load := getattr(self.embedder, "load", None)) is not None:
            # the first sync opens Chroma (~0.4 s); the embedding model loads meanwhile (a restart's first answer)
            self._loader = threading.Thread(target=load, name="embedder-load", daemon=True)
            self._loader.start()
            atexit.register(self._loader.join, 60)  # not cut off inside onnxruntime by the interpreter's exit
        changed = self.journal.sync(progress, flush, wait)
        if changed:
            self.follow_up.wake()
        return changed

    def flush(self) -> int:
        """Write the queued records to Chroma and move its journal position; returns how many were written."""
        return self.journal.flush()

    def close(self) -> None:
        """Write what is queued for Chroma and stop the background vector warm-up (called at exit; safe to call
        more than once)."""
        self.store.loaded()
        try:
            self.flush()
        except Exception:  # the journal still holds every change: the next start writes them
            log.exception("memory index: the queued vectors were not written; the next start writes them")
        self.follow_up.stop()
        self.caches.stop_warmup()
        self.embedding.close()

    def search(self, query: Query | str, **kwargs: Any) -> list[Hit]:
        q = query if isinstance(query, Query) else Query(text=query, **kwargs)
        self.sync(wait=False)  # another thread's sync embedding a long text: searched without waiting for it
        with self._lock, self.ranker.small_math():
            with self.db.reading() as repos:  # ranking only reads: no transaction to commit
                hits = self.ranker.rank(q, repos, self.embedding.start_texts)
            self.store.open()  # opened here, not from the warm-up's thread as well
            self.caches.start_warmup(self.close)  # after the first answer, not competing with it
            return hits

    def closest_older(
        self, item_ids: list[int], n_results: int = 16, per_item: int = 5
    ) -> dict[int, list[tuple[float, int]]]:
        """For each item: up to `per_item` older (smaller id) active items closest to its whole-item vector, as
        (cosine similarity of their whole-item vectors, their id), best first."""
        self.flush()  # the comparison runs in Chroma: it must hold everything
        with self._lock, self.ranker.small_math():
            return self.ranker.closest_older(item_ids, n_results, per_item)

    def diverse(self, refs: list[str], k: int, tier: str = "message") -> list[str]:
        """The `k` most mutually different of these items (greedy farthest-first; meditation mode)."""
        self.sync()
        with self._lock, self.ranker.small_math():
            return self.ranker.diverse(refs, k, tier)
