"""The memory index: Chroma for vectors, an in-process BM25, and hybrid retrieval over both.

Sync. Every change to `memory_items` is journalled in its own transaction (MemoryItemRepo); `sync()` replays
the journal into Chroma (its position is kept in the collection's metadata, so a crash between the SQL commit
and the Chroma write is repaired by the next sync) and into the in-process BM25 and catalogue (built from SQL
on first use). Writers call `sync()` after committing; `search()` calls it first, so writes from other
processes (`run.py kb add`, `run.py say`) are seen too.

Vectors. An item has a whole-item vector (`<id>:0`, the text prefixed with its author) and, when it has
several sentences, one vector per sentence (`<id>:1…`): a long message is found by its best sentence.

Retrieval (measured in bench/locomo.py):
  dense(item)  = 0.6 · best vector similarity + 0.4 · whole-item similarity
  BM25(item)   over the item's date, author and text, plus its neighbours' text at half weight
  both are z-normalised over the whole corpus (BM25 exactly; dense from a fixed random sample of items),
  fused = 0.3·z(BM25) + 0.7·z(dense) + author match + recency + importance,
  then each item takes 0.4 × the mean fused score of its neighbours in the same episode,
  then MMR (λ 0.7; 0.3 in meditation mode) picks the k results.
When the query names exactly one known author ("what did Caroline…"), the dense query is rewritten in that
author's first person ("Caroline: what did I…") and that author's items get a boost: memories are stored as
"<author>: <text>", so this aligns the query with how the answer was said.
"""

from __future__ import annotations

import atexit
import logging
import math
import random
import re
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from memory.db import Database
from memory.retrieval.embeddings import Embedder
from memory.retrieval.lexical import BM25Index
from memory.models import MemoryItem
from memory.text import chunks, tokenize, with_author

log = logging.getLogger(__name__)

COLLECTION_PREFIX = "anima-memory"
FLUSH_RECORDS = 64  # Chroma records queued before they are written…
FLUSH_SECONDS = 30.0  # …or this long after the last write
MAX_PARTS = 13  # vectors an item can have: the whole item and at most 12 chunks (memory/text.py)


