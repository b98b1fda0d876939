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
          − the penalty of an item that only asks a question,
  then each item takes 0.2 × the mean fused score of its neighbours in the same episode, and a reply also 0.3 ×
  the score of the question it answers; then MMR (λ 0.7; 0.3 in meditation mode) picks the k results.
When the query names a known author ("what did Caroline…"), the dense query is rewritten in that author's first
person ("Caroline: what did I…") and that author's items get a boost (memory/retrieval/query.py). A query naming
several: each one's items meet the query in their own first person, and the boost goes to those it asks about
("Jon and Gina" both; "what did Melanie say about Caroline's…" Melanie) (`each_author_query`).
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import logging
import math
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from memory.db import Database
from memory.models import MemoryItem
from memory.retrieval import query as reading
from memory.retrieval.embeddings import Embedder
from memory.retrieval.lexical import CorpusSample, idf, scores as bm25_scores, selective_terms
from memory.text import chunks, tokenize, with_author

log = logging.getLogger(__name__)

COLLECTION_PREFIX = "anima-memory"
LAYOUT = "items"  # one record per memory; a collection of the old layout (a record per sentence) is dropped
FLUSH_RECORDS = 64  # Chroma records queued before they are written…
FLUSH_SECONDS = 30.0  # …or this long after the last write
BACKFILL_PAGE = 2000  # items read at a time when a collection is (re)built
WARMUP_PAGE = 5000  # items read at a time by the background copy
AHEAD_KEPT = 16  # memories embedded ahead of their write (embed_texts' documents), kept until it: a tick writes one
FLUSH_BULK = 20000  # records a bulk load queues before it writes them (bounded memory)
RECOUNT_ALWAYS_BELOW = 10000  # documents: counting them costs ~2 ms at 10k, ~20 ms at 100k (SQLite)
DENSE_SAMPLE = 512  # of the sample, the items whose vectors estimate the dense scores' spread (a restarted
# process reads them from the database before its first answer)
RANKING_CACHE = 200_000  # items whose ranking columns, full-text document and place are kept in memory (~0.7 KB
# each, filled in the background after a start): a query reads the few hundred items it ranks from here instead of
# from SQL (~10 ms at 100k memories)
DF_EXACT_UP_TO = 1000  # PostgreSQL counts a term's documents up to this; past it the sample estimates


class RetrievalSettings(BaseModel):
    """The retrieval weights (module doc), as given by the run's settings object (`memory.retrieval`)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    dense_weight: float = Field(0.7, ge=0, le=1)  # dense vs BM25 share of the fused score
    best_vector_weight: float = Field(0.6, ge=0, le=1)  # best sentence vs whole item in the dense score
    author_boost: float = Field(1.0, ge=0)
    neighbour_weight: float = Field(0.2, ge=0)
    answer_weight: float = Field(0.3, ge=0)  # a reply inherits this share of the score of the question it answers
    question_penalty: float = Field(0.6, ge=0)  # an item that only asks (ends with "?") tells less than a reply
    when_boost: float = Field(1.0, ge=0)  # "when …?" queries: items that say when (a time expression)
    period_boost: float = Field(0.5, ge=0)  # a query naming a day, month, year or "last week": items written then
    recency_weight: float = Field(0.1, ge=0)
    recency_half_life_days: float = Field(30.0, gt=0)
    importance_weight: float = Field(0.2, ge=0)
    mmr_lambda: float = Field(0.7, ge=0, le=1)
    meditation_lambda: float = Field(0.3, ge=0, le=1)
    # a query naming several authors: each one's items are scored against the query in their first person, and
    # the authors it asks about get the boost (off: only a query naming exactly one author is read for it)
    each_author_query: bool = True
    candidates: int = Field(100, ge=1)
    sample_size: int = Field(2048, ge=16)
    lexical_postings: int = Field(4000, ge=100)  # the most postings a query's full-text candidate search reads
    # a sentence's vector: pooled from its item's pass ("pooled": one pass per item) or encoded on its own
    # ("separate": about 3× the embedding time of a bulk import, about +1 point of LoCoMo recall@5)
    sentence_vectors: Literal["pooled", "separate"] = "pooled"


@dataclass
class Query:
    text: str
    k: int = 5
    tiers: list[str] | None = None
    tags: list[str] | None = None
    tags_mode: str = "or"  # or | and
    emotions: list[str] | None = None
    since: datetime | None = None
    until: datetime | None = None
    mode: str = "standard"  # standard | concentration | meditation
    include_archived: bool = False
    exclude: set[int] = field(default_factory=set)
    mmr_lambda: float | None = None  # overrides the configured λ (the memory manager's diversity_boost)


@dataclass
class Hit:
    item: MemoryItem
    score: float
    parts: dict[str, float]


@dataclass(slots=True)
class _Ranked:
    """What ranking knows of an item (memory_items columns, read per query)."""

    tier: str
    status: str
    created: float  # unix seconds
    author: str
    episode: str | None
    seq: int | None
    importance: float
    raw_tags: list
    raw_emotions: list
    text: str

    @classmethod
    def of(cls, row) -> "_Ranked":
        focus = len(row) > 9  # ItemRepo.ranking_rows adds tags and emotions when a query filters by them
        return cls(row[1], row[2], _timestamp(row[3]), row[4] or "", row[5], row[6], 0.5 if row[7] is None else float(row[7]),
                   (row[9] or []) if focus else [], (row[10] or []) if focus else [], row[8] or "")

    @property
    def tags(self) -> frozenset[str]:
        return frozenset(str(t).lower() for t in self.raw_tags)

    @property
    def emotions(self) -> frozenset[str]:
        return frozenset(str(e).split(":")[0].strip().lower() for e in self.raw_emotions)


def _timestamp(value: datetime | None) -> float:
    if value is None:
        return 0.0
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.timestamp()


def _z_score(value: float, mean: float, std: float) -> float:
    return (value - mean) / std if std > 1e-9 else value - mean


CHROMA_TENANT = "anima"  # a deployment's tenant on a Chroma server; each persona is a database in it


def _server(url: str) -> dict[str, Any]:
    from urllib.parse import urlparse

    parts = urlparse(url)
    return {"host": parts.hostname or "localhost", "port": parts.port or 8000, "ssl": parts.scheme == "https"}


def _admin(where: dict[str, Any]):
    import chromadb

    return chromadb.AdminClient(chromadb.Settings(
        anonymized_telemetry=False, chroma_api_impl="chromadb.api.fastapi.FastAPI", chroma_server_host=where["host"],
        chroma_server_http_port=where["port"], chroma_server_ssl_enabled=where["ssl"]))


def chroma_server_client(url: str, database: str | None, settings):
    """A client of a `chroma run` server: the default database, or a persona's own (created on first use)."""
    import chromadb
    from chromadb.errors import NotFoundError

    where = _server(url)
    if database is None:
        return chromadb.HttpClient(**where, settings=settings)
    admin = _admin(where)
    try:
        admin.get_database(database, tenant=CHROMA_TENANT)
    except NotFoundError:
        try:
            admin.get_tenant(CHROMA_TENANT)
        except NotFoundError:
            _created_by_anyone(lambda: admin.create_tenant(CHROMA_TENANT))
        _created_by_anyone(lambda: admin.create_database(database, tenant=CHROMA_TENANT))
    return chromadb.HttpClient(**where, settings=settings, tenant=CHROMA_TENANT, database=database)


