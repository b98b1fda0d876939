"""The write journal of the memory index (memory/retrieval/index.py): what is pending indexing, and the sync that
brings the vectors up to the catalogue's journal.

Every change to `memory_items` is journalled in its own transaction (MemoryItemRepo). `WriteJournal.sync` replays
the journal: it embeds what changed, stores the vectors in `memory_vectors` and queues the whole-item vector for
Chroma. Chroma writes wait in `pending` (record id -> vector, or None for a metadata-only change, and metadata) and
`pending_deletes` until `flush`: one write costs ~20 ms whatever its size (measured), and a tick writes a memory or
two. Searches see pending items through the in-process vectors (`queued`); a crash before the flush loses nothing
(Chroma's journal position moves only with it, so the next sync writes them again, from the stored vectors).

Locks. Replays run one at a time (`_replaying`: the journal's order; nothing embedded twice). Within one, the
index's lock is held only to read and change what the process keeps (the caches, the queue, `written`): first the
changed items' ranking rows are dropped, then their texts are embedded and their vectors stored with no lock held,
then the caches and the queue take the vectors. A search meanwhile ranks the new rows by their words and the
vectors it has; a search that finds a replay under way does not wait for it (`sync(wait=False)`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from memory.db import Database
from memory.repositories import Repos
from memory.repositories.items import ItemLike
from memory.retrieval.caches import EmbeddingCache, RetrievalCaches, texts_key, timestamp
from memory.retrieval.embeddings import Embedder
from memory.retrieval.vector_store import VectorStore

log = logging.getLogger("memory.retrieval.index")  # "indexed N/M memories": the benches turn these on by this name

FLUSH_RECORDS = 64  # Chroma records queued before they are written…
FLUSH_SECONDS = 30.0  # …or this long after the last write
BACKFILL_PAGE = 2000  # items read at a time when a collection is (re)built
FLUSH_BULK = 20000  # records a bulk load queues before it writes them (bounded memory)
EMBED_BATCH = 256  # changed items embedded (and their vectors stored) at a time …
EMBED_BATCH_CHARS = 200_000  # … or fewer, of this many characters (a bulk load of long texts shows its progress)


def record_meta(item: ItemLike) -> dict[str, Any]:
    """An item's Chroma metadata (what a vector search filters by): `happened` is its event time, else its record
    time (memory/event_time.py)."""
    return {
        "item_id": item.id,
        "tier": item.tier,
        "status": item.status,
        "created": timestamp(item.created_at),
        "happened": timestamp(item.event_at or item.created_at),
    }


def embed_batches(items: Sequence[ItemLike]) -> list[Sequence[ItemLike]]:
    """`items` in consecutive batches of at most EMBED_BATCH items and EMBED_BATCH_CHARS characters (at least one
    item each)."""
    found: list[Sequence[ItemLike]] = []
    start = chars = 0
    for n, item in enumerate(items):
        size = len(item.text or "")
        if n > start and (n - start >= EMBED_BATCH or chars + size > EMBED_BATCH_CHARS):
            found.append(items[start:n])
            start, chars = n, 0
        chars += size
    if start < len(items):
        found.append(items[start:])
    return found


class WriteJournal:
    """What the vector store is still owed, and the replay of the catalogue's journal that owes it (module doc).
    The index's lock guards it."""

    def __init__(
        self,
        db: Database,
        embedder: Embedder,
        lock: threading.RLock,
        *,
        store: VectorStore,
        caches: RetrievalCaches,
        embedding: EmbeddingCache,
    ):
        self.db, self.embedder, self._lock = db, embedder, lock
        self.store, self.caches, self.embedding = store, caches, embedding
        self.pending: dict[str, tuple[np.ndarray | None, dict[str, Any]]] = {}
        self.pending_deletes: set[str] = set()
        self.pending_head = 0  # the journal position the pending writes bring Chroma to
        self._progress_chars = 0  # characters of the items a bulk sync (`progress`) has embedded so far
        self.flushed_at = time.monotonic()
        self.written: dict[int, str] = {}  # item id -> digest of the texts its vectors were made from (this process)
        self._replaying = threading.Lock()  # one replay at a time: the journal's order, nothing embedded twice

    def queued(self) -> list[int]:
        """Items whose new vectors wait for Chroma (a search takes them as dense candidates)."""
        return [int(record) for record, (vector, _) in self.pending.items() if vector is not None]

    def sync(self, progress: bool = False, flush: bool = False, wait: bool = True) -> int:
        """Bring the vectors up to the journal (Chroma when enough has queued up, or when `flush` or `progress`
        asks: a bulk load); returns the number of items changed. One replay at a time; `wait=False` (a search)
        returns 0 at once when another thread's replay is under way instead of waiting for its embedding."""
        if not self._replaying.acquire(blocking=wait):
            return 0
        try:
            self._progress_chars = 0
            changed = self._replay(progress)
        finally:
            self._replaying.release()
        with self._lock:
            if (
                flush
                or progress
                or len(self.pending) >= FLUSH_RECORDS
                or time.monotonic() - self.flushed_at >= FLUSH_SECONDS
            ):
                self.flush()
        return changed

    def flush(self) -> int:
        """Write the queued records to Chroma and move its journal position; returns how many were written."""
        with self._lock:
            if not self.pending and not self.pending_deletes and self.pending_head <= self.store.position():
                return 0
            deletes = sorted(self.pending_deletes - set(self.pending))
            full: list[tuple[str, np.ndarray, dict[str, Any]]] = []
            metadata_only: list[tuple[str, dict[str, Any]]] = []
            for record, (vector, meta) in self.pending.items():
                if vector is None and (held := self.caches.vectors.get(int(record))) is not None:
                    vector = held[0].astype(np.float32)  # the vector Chroma holds (this process wrote it): the record
                if vector is None:  # goes in the one upsert, not in an update request of its own
                    metadata_only.append((record, meta))
                else:
                    full.append((record, vector, meta))
            self.store.write(full, metadata_only, deletes, self.pending_head)
            written = len(self.pending) + len(deletes)
            self.pending, self.pending_deletes = {}, set()
            self.flushed_at = time.monotonic()
            return written

    def _replay(self, progress: bool) -> int:
        """What changed up to the journal's head: in the index's lock, what ranking keeps of it is dropped (a
        search meanwhile reads the new rows and documents); outside it, the changed texts are embedded and their
        vectors stored; in it again, the vectors are taken into the caches and queued for Chroma."""
        caches = self.caches
        # the usual answer is "nothing new": read without a unit to commit; what changed up to `head` is read in the
        # same session (later changes are the next sync's; the vectors it makes are stored by _queue_vectors' own
        # short units)
        with self.db.reading() as repos:
            head = repos.items.journal_head()
            with self._lock:
                chroma_at = max(self.store.position(), self.pending_head)
                if not caches.applied and not caches.vectors and caches.authors is None:
                    caches.applied = head  # a new process: its caches are empty, so nothing in them can be stale
                if head <= caches.applied and head <= chroma_at:
                    return 0
                since = min(chroma_at, caches.applied)
            if chroma_at == 0 and head:  # a new collection, or one whose first fill was cut short: page through all
                return self._backfill(repos, head, progress)
            changed = repos.items.changed_since(since, head) if head > since else []
            rows = repos.items.lines(changed)  # plain rows: read only, by the same names
            embedded_here = (
                (changed if since == chroma_at else repos.items.changed_since(chroma_at, head))
                if head > chroma_at
                else []
            )  # (the same range when the in-process state is where Chroma is)
            live = [rows[i] for i in changed if i in rows and rows[i].status != "deleted"]
            removed = [i for i in changed if i not in rows or rows[i].status == "deleted"]
            with self._lock:
                if caches.authors is not None:
                    caches.authors |= {item.author or "" for item in live}
                # items another process changed and already wrote to Chroma: forget their cached vectors
                for item_id in set(changed) - set(embedded_here):
                    caches.vectors.pop(item_id, None)
                for item_id in removed:
                    caches.vectors.pop(item_id, None)
                caches.forget(changed, rows.values())
                caches.applied = head
            if head > chroma_at:
                self._queue_vectors(
                    repos,
                    [rows[i] for i in embedded_here if i in rows and rows[i].status != "deleted"],
                    [i for i in embedded_here if i not in rows or rows[i].status == "deleted"],
                    progress,
                )
                with self._lock:
                    self.pending_head = head
            return len(changed)

    def _backfill(self, repos: Repos, head: int, progress: bool) -> int:
        """Embed every live item into a new (or emptied) collection, a page at a time (bounded memory)."""
        caches = self.caches
        with self._lock:
            caches.forget_ranking()
        total, done, after, started = repos.items.lexical.count() if progress else 0, 0, 0, time.monotonic()
        while True:
            page = repos.items.indexed(after_id=after, limit=BACKFILL_PAGE)
            if not page:
                break
            with self._lock:
                if caches.authors is not None:
                    caches.authors |= {item.author or "" for item in page}
            self._queue_vectors(repos, page, [], progress, done, total or None, started)
            done, after = done + len(page), page[-1].id
        with self._lock:
            self.pending_head, caches.applied = head, head
        return done

    def _queue_vectors(
        self,
        repos: Repos,
        items: Sequence[ItemLike],
        removed: list[int],
        progress: bool = False,
        done_before: int = 0,
        total: int | None = None,
        started: float | None = None,
    ) -> None:
        """Store the vectors of changed items and queue their Chroma records. An item whose texts did not change
        (a neighbour's context, its status) keeps its vectors: only its metadata is queued, or, when another
        process or an earlier run made them, the stored vectors are taken instead of embedding it again.
        The embedding and the database writes run outside the index's lock (a search is not held up by a long
        text); only what the caches and the Chroma queue take is done in it."""
        gone = set(removed)
        with self._lock:
            for item_id in gone:
                self.pending_deletes.add(str(item_id))
                self.pending.pop(str(item_id), None)
                self.written.pop(item_id, None)
                self.caches.vectors.pop(item_id, None)
            fresh: list[ItemLike] = []
            for item in items:
                if self.written.get(item.id) == texts_key(item):
                    record = str(item.id)
                    self.pending[record] = (self.pending.get(record, (None, None))[0], record_meta(item))
                else:
                    fresh.append(item)
        if gone:
            with self.db.unit() as writer:
                writer.items.vectors.remove(gone)
        started = started or time.monotonic()
        done = done_before
        for part_items in embed_batches(fresh):
            keys = {item.id: texts_key(item) for item in part_items}
            # what another process or an earlier run stored is taken rather than embedded again; not looked for when
            # this process embedded it ahead of the write (the tick's thought): those vectors are ready, and the same
            ready = self.embedding.made_ahead(part_items)
            asked = [item.id for item in part_items if item.id not in ready]
            stored = repos.items.vectors.get(self.embedder.name, asked) if asked else {}  # in the sync's transaction
            made = {
                item_id: vectors.vectors for item_id, vectors in stored.items() if vectors.texts_key == keys[item_id]
            }
            todo = [item for item in part_items if item.id not in made]
            if todo:
                embedded = [
                    (item.id, keys[item.id], vectors) for item, vectors in zip(todo, self.embedding.embed_items(todo))
                ]
                with self.db.unit() as writer:  # its own short transaction: a bulk load does not hold writers up
                    writer.items.vectors.put(self.embedder.name, embedded)
                made.update({item_id: vectors.astype(np.float16) for item_id, _, vectors in embedded})
            with self._lock:
                for item in part_items:
                    record = str(item.id)
                    self.caches.vectors[item.id] = made[item.id]
                    self.pending[record] = (made[item.id][0].astype(np.float32), record_meta(item))
                    self.pending_deletes.discard(record)
                    self.written[item.id] = keys[item.id]
                self.caches.sample_vectors_changed(keys)
                if len(self.pending) >= FLUSH_BULK:  # a bulk load writes as it goes (Chroma's journal position
                    self.flush()  # stays where it was until everything is written)
            done += len(part_items)
            if progress and (len(fresh) > len(part_items) or total):
                self._progress_chars += sum(len(item.text or "") for item in part_items)
                seconds = max(1e-6, time.monotonic() - started)
                log.info(
                    "indexed %d/%d memories (%.0f/s, %.0f characters/s)",
                    done,
                    total or len(fresh),
                    done / seconds,
                    self._progress_chars / seconds,
                )