class RetrievalSettings(BaseModel):
    """The retrieval weights (module doc), as given by the run's settings object (`memory.retrieval`)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    dense_weight: float = Field(0.7, ge=0, le=1)  # dense vs BM25 share of the fused score
    best_vector_weight: float = Field(0.6, ge=0, le=1)  # best sentence vs whole item in the dense score
    author_boost: float = Field(1.0, ge=0)
    neighbour_weight: float = Field(0.4, ge=0)
    recency_weight: float = Field(0.1, ge=0)
    recency_half_life_days: float = Field(30.0, gt=0)
    importance_weight: float = Field(0.2, ge=0)
    mmr_lambda: float = Field(0.7, ge=0, le=1)
    meditation_lambda: float = Field(0.3, ge=0, le=1)
    candidates: int = Field(100, ge=1)
    sample_size: int = Field(2048, ge=16)


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


@dataclass
class _Meta:
    tier: str
    status: str
    created: float  # unix seconds
    author: str
    episode: str | None
    seq: int | None
    importance: float
    tags: frozenset[str]
    emotions: frozenset[str]
    parts: int  # vectors stored for it: the whole item plus one per chunk (ids <id>:0 … <id>:parts-1)


def _ts(value: datetime | None) -> float:
    if value is None:
        return 0.0
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.timestamp()


def _date_words(value: datetime | None) -> str:
    return f"{value.day} {value:%B %Y}" if value is not None else ""


def _lexical_tokens(item: MemoryItem) -> tuple[list[str], list[str]]:
    own = tokenize(f"{_date_words(item.created_at)} {item.author} {item.title} {item.text}")
    context = tokenize(f"{item.context_before}\n{item.context_after}")
    return own, context


def _meta(item: MemoryItem) -> _Meta:
    return _Meta(item.tier, item.status, _ts(item.created_at), item.author or "", item.episode, item.seq,
                 float(item.importance if item.importance is not None else 0.5),
                 frozenset(str(t).lower() for t in item.tags or []),
                 frozenset(str(e).split(":")[0].strip().lower() for e in item.emotions or []),
                 1 + len(chunks(item.text)))


def first_person(text: str, author: str) -> str:
    """`text` as `author` would have said it: "What did Caroline research?" -> "Caroline: What did I research?"."""
    name = re.escape(author)
    text = re.sub(rf"\b{name}['’]s\b", "my", text, flags=re.IGNORECASE)
    text = re.sub(rf"\b{name}\b", "I", text, flags=re.IGNORECASE)
    return f"{author}: {text}"


def _z(values: np.ndarray, mean: float, std: float) -> np.ndarray:
    return (values - mean) / std if std > 1e-9 else values - mean


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
        self._bm25: BM25Index | None = None
        self._meta: dict[int, _Meta] = {}
        self._positions: dict[tuple[str, int], int] = {}
        self._authors: Counter[str] = Counter()
        self._applied = 0  # journal position of the in-process parts
        self._vectors: dict[int, np.ndarray] = {}  # item id -> its vectors as float16 (row 0 = whole item)
        self._sample_ids: set[int] = set()  # items whose dense scores estimate the corpus mean/std for a query
        self._sample_drawn_at = 0  # live items when the sample was drawn
        self._sample_matrix: tuple[np.ndarray, np.ndarray] | None = None  # the sample's vectors, stacked once
        self._records: int | None = None  # vectors in the collection (cached: count() costs a round trip)
        self._warmup: threading.Thread | None = None
        self._stop_warmup = threading.Event()
        self._text_vectors: OrderedDict[str, np.ndarray] = OrderedDict()  # recent texts -> whole-text vector
        # Chroma writes wait in `_pending` (record id -> vector or None for a metadata-only change, metadata) and
        # `_pending_deletes` until `flush`: one write costs ~20 ms whatever its size (measured), and a tick writes
        # a memory or two. Searches see pending items through the in-process vectors; a crash before the flush
        # loses nothing (Chroma's journal position moves only with it, so the next sync writes them again).
        self._pending: dict[str, tuple[np.ndarray | None, dict[str, Any]]] = {}
        self._pending_deletes: set[str] = set()
        self._pending_head = 0  # the journal position the pending writes bring Chroma to
        self._flushed_at = time.monotonic()
        self._written: dict[int, int] = {}  # item id -> hash of the texts its vectors were made from (this process)

    def embed_texts(self, texts: list[str], cache_size: int = 512) -> np.ndarray:
        """Normalised vectors of whole texts, remembering the last `cache_size` (the reflexes embed the same
        recent outputs tick after tick)."""
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._text_vectors]
        fresh = self.embedder.embed(missing) if missing else []
        with self._lock:
            for text, vector in zip(missing, fresh):
                self._text_vectors[text] = np.asarray(vector, dtype=np.float32)
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
            name = re.sub(r"[^a-zA-Z0-9._-]", "-", f"{COLLECTION_PREFIX}-{self.embedder.name}")[:60].strip("-._")
            self._collection = client.get_or_create_collection(
                name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}},
                metadata={"journal": 0, "embedder": self.embedder.name})
        return self._collection

    def _record_count(self) -> int:
        if self._records is None:
            self._records = self.collection.count()
        return self._records

    def _chroma_position(self) -> int:
        return int((self.collection.metadata or {}).get("journal", 0))

    def _vector_records(self, items: list[MemoryItem]) -> tuple[list[str], list[str], list[dict[str, Any]]]:
        ids, texts, metas = [], [], []
        for item in items:
            whole = with_author(item.author, f"{item.title}\n{item.text}".strip() if item.title else item.text)
            parts = [whole] + [with_author(item.author, c) for c in chunks(item.text)]
            for n, text in enumerate(parts):
                ids.append(f"{item.id}:{n}")
                texts.append(text)
                metas.append({"item_id": item.id, "tier": item.tier, "status": item.status,
                              "created": _ts(item.created_at), "part": n})
        return ids, texts, metas

    def _queue_vectors(self, items: list[MemoryItem], removed: list[int], progress: bool) -> None:
        """Queue the Chroma records of changed items. An item whose texts did not change (a neighbour's context,
        its status) keeps its vectors: only its metadata is queued. Records an item no longer has are deleted."""
        for item_id in removed:
            self._pending_deletes |= {f"{item_id}:{n}" for n in range(MAX_PARTS)}
            self._written.pop(item_id, None)
        for record in [r for r in self._pending if int(r.split(":")[0]) in set(removed)]:
            del self._pending[record]
        fresh: list[MemoryItem] = []
        for item in items:
            ids, texts, metas = self._vector_records([item])
            if self._written.get(item.id) == hash(tuple(texts)):
                for record, meta in zip(ids, metas):
                    vector = self._pending.get(record, (None, None))[0]
                    self._pending[record] = (vector, meta)
            else:
                fresh.append(item)
        batch, started = 256, time.monotonic()
        for start in range(0, len(fresh), batch):
            part = fresh[start:start + batch]
            ids, texts, metas = self._vector_records(part)
            vectors = self.embedder.embed(texts)
            self._remember_vectors(ids, vectors)
            for record, vector, meta in zip(ids, vectors, metas):
                self._pending[record] = (np.asarray(vector, dtype=np.float32), meta)
                self._pending_deletes.discard(record)
            for item in part:
                self._written[item.id] = hash(tuple(self._vector_records([item])[1]))
                self._pending_deletes |= {f"{item.id}:{n}" for n in range(self._meta[item.id].parts, MAX_PARTS)} \
                    if item.id in self._meta else set()
            if progress and len(fresh) > batch:
                done = min(len(fresh), start + batch)
                log.info("indexed %d/%d memories (%.0f/s)", done, len(fresh), done / max(1e-6, time.monotonic() - started))

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

    def _load_local(self) -> None:
        """Build the BM25 index and the catalogue from SQL (first use in this process)."""
        bm25 = BM25Index()
        with self.db.unit() as repos:
            head = repos.items.journal_head()
            after = 0
            while True:
                rows = repos.items.indexed(after_id=after)
                if not rows:
                    break
                for item in rows:
                    self._index_local(bm25, item)
                after = rows[-1].id
        self._bm25, self._applied = bm25, head
        if self._meta:
            self._open_collection()  # opened here, not from two threads at once
            self._stop_warmup = threading.Event()
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
        if self._warmup is not None:
            self._stop_warmup.set()
            self._warmup.join(timeout=60)
            self._warmup = None
            atexit.unregister(self.close)

    def _warm_vectors(self) -> None:
        """Load every stored vector into the in-process cache in the background, so a restarted persona's
        searches do not each fetch their candidates' vectors from Chroma (~20-50 ms a query until warm)."""
        try:
            collection, started = self.collection, time.monotonic()
            found: dict[int, dict[int, np.ndarray]] = {}
            offset, page = 0, 5000
            while not self._stop_warmup.is_set():
                got = collection.get(limit=page, offset=offset, include=["embeddings", "metadatas"])
                for meta, vector in zip(got["metadatas"], got["embeddings"]):
                    found.setdefault(int(meta["item_id"]), {})[int(meta["part"])] = np.asarray(vector, dtype=np.float16)
                if len(got["ids"]) < page:
                    break
                offset += page
            with self._lock:
                for item_id, parts in found.items():
                    if item_id not in self._vectors and item_id in self._meta and len(parts) == self._meta[item_id].parts:
                        self._vectors[item_id] = np.vstack([parts[n] for n in range(len(parts))])
            log.info("memory vectors warmed: %d items in %.1fs", len(found), time.monotonic() - started)
        except Exception:  # the cache is only an accelerator; misses are fetched on demand
            log.debug("vector warm-up stopped", exc_info=True)
        finally:
            atexit.unregister(self.close)  # done: nothing to stop at exit, and the index can be collected

    def _index_local(self, bm25: BM25Index, item: MemoryItem) -> None:
        old = self._meta.pop(item.id, None)
        if old is not None:
            self._authors[old.author] -= 1
            if old.episode is not None and old.seq is not None:
                self._positions.pop((old.episode, old.seq), None)
        if item.status == "deleted":
            bm25.remove(item.id)
            self._vectors.pop(item.id, None)
            if item.id in self._sample_ids:
                self._sample_matrix = None
            return
        own, context = _lexical_tokens(item)
        bm25.upsert(item.id, own, context)
        meta = _meta(item)
        self._meta[item.id] = meta
        self._authors[meta.author] += 1
        if meta.episode is not None and meta.seq is not None:
            self._positions[(meta.episode, meta.seq)] = item.id

    def sync(self, progress: bool = False, flush: bool = False) -> int:
        """Bring the in-process indexes up to the journal at once, and Chroma when enough has queued up (or when
        `flush` or `progress` asks: a bulk load); returns the number of items changed."""
        with self._lock:
            changed = self._sync(progress)
            if flush or progress or len(self._pending) >= FLUSH_RECORDS or \
                    time.monotonic() - self._flushed_at >= FLUSH_SECONDS:
                self.flush()
            return changed

    def _sync(self, progress: bool) -> int:
        if self._bm25 is None:
            self._load_local()
        with self.db.unit() as repos:
            head = repos.items.journal_head()
            chroma_at = max(self._chroma_position(), self._pending_head)
            since = min(chroma_at, self._applied)
            if chroma_at == 0 and head and self.collection.count() == 0:  # new collection: backfill
                rows = {item.id: item for item in repos.items.indexed(limit=None)}
                changed = list(rows)
            else:
                changed = repos.items.changed_since(since, head) if head > since else []
                rows = repos.items.many(changed)
            if not changed:
                return 0
            local_changes = repos.items.changed_since(self._applied, head) if head > self._applied else []
            for item_id in local_changes:
                item = rows.get(item_id)
                if item is not None:
                    self._index_local(self._bm25, item)
            self._applied = head
            if head > chroma_at:
                live = [rows[i] for i in changed if i in rows and rows[i].status != "deleted"]
                removed = [i for i in changed if i not in rows or rows[i].status == "deleted"]
                self._queue_vectors(live, removed, progress)
                self._pending_head = head
            return len(changed)

    # ---- dense helpers -----------------------------------------------------------------------------------

    def _remember_vectors(self, ids: list[str], vectors) -> None:
        grouped: dict[int, dict[int, np.ndarray]] = {}
        for record_id, vector in zip(ids, vectors):
            item, part = record_id.split(":")
            grouped.setdefault(int(item), {})[int(part)] = np.asarray(vector, dtype=np.float32)
        for item_id, parts in grouped.items():
            if 0 in parts:
                self._vectors[item_id] = np.vstack([parts[n] for n in sorted(parts)]).astype(np.float16)
                if item_id in self._sample_ids:
                    self._sample_matrix = None  # re-embedded: its scores change

    def _sample_scores(self, qv: np.ndarray) -> np.ndarray:
        """Dense scores of a uniform random sample of the live items for this query; their mean and std
        z-normalise dense scores. The sample is drawn again once the corpus has changed by a tenth."""
        live = len(self._meta)
        if self._sample_matrix is None or abs(live - self._sample_drawn_at) > 0.1 * max(1, self._sample_drawn_at):
            self._sample_ids = set(random.Random(live).sample(list(self._meta), min(self.config.sample_size, live)))
            vectors = self._vectors_of(self._sample_ids)
            if not vectors:
                return np.zeros(1)
            self._sample_matrix, self._sample_drawn_at = self._stack(list(vectors.values())), live
        return self._dense_scores(self._sample_matrix, qv)

    def _vectors_of(self, item_ids: Iterable[int]) -> dict[int, np.ndarray]:
        """Every stored vector of these items (row 0 = the whole item), from memory or else from Chroma."""
        wanted = list(item_ids)
        missing = [f"{i}:{n}" for i in wanted if i not in self._vectors and i in self._meta
                   for n in range(self._meta[i].parts)]
        for start in range(0, len(missing), 2000):  # by id: 2.5× faster than a metadata filter (measured)
            got = self.collection.get(ids=missing[start:start + 2000], include=["embeddings"])
            self._remember_vectors(got["ids"], got["embeddings"])
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

    # ---- search ------------------------------------------------------------------------------------------

    def _allowed(self, meta: _Meta | None, q: Query) -> bool:
        if meta is None or meta.status == "deleted" or (meta.status == "archived" and not q.include_archived):
            return False
        if q.tiers and meta.tier not in q.tiers:
            return False
        if q.since and meta.created < _ts(q.since):
            return False
        if q.until and meta.created > _ts(q.until):
            return False
        return True

    def _matches_focus(self, meta: _Meta, q: Query) -> bool:
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

    def search(self, query: Query | str, **kwargs: Any) -> list[Hit]:
        q = query if isinstance(query, Query) else Query(text=query, **kwargs)
        self.sync()
        with self._lock:
            return self._search(q)

    def _search(self, q: Query) -> list[Hit]:
        cfg = self.config
        if not self._meta or not q.text.strip():
            return []
        # who the query is about
        mentioned = [a for a in self._authors if a and self._authors[a] > 0
                     and re.search(rf"\b{re.escape(a)}\b", q.text, re.IGNORECASE)]
        author = mentioned[0] if len(mentioned) == 1 and len([a for a in self._authors if a]) > 1 else None
        dense_text = first_person(q.text, author) if author else q.text

        # BM25 over every live item: exact corpus statistics
        bm25 = self._bm25.scores(tokenize(q.text))
        b_mean, b_std = bm25.mean_std()
        pool = cfg.candidates * (3 if q.mode == "meditation" else 1)
        lexical = [i for i in bm25.top(pool * 4) if self._allowed(self._meta.get(i), q)][:pool]

        # dense candidates from Chroma
        qv = self.embed_texts([dense_text])[0]  # the recall query is often the thought novelty just embedded
        where: list[dict[str, Any]] = []  # status is checked below: archived items are few, a filter costs time
        if q.tiers:
            where.append({"tier": {"$in": list(q.tiers)}})
        if q.since:
            where.append({"created": {"$gte": _ts(q.since)}})
        if q.until:
            where.append({"created": {"$lte": _ts(q.until)}})
        stored = self._record_count()
        got = self.collection.query(query_embeddings=[qv], n_results=max(1, min(pool * 2, stored)),
                                    where=(where[0] if len(where) == 1 else {"$and": where}) if where else None,
                                    include=["distances"]) if stored else {"ids": [[]]}  # ids say item and part
        queued = [int(record.split(":")[0]) for record, (vector, _) in self._pending.items() if vector is not None]
        dense_items = list(dict.fromkeys([int(record.split(":")[0]) for record in got["ids"][0]] + queued))
        dense_items = [i for i in dense_items if self._allowed(self._meta.get(i), q)]

        candidates = list(dict.fromkeys(lexical + dense_items))
        neighbours = {c: [n for n in self._neighbours(c) if self._allowed(self._meta.get(n), q)] for c in candidates}
        scored = set(candidates) | {n for ns in neighbours.values() for n in ns}
        vectors = self._vectors_of(scored)
        dense_of = dict(zip(vectors, self._dense_scores(self._stack(list(vectors.values())), qv).tolist())) if vectors else {}
        sample_scores = self._sample_scores(qv)
        d_mean, d_std = float(sample_scores.mean()), float(sample_scores.std())

        now = _ts(self.clock())
        base: dict[int, float] = {}
        parts: dict[int, dict[str, float]] = {}
        for item_id in scored:
            meta = self._meta[item_id]
            zb = float(_z(np.float64(bm25.of(item_id)), b_mean, b_std))
            zd = float(_z(np.float64(dense_of.get(item_id, d_mean)), d_mean, d_std))
            age_days = max(0.0, (now - meta.created) / 86400)
            p = {"bm25": zb, "dense": zd,
                 "author": cfg.author_boost if author and meta.author == author else 0.0,
                 "recency": cfg.recency_weight * math.pow(0.5, age_days / cfg.recency_half_life_days),
                 "importance": cfg.importance_weight * (meta.importance - 0.5) * 2}
            base[item_id] = (1 - cfg.dense_weight) * zb + cfg.dense_weight * zd + p["author"] + p["recency"] + p["importance"]
            parts[item_id] = p
        final: dict[int, float] = {}
        for item_id in candidates:
            around = [base[n] for n in neighbours[item_id] if n in base]
            bonus = cfg.neighbour_weight * sum(around) / 2 if around else 0.0
            parts[item_id]["neighbours"] = bonus
            final[item_id] = base[item_id] + bonus
        ranked = [i for i in sorted(final, key=final.get, reverse=True)
                  if i not in q.exclude and (q.mode != "concentration" or self._matches_focus(self._meta[i], q))
                  and (q.mode == "concentration" or not (q.tags or q.emotions) or self._matches_focus(self._meta[i], q))]
        lam = q.mmr_lambda if q.mmr_lambda is not None else cfg.meditation_lambda if q.mode == "meditation" else cfg.mmr_lambda
        chosen = self._mmr(ranked[: max(q.k * 6, 30)], final, vectors, q.k, lam)
        with self.db.unit() as repos:  # expire_on_commit=False: the rows stay readable after the unit
            rows = repos.items.many(chosen)
        return [Hit(rows[i], round(final[i], 4), {k: round(v, 4) for k, v in parts[i].items()})
                for i in chosen if i in rows]

    def closest_older(self, item_ids: list[int], n_results: int = 16, per_item: int = 5) -> dict[int, list[tuple[float, int]]]:
        """For each item: up to `per_item` older (smaller id) active items closest to its whole-item vector, as
        (highest cosine similarity of any of their vectors, their id), best first."""
        self.flush()  # the comparison runs in Chroma: it must hold everything
        with self._lock:
            vectors = self._vectors_of(item_ids)
            ids = [i for i in item_ids if i in vectors]
            found: dict[int, list[tuple[float, int]]] = {}
            n = max(1, min(n_results, self._record_count()))
            for start in range(0, len(ids), 100):
                batch = ids[start:start + 100]
                got = self.collection.query(query_embeddings=[vectors[i][0].astype(np.float32) for i in batch],
                                            n_results=n, include=["distances"])
                for item_id, records, distances in zip(batch, got["ids"], got["distances"]):
                    best: dict[int, float] = {}
                    for record, distance in zip(records, distances):
                        other = int(record.split(":")[0])
                        meta = self._meta.get(other)
                        if other < item_id and meta is not None and meta.status == "active":
                            best[other] = max(best.get(other, -1.0), float(1 - distance))
                    found[item_id] = sorted(((sim, other) for other, sim in best.items()), reverse=True)[:per_item]
            return found

    def diverse(self, refs: list[str], k: int, tier: str = "message") -> list[str]:
        """The `k` most mutually different of these items (greedy farthest-first; meditation mode)."""
        self.sync()
        with self._lock:
            with self.db.unit() as repos:
                ids = repos.items.id_map(tier, refs)
            vectors = self._vectors_of(ids.values())
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

    def _neighbours(self, item_id: int) -> list[int]:
        meta = self._meta.get(item_id)
        if meta is None or meta.episode is None or meta.seq is None:
            return []
        found = []
        for seq in (meta.seq - 1, meta.seq + 1):
            other = self._positions.get((meta.episode, seq))
            if other is not None:
                found.append(other)
        return found

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