def _created_by_anyone(create) -> None:
    """Create, unless another worker just did (two may open the same new persona at once)."""
    from chromadb.errors import ChromaError

    try:
        create()
    except ChromaError as exc:
        if "exist" not in str(exc).lower() and "unique" not in str(exc).lower():
            raise


def drop_chroma_database(url: str, database: str) -> None:
    """A removed persona's vectors, for good."""
    from chromadb.errors import NotFoundError

    try:
        _admin(_server(url)).delete_database(database, tenant=CHROMA_TENANT)
    except NotFoundError:
        pass


class MemoryIndex:
    def __init__(self, db: Database, embedder: Embedder, *, chroma_path: str | Path | None = None,
                 chroma_url: str | None = None, chroma_database: str | None = None,
                 config: RetrievalSettings | None = None, clock=lambda: datetime.now(timezone.utc)):
        self.db, self.embedder, self.config, self.clock = db, embedder, config or RetrievalSettings(), clock
        self.chroma_path, self.chroma_url = chroma_path, chroma_url
        self.chroma_database = chroma_database  # a deployment's persona: its own database on the Chroma server
        self._lock = threading.RLock()
        self._collection = None
        self._authors: set[str] | None = None  # who wrote live items (read once, then kept up to date by sync)
        self._applied = 0  # journal position the in-process caches reflect
        self._vectors: dict[int, np.ndarray] = {}  # item id -> its vectors as float16 (row 0 = whole item)
        # what ranking reads of an item, kept while the journal says it is unchanged (first in, first out):
        self._ranked: dict[int, _Ranked] = {}  # its columns
        self._documents_of: dict[int, tuple[str, str]] = {}  # its full-text document (own tokens, context tokens)
        self._positions: dict[tuple[str, int], int | None] = {}  # (episode, seq) -> the live item there, or None
        self._documents = 0  # live full-text documents (counted again as the journal moves)
        self._counted_at = -1  # journal position of that count
        self._corpus: CorpusSample | None = None  # random documents: BM25 and dense score statistics
        self._corpus_drawn_at = 0  # documents when it was drawn
        self._sample_matrix: tuple[np.ndarray, np.ndarray] | None = None  # the sample's vectors, stacked once
        self._records: int | None = None  # vectors in the collection (cached: count() costs a round trip)
        self._warmup: threading.Thread | None = None
        self._loader: threading.Thread | None = None  # the embedding model, loaded while Chroma opens
        self._stop_warmup = threading.Event()
        self._text_vectors: OrderedDict[str, np.ndarray] = OrderedDict()  # recent texts -> whole-text vector
        self._ahead: OrderedDict[tuple, np.ndarray] = OrderedDict()  # memories embedded before their write
        self._blas = None  # threadpoolctl's controller (`_small_math`)
        # Chroma writes wait in `_pending` (record id -> vector or None for a metadata-only change, metadata) and
        # `_pending_deletes` until `flush`: one write costs ~20 ms whatever its size (measured), and a tick writes
        # a memory or two. Searches see pending items through the in-process vectors; a crash before the flush
        # loses nothing (Chroma's journal position moves only with it, so the next sync writes them again).
        self._pending: dict[str, tuple[np.ndarray | None, dict[str, Any]]] = {}
        self._pending_deletes: set[str] = set()
        self._pending_head = 0  # the journal position the pending writes bring Chroma to
        self._flushed_at = time.monotonic()
        self._written: dict[int, int] = {}  # item id -> hash of the texts its vectors were made from (this process)

    def embed_texts(self, texts: list[str], cache_size: int = 512,
                    documents: Iterable[tuple[str, str, list[str]]] = ()) -> np.ndarray:
        """Normalised vectors of whole texts, remembering the last `cache_size` (the reflexes embed the same
        recent outputs tick after tick). `documents`: memories about to be written (`record_texts`), embedded in
        the same call; the write then takes their vectors instead of embedding them again (`_embed_items`)."""
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._text_vectors]
            documents = [d for d in dict.fromkeys((p, b, tuple(c)) for p, b, c in documents) if d not in self._ahead]
        ahead: list[np.ndarray] = []
        if documents:  # one call for both: the texts as documents of one part
            made = self._document_vectors([("", text, ()) for text in missing] + documents)
            fresh, ahead = [vectors[0] for vectors in made[:len(missing)]], made[len(missing):]
        else:
            fresh = self.embedder.embed(missing) if missing else []
        with self._lock:
            for text, vector in zip(missing, fresh):
                self._text_vectors[text] = np.asarray(vector, dtype=np.float32)
            self._ahead.update(zip(documents, ahead))
            while len(self._ahead) > AHEAD_KEPT:
                self._ahead.popitem(last=False)
            vectors = [self._text_vectors[t] for t in texts]
            for text in texts:
                self._text_vectors.move_to_end(text)
            while len(self._text_vectors) > cache_size:
                self._text_vectors.popitem(last=False)
        return np.stack(vectors) if vectors else np.zeros((0, 0), dtype=np.float32)

    # ---- Chroma ------------------------------------------------------------------------------------------

    @property
    def collection(self):
        with self._lock:
            return self._open_collection()

    def _open_collection(self):
        if self._collection is None:
            import chromadb

            settings = chromadb.Settings(anonymized_telemetry=False)
            if self.chroma_url:
                client = chroma_server_client(self.chroma_url, self.chroma_database, settings)
            else:
                path = Path(self.chroma_path or "data/chroma").expanduser()
                path.mkdir(parents=True, exist_ok=True)
                client = chromadb.PersistentClient(path=str(path), settings=settings)
            name = self._collection_name()
            self._drop_old_layout(client)
            self._collection = client.get_or_create_collection(
                name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}},
                metadata={"journal": 0, "embedder": self.embedder.name})
        return self._collection

    def _collection_name(self) -> str:
        name = re.sub(r"[^a-zA-Z0-9._-]", "-", f"{COLLECTION_PREFIX}-{self.embedder.name}")[:54].strip("-._")
        return f"{name}-{LAYOUT}"

    @staticmethod
    def _drop_old_layout(client) -> None:
        """Collections of the layout before `memory_vectors` (a record per sentence, named without the layout):
        their vectors are derived data, made again by the first sync (with progress), so they only take room."""
        from chromadb.errors import NotFoundError

        for collection in client.list_collections():
            name = getattr(collection, "name", collection)
            if name.startswith(f"{COLLECTION_PREFIX}-") and not name.endswith(f"-{LAYOUT}"):
                try:
                    client.delete_collection(name)
                except (NotFoundError, ValueError):  # another process dropped it first
                    continue
                log.warning("memory index: vectors now have one record per memory (%s dropped); every memory is "
                            "embedded again once", name)

    def _record_count(self) -> int:
        if self._records is None:
            self._records = self.collection.count()
        return self._records

    def _chroma_position(self) -> int:
        return int((self.collection.metadata or {}).get("journal", 0))

    @staticmethod
    def record_texts(text: str, author: str = "", title: str = "") -> tuple[str, str, list[str]]:
        """(prefix, body, chunks of body) of a memory: its whole vector is of prefix + body, one more per chunk."""
        prefix = with_author(author, f"{title}\n" if title else "")
        return prefix, text or "", chunks(text or "")

    @classmethod
    def _record_texts(cls, item: MemoryItem) -> tuple[str, str, list[str]]:
        return cls.record_texts(item.text, item.author, item.title)

    @classmethod
    def _texts_key(cls, item: MemoryItem) -> str:
        """A digest of the texts an item's vectors are made from, the same in every process."""
        prefix, body, parts = cls._record_texts(item)
        return hashlib.blake2b("\x1f".join((prefix, body, *parts)).encode(), digest_size=16).hexdigest()

    def _embed_items(self, items: list[MemoryItem]) -> list[np.ndarray]:
        """Each item's vectors (row 0 the whole item); those `embed_texts` made ahead of the write are taken."""
        documents = [(p, b, tuple(c)) for p, b, c in (self._record_texts(item) for item in items)]
        ready = {d: self._ahead.pop(d) for d in documents if d in self._ahead}
        todo = [d for d in dict.fromkeys(documents) if d not in ready]
        ready.update(zip(todo, self._document_vectors(todo) if todo else []))
        return [ready[d] for d in documents]

    def _document_vectors(self, documents: list[tuple[str, str, Any]]) -> list[np.ndarray]:
        """Each (prefix, body, chunks)'s vectors (row 0 prefix + body): one pass per document when the embedder
        pools its sentences from it (`embed_parts`), else every text on its own; all in one call."""
        embed_parts = getattr(self.embedder, "embed_parts", None) if self.config.sentence_vectors == "pooled" else None
        if embed_parts is not None:
            return [np.asarray(v, dtype=np.float32) for v in embed_parts([(p, b, list(c)) for p, b, c in documents])]
        texts = [text for prefix, body, parts in documents for text in [prefix + body, *(prefix + p for p in parts)]]
        flat = np.asarray(self.embedder.embed(texts), dtype=np.float32)
        found, at = [], 0
        for _, _, parts in documents:
            found.append(flat[at:at + 1 + len(parts)])
            at += 1 + len(parts)
        return found

    @staticmethod
    def _record_meta(item: MemoryItem) -> dict[str, Any]:
        return {"item_id": item.id, "tier": item.tier, "status": item.status, "created": _timestamp(item.created_at)}

    def _queue_vectors(self, repos, items: list[MemoryItem], removed: list[int], progress: bool = False,
                       done_before: int = 0, total: int | None = None, started: float | None = None) -> None:
        """Store the vectors of changed items and queue their Chroma records. An item whose texts did not change
        (a neighbour's context, its status) keeps its vectors: only its metadata is queued, or, when another
        process or an earlier run made them, the stored vectors are taken instead of embedding it again."""
        gone = set(removed)
        for item_id in gone:
            self._pending_deletes.add(str(item_id))
            self._pending.pop(str(item_id), None)
            self._written.pop(item_id, None)
            self._vectors.pop(item_id, None)
        if gone:
            with self.db.unit() as writer:
                writer.items.vectors.remove(gone)
        fresh: list[MemoryItem] = []
        for item in items:
            if self._written.get(item.id) == self._texts_key(item):
                record = str(item.id)
                self._pending[record] = (self._pending.get(record, (None, None))[0], self._record_meta(item))
            else:
                fresh.append(item)
        batch, started = 256, started or time.monotonic()
        for start in range(0, len(fresh), batch):
            part_items = fresh[start:start + batch]
            keys = {item.id: self._texts_key(item) for item in part_items}
            stored = repos.items.vectors.get(self.embedder.name, keys)  # read in the sync's own transaction
            made = {item_id: vectors.vectors for item_id, vectors in stored.items() if vectors.texts_key == keys[item_id]}
            todo = [item for item in part_items if item.id not in made]
            if todo:
                embedded = [(item.id, keys[item.id], vectors) for item, vectors in zip(todo, self._embed_items(todo))]
                with self.db.unit() as writer:  # its own short transaction: a bulk load does not hold writers up
                    writer.items.vectors.put(self.embedder.name, embedded)
                made.update({item_id: vectors.astype(np.float16) for item_id, _, vectors in embedded})
            for item in part_items:
                record = str(item.id)
                self._vectors[item.id] = made[item.id]
                self._pending[record] = (made[item.id][0].astype(np.float32), self._record_meta(item))
                self._pending_deletes.discard(record)
                self._written[item.id] = keys[item.id]
            self._sample_matrix = None if self._corpus and set(self._corpus.ids) & set(keys) else self._sample_matrix
            if len(self._pending) >= FLUSH_BULK:  # a bulk load writes as it goes (Chroma's journal position
                self.flush()  # stays where it was until everything is written)
            if progress and (len(fresh) > batch or total):
                done = done_before + min(len(fresh), start + batch)
                log.info("indexed %d/%d memories (%.0f/s)", done, total or len(fresh),
                         (done) / max(1e-6, time.monotonic() - started))

    def flush(self) -> int:
        """Write the queued records to Chroma and move its journal position; returns how many were written."""
        with self._lock:
            if not self._pending and not self._pending_deletes and self._pending_head <= self._chroma_position():
                return 0
            collection = self.collection
            deletes = sorted(self._pending_deletes - set(self._pending))
            for start in range(0, len(deletes), 5000):
                collection.delete(ids=deletes[start:start + 5000])
            full = [(r, v, m) for r, (v, m) in self._pending.items() if v is not None]
            for start in range(0, len(full), 5000):
                chunk = full[start:start + 5000]
                collection.upsert(ids=[r for r, _, _ in chunk], embeddings=np.stack([v for _, v, _ in chunk]),
                                  metadatas=[m for _, _, m in chunk])
            metadata_only = [(r, m) for r, (v, m) in self._pending.items() if v is None]
            for start in range(0, len(metadata_only), 5000):
                chunk = metadata_only[start:start + 5000]
                collection.update(ids=[r for r, _ in chunk], metadatas=[m for _, m in chunk])
            collection.modify(metadata={"journal": self._pending_head, "embedder": self.embedder.name})
            written = len(self._pending) + len(deletes)
            self._pending, self._pending_deletes, self._records = {}, set(), None
            self._flushed_at = time.monotonic()
            return written

    # ---- sync --------------------------------------------------------------------------------------------

    def _start_warmup(self) -> None:
        """Copy every stored vector into memory in the background (once per process, on first use)."""
        if self._warmup is not None or self._stop_warmup.is_set():
            return
        self._open_collection()  # opened here, not from two threads at once
        self._warmup = threading.Thread(target=self._warm_vectors, name="memory-warmup", daemon=True)
        # a daemon thread still inside Chroma's native code when the interpreter finalises crashes it
        # (measured: SIGSEGV when `kb add` exited mid-warm-up), so exit stops it between two pages first
        atexit.register(self.close)
        self._warmup.start()

    def close(self) -> None:
        """Write what is queued for Chroma and stop the background vector warm-up (called at exit; safe to call
        more than once)."""
        try:
            self.flush()
        except Exception:  # the journal still holds every change: the next start writes them
            log.exception("memory index: the queued vectors were not written; the next start writes them")
        self._stop_warmup.set()
        if self._warmup is not None:
            self._warmup.join(timeout=60)
            atexit.unregister(self.close)

    def _warm_vectors(self) -> None:
        """Copy every stored vector, and what ranking reads of every item (its columns, full-text document and
        place), into the in-process caches in the background, so a restarted persona's searches do not each read
        their few hundred items from the database (~10 ms a query at 100k memories, until warm)."""
        try:
            started = time.monotonic()
            vectors = self._warm_pages(lambda repos, after: repos.items.vectors.page(self.embedder.name, after,
                                                                                     WARMUP_PAGE), self._keep_vectors)
            rows = self._warm_pages(lambda repos, after: self._ranking_page(repos, after),
                                    self._keep_ranking, limit=RANKING_CACHE)
            log.info("memory warmed: %d items' vectors, %d items' ranking rows in %.1fs", vectors, rows,
                     time.monotonic() - started)
        except Exception:  # the caches are only an accelerator; misses are read on demand
            log.debug("memory warm-up stopped", exc_info=True)
        finally:
            atexit.unregister(self.close)  # done: nothing to stop at exit, and the index can be collected

    def _warm_pages(self, read, keep, limit: int | None = None) -> int:
        """Page through `read(repos, after_id) -> {id: value}` and `keep` each page, unless the journal moved while
        it was read (a change the sync has already dropped from the caches must not come back stale): then read it
        again."""
        after, copied = 0, 0
        while not self._stop_warmup.is_set() and (limit is None or copied < limit):
            seen = self._applied
            with self.db.unit() as repos:
                page = read(repos, after)
            if not page:
                break
            with self._lock:
                if self._applied != seen:
                    continue
                keep(page)
            copied, after = copied + len(page), max(page)
        return copied

    def _keep_vectors(self, page: dict) -> None:
        for item_id, stored in page.items():
            self._vectors.setdefault(item_id, stored.vectors)

    @staticmethod
    def _ranking_page(repos, after: int) -> dict[int, tuple[_Ranked, tuple[str, str]]]:
        rows = {row.id: _Ranked.of(row) for row in repos.items.ranking_page(after, WARMUP_PAGE)}
        documents = repos.items.lexical.documents(rows)
        return {i: (ranked, documents.get(i, ("", ""))) for i, ranked in rows.items()}

    def _keep_ranking(self, page: dict) -> None:
        for item_id, (ranked, document) in page.items():
            self._ranked.setdefault(item_id, ranked)
            self._documents_of.setdefault(item_id, document)
            if ranked.episode is not None and ranked.seq is not None:
                self._positions.setdefault((ranked.episode, ranked.seq), item_id)

    def sync(self, progress: bool = False, flush: bool = False) -> int:
        """Bring the vectors up to the journal (Chroma when enough has queued up, or when `flush` or `progress`
        asks: a bulk load); returns the number of items changed."""
        if self._loader is None and (load := getattr(self.embedder, "load", None)) is not None:
            # the first sync opens Chroma (~0.4 s); the embedding model loads meanwhile (a restart's first answer)
            self._loader = threading.Thread(target=load, name="embedder-load", daemon=True)
            self._loader.start()
            atexit.register(self._loader.join, 60)  # not cut off inside onnxruntime by the interpreter's exit
        with self._lock:
            changed = self._sync(progress)
            if flush or progress or len(self._pending) >= FLUSH_RECORDS or \
                    time.monotonic() - self._flushed_at >= FLUSH_SECONDS:
                self.flush()
            return changed

    def _sync(self, progress: bool) -> int:
        with self.db.unit() as repos:
            head = repos.items.journal_head()
            chroma_at = max(self._chroma_position(), self._pending_head)
            if not self._applied and not self._vectors and self._authors is None:
                self._applied = head  # a new process: its caches are empty, so nothing in them can be stale
            if head <= self._applied and head <= chroma_at:
                return 0
            if chroma_at == 0 and head:  # a new collection, or one whose first fill was cut short: page through all
                return self._backfill(repos, head, progress)
            since = min(chroma_at, self._applied)
            changed = repos.items.changed_since(since, head) if head > since else []
            rows = repos.items.many(changed)
            live = [rows[i] for i in changed if i in rows and rows[i].status != "deleted"]
            removed = [i for i in changed if i not in rows or rows[i].status == "deleted"]
            if self._authors is not None:
                self._authors |= {item.author or "" for item in live}
            if head > chroma_at:  # (the same range as `changed` when the in-process state is where Chroma is)
                embedded_here = changed if since == chroma_at else repos.items.changed_since(chroma_at, head)
                self._queue_vectors(repos, [rows[i] for i in embedded_here if i in rows and rows[i].status != "deleted"],
                                    [i for i in embedded_here if i not in rows or rows[i].status == "deleted"], progress)
                self._pending_head = head
            else:
                embedded_here = []
            # items another process changed and already wrote to Chroma: forget their cached vectors
            for item_id in set(changed) - set(embedded_here):
                self._vectors.pop(item_id, None)
            for item_id in removed:
                self._vectors.pop(item_id, None)
            self._forget_ranking(changed, rows.values())
            self._applied = head
            return len(changed)

    def _forget_ranking(self, changed: Iterable[int], rows: Iterable[MemoryItem]) -> None:
        """Drop what ranking keeps of changed items, and the positions they hold or held (a new turn fills one)."""
        for item_id in changed:
            self._ranked.pop(item_id, None)
            self._documents_of.pop(item_id, None)
        for row in rows:
            self._positions.pop((row.episode, row.seq), None)

    def _backfill(self, repos, head: int, progress: bool) -> int:
        """Embed every live item into a new (or emptied) collection, a page at a time (bounded memory)."""
        self._ranked, self._documents_of, self._positions = {}, {}, {}
        total, done, after, started = repos.items.lexical.count() if progress else 0, 0, 0, time.monotonic()
        while True:
            page = repos.items.indexed(after_id=after, limit=BACKFILL_PAGE)
            if not page:
                break
            if self._authors is not None:
                self._authors |= {item.author or "" for item in page}
            self._queue_vectors(repos, page, [], progress, done, total or None, started)
            done, after = done + len(page), page[-1].id
        self._pending_head, self._applied = head, head
        return done

    # ---- dense helpers -----------------------------------------------------------------------------------

    @staticmethod
    def _kept(cache: dict, fresh: dict) -> None:
        cache.update(fresh)
        for key in list(itertools.islice(cache, max(0, len(cache) - RANKING_CACHE))):
            del cache[key]

    def _ranking_meta(self, repos, item_ids: Iterable[int], focus: bool) -> dict[int, _Ranked]:
        """What ranking reads of these items (a query filtering by tags or emotions reads them from SQL)."""
        if focus:
            return {i: _Ranked.of(row) for i, row in repos.items.ranking_rows(item_ids, focus).items()}
        found = {i: m for i in item_ids if (m := self._ranked.get(i)) is not None}
        missing = [i for i in item_ids if i not in found]
        if missing:
            fresh = {i: _Ranked.of(row) for i, row in repos.items.ranking_rows(missing).items()}
            self._kept(self._ranked, fresh)
            found.update(fresh)
        return found

    def _documents_for(self, repos, item_ids: Iterable[int]) -> dict[int, tuple[str, str]]:
        found = {i: d for i in item_ids if (d := self._documents_of.get(i)) is not None}
        missing = [i for i in item_ids if i not in found]
        if missing:
            fresh = repos.items.lexical.documents(missing)
            self._kept(self._documents_of, fresh)
            found.update(fresh)
        return found

    def _items_at(self, repos, positions: set[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """(episode, seq) -> the live item there, for the positions that hold one."""
        missing = [p for p in positions if p not in self._positions]
        if missing:
            at = repos.items.at_positions(missing)
            self._kept(self._positions, {p: at.get(p) for p in missing})
        return {p: i for p in positions if (i := self._positions.get(p)) is not None}

    def _vectors_of(self, repos, item_ids: Iterable[int]) -> dict[int, np.ndarray]:
        """Every stored vector of these items (row 0 = the whole item), from memory or else from the database."""
        wanted = list(item_ids)
        missing = [i for i in wanted if i not in self._vectors]
        if missing:
            for item_id, stored in repos.items.vectors.get(self.embedder.name, missing).items():
                self._vectors[item_id] = stored.vectors
        return {i: self._vectors[i] for i in wanted if i in self._vectors}

    @staticmethod
    def _stack(rows: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Items' vectors as one float32 matrix, with the row where each item starts."""
        starts = np.r_[0, np.cumsum([len(r) for r in rows])[:-1]].astype(np.int64)
        return np.vstack(rows).astype(np.float32), starts

    def _dense_scores(self, stacked: tuple[np.ndarray, np.ndarray], qv: np.ndarray) -> np.ndarray:
        """Per item: w · its best vector's similarity + (1 − w) · its whole-item vector's similarity."""
        matrix, starts = stacked
        sims = matrix @ qv
        w = self.config.best_vector_weight
        return w * np.maximum.reduceat(sims, starts) + (1 - w) * sims[starts]

    # ---- corpus statistics -------------------------------------------------------------------------------

    def _corpus_sample(self, repos) -> CorpusSample:
        """The number of documents (counted again when the journal moves; past RECOUNT_ALWAYS_BELOW documents, once
        it has moved by a hundredth of them) and a uniform random sample of them (drawn again once the corpus has
        changed by a tenth)."""
        head = self._applied
        if self._counted_at < 0 or (head != self._counted_at and (self._documents < RECOUNT_ALWAYS_BELOW or
                                                                  head - self._counted_at > self._documents // 100)):
            self._documents, self._counted_at = repos.items.lexical.count(), head
        size = self._documents
        if self._corpus is None or abs(size - self._corpus_drawn_at) > 0.1 * max(1, self._corpus_drawn_at) or \
                (size and not len(self._corpus)):
            self._corpus = CorpusSample.of(repos.items.lexical.sample(self.config.sample_size))
            self._corpus_drawn_at, self._sample_matrix = size, None
        return self._corpus

    def _sample_dense(self, qv: np.ndarray, repos) -> tuple[float, float]:
        """Mean and std of the sample's dense scores for this query (z-normalisation of dense scores)."""
        if self._sample_matrix is None:
            everyone = self._corpus.ids if self._corpus else []
            ids = everyone[::max(1, len(everyone) // DENSE_SAMPLE)][:DENSE_SAMPLE]  # spread over the (sorted) sample
            vectors = self._vectors_of(repos, ids)
            if not vectors:
                return 0.0, 0.0
            self._sample_matrix = self._stack(list(vectors.values()))
        values = self._dense_scores(self._sample_matrix, qv)
        return float(values.mean()), float(values.std())

    # ---- search ------------------------------------------------------------------------------------------

    def _allowed(self, meta: _Ranked | None, q: Query) -> bool:
        if meta is None or meta.status == "deleted" or (meta.status == "archived" and not q.include_archived):
            return False
        if q.tiers and meta.tier not in q.tiers:
            return False
        if q.since and meta.created < _timestamp(q.since):
            return False
        if q.until and meta.created > _timestamp(q.until):
            return False
        return True

    def _matches_focus(self, meta: _Ranked, q: Query) -> bool:
        """Concentration: tags and/or emotions (`tags_mode` and|or)."""
        checks = []
        if q.tags:
            wanted = {t.lower() for t in q.tags}
            checks.append(wanted <= meta.tags if q.tags_mode == "and" else bool(wanted & meta.tags))
        if q.emotions:
            wanted = {e.lower() for e in q.emotions}
            checks.append(wanted <= meta.emotions if q.tags_mode == "and" else bool(wanted & meta.emotions))
        if not checks:
            return True
        return all(checks) if q.tags_mode == "and" else any(checks)

    def _small_math(self):
        """One BLAS thread while ranking: its matrices are small, and two threads on a busy 2-core machine wait for
        each other (measured: a 60×60 product 0.02 ms on one thread, 5 ms on two under load)."""
        if self._blas is None:
            from threadpoolctl import ThreadpoolController

            self._blas = ThreadpoolController()
        return self._blas.limit(limits=1, user_api="blas")

    def search(self, query: Query | str, **kwargs: Any) -> list[Hit]:
        q = query if isinstance(query, Query) else Query(text=query, **kwargs)
        self.sync()
        with self._lock, self._small_math():
            with self.db.unit() as repos:
                hits = self._search(q, repos)
            self._start_warmup()  # after the first answer, not competing with it
            return hits

    def _search(self, q: Query, repos) -> list[Hit]:
        cfg = self.config
        if not q.text.strip():
            return []
        corpus = self._corpus_sample(repos)
        if not self._documents:
            return []
        if self._authors is None:
            self._authors = repos.items.authors()
        if cfg.each_author_query:
            named = reading.named_authors(q.text, self._authors)
        else:
            named = [one] if (one := reading.about_author(q.text, self._authors)) else []
        asked = set(reading.subjects(q.text, named))
        # the dense query of each named author's items, in that author's first person; anyone else's: the first
        # asked-about author's (or the query as it is)
        rewrites = {a: reading.first_person(q.text, a) for a in named}
        dense_text = rewrites[reading.subjects(q.text, named)[0]] if named else q.text
        dense_texts = list(dict.fromkeys([dense_text, *rewrites.values()]))
        now = self.clock()
        periods = [(_timestamp(r.start), _timestamp(r.end), r.weight) for r in reading.time_ranges(q.text, now)]
        asks_when = reading.asks_when(q.text)

        # words: the engine's candidates for the selective terms; BM25 weights from the corpus's document counts
        terms = list(dict.fromkeys(tokenize(q.text)))
        cap = DF_EXACT_UP_TO
        held = repos.items.lexical.document_frequencies(terms, cap)
        for term, count in held.items():  # PostgreSQL counts only up to the cap: estimate past it from the sample
            if count >= cap and len(corpus):
                held[term] = max(count, round(corpus.holding(term) / len(corpus) * self._documents))
        weights = {t: idf(max(self._documents, 1), min(c, self._documents)) for t, c in held.items() if c}
        pool = cfg.candidates * (3 if q.mode == "meditation" else 1)
        lexical = repos.items.lexical.candidates(selective_terms(held, cfg.lexical_postings), pool)

        # meaning: Chroma's nearest vectors (and those still queued for it)
        query_vectors = self.embed_texts(dense_texts)  # the recall query is often the thought novelty just embedded
        qv = query_vectors[0]
        where: list[dict[str, Any]] = []  # status is checked below: archived items are few, a filter costs time
        if q.tiers:
            where.append({"tier": {"$in": list(q.tiers)}})
        if q.since:
            where.append({"created": {"$gte": _timestamp(q.since)}})
        if q.until:
            where.append({"created": {"$lte": _timestamp(q.until)}})
        # Chroma answers with what it has when it holds fewer records (its count() costs a scan: ~170 ms at 45k)
        got = self.collection.query(query_embeddings=list(query_vectors), n_results=pool,
                                    where=(where[0] if len(where) == 1 else {"$and": where}) if where else None,
                                    include=["distances"])  # record ids are item ids
        queued = [int(record) for record, (vector, _) in self._pending.items() if vector is not None]
        dense_items = list(dict.fromkeys([int(record) for records in got["ids"] for record in records] + queued))

        focus = bool(q.tags or q.emotions)
        meta = self._ranking_meta(repos, list(dict.fromkeys(lexical + dense_items)), focus)
        lexical = [i for i in lexical if self._allowed(meta.get(i), q)]
        dense_items = [i for i in dense_items if self._allowed(meta.get(i), q)]
        candidates = list(dict.fromkeys(lexical + dense_items))
        positions = {(m.episode, m.seq + step) for i in candidates if (m := meta[i]).episode is not None
                     and m.seq is not None for step in (-1, 1)}
        at = self._items_at(repos, positions)
        meta.update(self._ranking_meta(repos, [i for i in dict.fromkeys(at.values()) if i not in meta], focus))
        before = {i: at.get((m.episode, m.seq - 1)) for i in candidates if (m := meta[i]).seq is not None}
        after = {i: at.get((m.episode, m.seq + 1)) for i in candidates if (m := meta[i]).seq is not None}
        neighbours = {i: [n for n in (before.get(i), after.get(i)) if n is not None and self._allowed(meta.get(n), q)]
                      for i in candidates}
        scored = set(candidates) | {n for ns in neighbours.values() for n in ns}

        bm25 = bm25_scores(self._documents_for(repos, scored), weights, corpus.average_length)
        b_mean, b_std = corpus.mean_std(weights, corpus.average_length)
        vectors = self._vectors_of(repos, scored)
        zdense: dict[int, float] = {}  # each item against its author's rewrite of the query, or the first one
        for n, text in enumerate(dense_texts):
            mine = [i for i in vectors if rewrites.get(meta[i].author, dense_text) == text]
            if mine:
                d_mean, d_std = self._sample_dense(query_vectors[n], repos)
                zdense.update((i, _z_score(v, d_mean, d_std)) for i, v in zip(
                    mine, self._dense_scores(self._stack([vectors[i] for i in mine]), query_vectors[n]).tolist()))

        now_ts = _timestamp(now)
        base: dict[int, float] = {}
        parts: dict[int, dict[str, float]] = {}
        asks: dict[int, bool] = {}
        for item_id in scored:
            m = meta[item_id]
            zb = _z_score(bm25.get(item_id, 0.0), b_mean, b_std)
            zd = zdense.get(item_id, 0.0)
            age_days = max(0.0, (now_ts - m.created) / 86400)
            asks[item_id] = reading.asks_something(m.text)
            p = {"bm25": zb, "dense": zd,
                 "author": cfg.author_boost if m.author in asked else 0.0,
                 "recency": cfg.recency_weight * math.pow(0.5, age_days / cfg.recency_half_life_days),
                 "importance": cfg.importance_weight * (m.importance - 0.5) * 2,
                 "when": cfg.when_boost if asks_when and cfg.when_boost and reading.says_when(m.text) else 0.0,
                 "period": cfg.period_boost * max((w for start, end, w in periods if start <= m.created < end), default=0.0),
                 "asks": -cfg.question_penalty if asks[item_id] else 0.0}
            base[item_id] = (1 - cfg.dense_weight) * zb + cfg.dense_weight * zd + sum(
                v for k, v in p.items() if k not in ("bm25", "dense"))
            parts[item_id] = p
        final: dict[int, float] = {}
        for item_id in candidates:
            around = [base[n] for n in neighbours[item_id] if n in base]
            bonus = cfg.neighbour_weight * sum(around) / 2 if around else 0.0
            question = before.get(item_id)
            answers = cfg.answer_weight * base[question] if question in base and asks.get(question) else 0.0
            parts[item_id]["neighbours"], parts[item_id]["answers"] = bonus, answers
            final[item_id] = base[item_id] + bonus + answers
        ranked = [i for i in sorted(final, key=final.get, reverse=True)
                  if i not in q.exclude and (q.mode != "concentration" or self._matches_focus(meta[i], q))
                  and (q.mode == "concentration" or not (q.tags or q.emotions) or self._matches_focus(meta[i], q))]
        lam = q.mmr_lambda if q.mmr_lambda is not None else cfg.meditation_lambda if q.mode == "meditation" else cfg.mmr_lambda
        chosen = self._mmr(ranked[: max(q.k * 6, 30)], final, vectors, q.k, lam)
        rows = repos.items.many(chosen)  # expire_on_commit=False: the rows stay readable after the unit
        return [Hit(rows[i], round(final[i], 4), {k: round(v, 4) for k, v in parts[i].items()})
                for i in chosen if i in rows]

    def closest_older(self, item_ids: list[int], n_results: int = 16, per_item: int = 5) -> dict[int, list[tuple[float, int]]]:
        """For each item: up to `per_item` older (smaller id) active items closest to its whole-item vector, as
        (cosine similarity of their whole-item vectors, their id), best first."""
        self.flush()  # the comparison runs in Chroma: it must hold everything
        with self._lock, self._small_math():
            with self.db.unit() as repos:
                vectors = self._vectors_of(repos, item_ids)
            ids = [i for i in item_ids if i in vectors]
            found: dict[int, list[tuple[float, int]]] = {}
            n = max(1, min(n_results, self._record_count()))
            for start in range(0, len(ids), 100):
                batch = ids[start:start + 100]
                got = self.collection.query(query_embeddings=[vectors[i][0].astype(np.float32) for i in batch],
                                            n_results=n, include=["distances"])
                others = {int(r) for records in got["ids"] for r in records}
                with self.db.unit() as repos:
                    status = {i: row.status for i, row in repos.items.ranking_rows(others).items()}
                for item_id, records, distances in zip(batch, got["ids"], got["distances"]):
                    older = [(float(1 - distance), int(record)) for record, distance in zip(records, distances)
                             if int(record) < item_id and status.get(int(record)) == "active"]
                    found[item_id] = sorted(older, reverse=True)[:per_item]
            return found

    def diverse(self, refs: list[str], k: int, tier: str = "message") -> list[str]:
        """The `k` most mutually different of these items (greedy farthest-first; meditation mode)."""
        self.sync()
        with self._lock, self._small_math():
            with self.db.unit() as repos:
                ids = repos.items.id_map(tier, refs)
                vectors = self._vectors_of(repos, ids.values())
            known = [ref for ref in refs if ids.get(ref) in vectors]
            if len(known) <= k:
                return known
            matrix = np.vstack([vectors[ids[ref]][0].astype(np.float32) for ref in known])
            chosen = [len(known) - 1]  # start from the newest
            closest = matrix @ matrix[chosen[0]]
            while len(chosen) < k:
                closest[chosen] = np.inf
                pick = int(np.argmin(closest))
                chosen.append(pick)
                closest = np.maximum(closest, matrix @ matrix[pick])
            return [known[i] for i in sorted(chosen)]

    @staticmethod
    def _mmr(pool: list[int], score: dict[int, float], vectors: dict[int, np.ndarray], k: int, lam: float) -> list[int]:
        """Maximal marginal relevance over min-max-scaled scores and whole-item cosine similarity."""
        if lam >= 1 or len(pool) <= 1:
            return pool[:k]
        values = np.array([score[i] for i in pool])
        relevance = (values - values.min()) / (values.max() - values.min() + 1e-9)
        dim = next(iter(vectors.values())).shape[1] if vectors else 1
        matrix = np.vstack([vectors[i][0].astype(np.float32) if i in vectors else np.zeros(dim, dtype=np.float32) for i in pool])
        similarity = matrix @ matrix.T
        chosen: list[int] = []
        left = list(range(len(pool)))
        while left and len(chosen) < k:
            if chosen:
                redundancy = similarity[np.ix_(left, chosen)].max(axis=1)
            else:
                redundancy = np.zeros(len(left))
            best = left[int(np.argmax(lam * relevance[left] - (1 - lam) * redundancy))]
            chosen.append(best)
            left.remove(best)
        return [pool[i] for i in chosen]
