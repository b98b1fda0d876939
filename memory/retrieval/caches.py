"""What the memory index keeps in memory (memory/retrieval/index.py): caches that a process may lose at any time.

- `EmbeddingCache`: the vectors of recent texts (the reflexes embed the same recent outputs tick after tick) and of
  the recent memories embedded ahead of their write (`embed_texts(documents=…)`), taken by the write instead of
  embedding them again, and kept after it: a thought that comes back (the stagnating persona's usual case) is
  embedded neither for the reflexes nor for its memory.
- `RetrievalCaches`: what ranking reads of an item — its columns (`Ranked`), full-text document, place in its
  episode and vectors — kept while the catalogue's journal says it is unchanged (the write journal drops what
  changed), and the corpus statistics (document count, a uniform random sample). After a start a background thread
  copies every stored vector and ranking row in (`start_warmup`), so a restarted persona's searches do not each read
  their few hundred items from the database (~10 ms a query at 100k memories, until warm).
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import numpy as np

from memory.db import Database
from memory.repositories import Repos
from memory.repositories.items import ItemLike
from memory.retrieval import query as reading
from memory.retrieval.embeddings import Embedder
from memory.retrieval.lexical import WHOLE, CorpusSample, Shape
from memory.retrieval.settings import RetrievalSettings
from memory.text import parts, split_written, with_author

log = logging.getLogger("memory.retrieval.index")  # the index's lines, under the name they have always had

DOCUMENTS_KEPT = 64  # memories embedded ahead of their write (embed_texts' documents), the last ones kept: a tick
# writes one, and a thought that comes back does so within a few dozen ticks (bench/tick.py: within ten)
WARMUP_PAGE = 5000  # items read at a time by the background copy
RECOUNT_ALWAYS_BELOW = 10000  # documents: counting them costs ~2 ms at 10k, ~20 ms at 100k (SQLite)
FREQUENCIES_KEPT = 50_000  # terms whose document counts are kept (all of them start again past it)
RANKING_CACHE = 200_000  # items whose ranking columns, full-text document and place are kept in memory (~0.7 KB
# each, filled in the background after a start): a query reads the few hundred items it ranks from here instead of
# from SQL (~10 ms at 100k memories)

Document = tuple[str, str, tuple[str, ...]]  # a memory's (prefix, body, chunks of body): what its vectors are of
K = TypeVar("K")
V = TypeVar("V")


def timestamp(value: datetime | None) -> float:
    """Unix seconds (a naive time is UTC); 0 for none."""
    if value is None:
        return 0.0
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def record_texts(text: str, author: str = "", title: str = "") -> tuple[str, str, list[str]]:
    """(prefix, body, parts of body) of a memory: its whole vector is of prefix + body, one more per part; of a
    long text, the parts in its first WRITTEN_CHARS (memory/text.py: the follow-up embeds the rest)."""
    prefix = with_author(author, f"{title}\n" if title else "")
    return prefix, text or "", split_written(parts(text or ""))[0]


def item_texts(item: ItemLike) -> tuple[str, str, list[str]]:
    return record_texts(item.text, item.author, item.title)


def expansion_of(item: ItemLike) -> str:
    """The item's index-time expansion (memory/expansion.py), which gets a vector of its own after its parts'."""
    return str((item.meta or {}).get("expansion") or "")


def texts_key(item: ItemLike) -> str:
    """A digest of the texts an item's vectors are made from, the same in every process."""
    prefix, body, parts = item_texts(item)
    extra = (expansion,) if (expansion := expansion_of(item)) else ()
    return hashlib.blake2b("\x1f".join((prefix, body, *parts, *extra)).encode(), digest_size=16).hexdigest()


@dataclass(slots=True)
class Ranked:
    """What ranking knows of an item (memory_items columns, read per query)."""

    tier: str
    status: str
    created: float  # unix seconds
    author: str
    episode: str | None
    seq: int | None
    importance: float
    raw_tags: list[Any]
    raw_emotions: list[Any]
    text: str
    happened: float  # unix seconds: its event time (memory/event_time.py), else its record time (`created`)
    _asking: float = -1.0  # what its text says, read on first use and kept with the rest (query.py's readings)
    _says_when: int = -1

    def asking_share(self) -> float:
        """The share of its sentences that only ask, 0 when it does not end with a question (query.asking_share)."""
        if self._asking < 0:
            self._asking = reading.asking_share(self.text)
        return self._asking

    def says_when(self) -> bool:
        if self._says_when < 0:
            self._says_when = int(reading.says_when(self.text))
        return bool(self._says_when)

    @classmethod
    def of(cls, row: Sequence[Any]) -> Ranked:
        focus = len(row) > 10  # ItemRepo.ranking_rows adds tags and emotions when a query filters by them
        created = timestamp(row[3])
        return cls(
            row[1],
            row[2],
            created,
            row[4] or "",
            row[5],
            row[6],
            0.5 if row[7] is None else float(row[7]),
            (row[10] or []) if focus else [],
            (row[11] or []) if focus else [],
            row[8] or "",
            created if row[9] is None else timestamp(row[9]),
        )

    @property
    def tags(self) -> frozenset[str]:
        return frozenset(str(t).lower() for t in self.raw_tags)

    @property
    def emotions(self) -> frozenset[str]:
        return frozenset(str(e).split(":")[0].strip().lower() for e in self.raw_emotions)


class EmbeddingCache:
    """Vectors of whole texts and of recent memories, made by the index's embedder. Both are pure functions of
    their texts (the same model), so a kept vector is the one embedding the text again would give (to float32's
    rounding: another batch)."""

    def __init__(self, embedder: Embedder, lock: threading.RLock, config: RetrievalSettings):
        self.embedder, self._lock, self._config = embedder, lock, config
        self.text_vectors: OrderedDict[str, np.ndarray] = OrderedDict()  # recent texts -> whole-text vector
        self.documents: OrderedDict[Document, np.ndarray] = OrderedDict()  # recent memories embedded before their
        # write -> their vectors (row 0 the whole memory), least recently used first
        self._ahead: ThreadPoolExecutor | None = None  # embeds a query's texts while its search reads SQL

    @property
    def config(self) -> RetrievalSettings:
        return self._config

    @config.setter
    def config(self, value: RetrievalSettings) -> None:
        with self._lock:
            if value.sentence_vectors != self._config.sentence_vectors:  # a memory's sentence vectors are made
                self.documents.clear()  # another way now: those kept are not what its write would make
            self._config = value

    def embed_texts(
        self, texts: list[str], cache_size: int = 512, documents: Iterable[tuple[str, str, Sequence[str]]] = ()
    ) -> np.ndarray:
        """Normalised vectors of whole texts, remembering the last `cache_size`. `documents`: memories about to be
        written (`record_texts`), embedded in the same call unless one is kept (the last DOCUMENTS_KEPT); the
        write then takes their vectors (`embed_items`)."""
        asked = list(dict.fromkeys((p, b, tuple(c)) for p, b, c in documents))
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self.text_vectors]
            wanted = [d for d in asked if d not in self.documents]
        ahead: list[np.ndarray] = []
        fresh: Sequence[np.ndarray] | np.ndarray
        if wanted:  # one call for both: the texts as documents of one part
            made = self.document_vectors([("", text, ()) for text in missing] + wanted)
            fresh, ahead = [vectors[0] for vectors in made[: len(missing)]], made[len(missing) :]
        else:
            fresh = self.embedder.embed(missing) if missing else []
        with self._lock:
            for text, vector in zip(missing, fresh):
                self.text_vectors[text] = np.asarray(vector, dtype=np.float32)
            self.documents.update(zip(wanted, ahead))
            for document in asked:
                if document in self.documents:  # (another thread's call may have pushed one out meanwhile)
                    self.documents.move_to_end(document)
            while len(self.documents) > DOCUMENTS_KEPT:
                self.documents.popitem(last=False)
            vectors = [self.text_vectors[t] for t in texts]
            for text in texts:
                self.text_vectors.move_to_end(text)
            while len(self.text_vectors) > cache_size:
                self.text_vectors.popitem(last=False)
        return np.stack(vectors) if vectors else np.zeros((0, 0), dtype=np.float32)

    def start_texts(self, texts: list[str], cache_size: int = 512) -> Callable[[], np.ndarray]:
        """`embed_texts`, begun on the embedding thread: the caller goes on (a search reads its terms' counts and
        its lexical candidates from the database meanwhile; the model and SQLite both run without the GIL) and
        calls the returned function for the vectors. Texts already kept are not embedded again."""
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self.text_vectors]
        if not missing:
            return lambda: self.embed_texts(texts, cache_size)
        if self._ahead is None:
            self._ahead = ThreadPoolExecutor(max_workers=1, thread_name_prefix="query-embedding")
        made = self._ahead.submit(self.embedder.embed, missing)

        def vectors() -> np.ndarray:
            fresh = made.result()
            with self._lock:
                for text, vector in zip(missing, fresh):
                    self.text_vectors[text] = np.asarray(vector, dtype=np.float32)
            return self.embed_texts(texts, cache_size)  # (kept now: ordered and trimmed as any other call)

        return vectors

    def close(self) -> None:
        if self._ahead is not None:
            self._ahead.shutdown(wait=True)
            self._ahead = None

    def made_ahead(self, items: Sequence[ItemLike]) -> set[int]:
        """The items whose vectors `embed_texts` made ahead of their write and are kept (an item with an expansion
        needs one more vector: not counted)."""
        found = set()
        with self._lock:
            for item in items:
                prefix, body, parts = item_texts(item)
                if not expansion_of(item) and (prefix, body, tuple(parts)) in self.documents:
                    found.add(item.id)
        return found

    def embed_items(self, items: Sequence[ItemLike]) -> list[np.ndarray]:
        """Each item's vectors (row 0 the whole item); those `embed_texts` made ahead of the write are taken (and
        stay kept: the same thought written again takes them too)."""
        documents = [(p, b, tuple(c)) for p, b, c in (item_texts(item) for item in items)]
        with self._lock:  # (the embedding below runs outside the index's lock: the write journal's replay)
            ready = {d: self.documents[d] for d in documents if d in self.documents}
        todo = [d for d in dict.fromkeys(documents) if d not in ready]
        ready.update(zip(todo, self.document_vectors(todo) if todo else []))
        found = [ready[d] for d in documents]
        expanded = [
            (n, d[0] + expansion)
            for n, (item, d) in enumerate(zip(items, documents))
            if (expansion := expansion_of(item))
        ]
        if expanded:  # an expansion is not part of the text: its own vector, after the parts'
            extra = np.asarray(self.embedder.embed([text for _, text in expanded]), dtype=np.float32)
            for (n, _), vector in zip(expanded, extra):
                found[n] = np.vstack([found[n], vector[None, :]])
        return found

    def document_vectors(self, documents: list[Document]) -> list[np.ndarray]:
        """Each (prefix, body, chunks)'s vectors (row 0 prefix + body): one pass per document when the embedder
        pools its sentences from it (`embed_parts`), else every text on its own; all in one call."""
        embed_parts = getattr(self.embedder, "embed_parts", None) if self.config.sentence_vectors == "pooled" else None
        if embed_parts is not None:
            return [np.asarray(v, dtype=np.float32) for v in embed_parts([(p, b, list(c)) for p, b, c in documents])]
        texts = [text for prefix, body, parts in documents for text in [prefix + body, *(prefix + p for p in parts)]]
        flat = np.asarray(self.embedder.embed(texts), dtype=np.float32)
        found, at = [], 0
        for _, _, pieces in documents:
            found.append(flat[at : at + 1 + len(pieces)])
            at += 1 + len(pieces)
        return found


def _kept(cache: dict[K, V], fresh: Mapping[K, V]) -> None:
    """Add `fresh` to `cache`, dropping its oldest entries past RANKING_CACHE."""
    cache.update(fresh)
    for key in list(itertools.islice(cache, max(0, len(cache) - RANKING_CACHE))):
        del cache[key]


class RetrievalCaches:
    """What ranking reads of items and of the corpus, read through from the database (module doc). The index's
    lock guards it; the write journal keeps it in step (`applied`, `forget`)."""

    def __init__(self, db: Database, embedder: Embedder, lock: threading.RLock):
        self.db, self.embedder, self._lock = db, embedder, lock
        self.applied = 0  # journal position the caches reflect
        self.authors: set[str] | None = None  # who wrote live items (read once, then kept up to date by the sync)
        self.vectors: dict[int, np.ndarray] = {}  # item id -> its vectors as float16 (row 0 = whole item)
        # what ranking reads of an item, kept while the journal says it is unchanged (first in, first out):
        self.ranked: dict[int, Ranked] = {}  # its columns
        self.documents_of: dict[int, tuple[str, str]] = {}  # its full-text document (own tokens, context tokens)
        self.positions: dict[tuple[str, int], int | None] = {}  # (episode, seq) -> the live item there, or None
        self.documents = 0  # live full-text documents (counted again as the journal moves)
        self.frequencies: dict[str, int] = {}  # term -> documents holding it, dropped whenever they are counted
        self._counted_at = -1  # journal position of that count
        self.corpus: CorpusSample | None = None  # random documents: BM25 and dense score statistics
        self._corpus_drawn_at = 0  # documents when it was drawn
        self.sample_matrix: tuple[np.ndarray, np.ndarray] | None = None  # the sample's vectors, stacked once
        self.warmup: threading.Thread | None = None
        self._stop_warmup = threading.Event()
        self._on_exit: Callable[[], None] | None = None  # what exit calls while the warm-up runs

    # ---- read through ------------------------------------------------------------------------------------

    def ranking_meta(self, repos: Repos, item_ids: Iterable[int], focus: bool) -> dict[int, Ranked]:
        """What ranking reads of these items (a query filtering by tags or emotions reads them from SQL)."""
        if focus:
            return {i: Ranked.of(row) for i, row in repos.items.ranking_rows(item_ids, focus).items()}
        found = {i: m for i in item_ids if (m := self.ranked.get(i)) is not None}
        missing = [i for i in item_ids if i not in found]
        if missing:
            fresh = {i: Ranked.of(row) for i, row in repos.items.ranking_rows(missing).items()}
            _kept(self.ranked, fresh)
            found.update(fresh)
        return found

    def documents_for(self, repos: Repos, item_ids: Iterable[int]) -> dict[int, tuple[str, str]]:
        found = {i: d for i in item_ids if (d := self.documents_of.get(i)) is not None}
        missing = [i for i in item_ids if i not in found]
        if missing:
            fresh = repos.items.lexical.documents(missing)
            _kept(self.documents_of, fresh)
            found.update(fresh)
        return found

    def items_at(self, repos: Repos, positions: set[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """(episode, seq) -> the live item there, for the positions that hold one."""
        missing = [p for p in positions if p not in self.positions]
        if missing:
            at = repos.items.at_positions(missing)
            _kept(self.positions, {p: at.get(p) for p in missing})
        return {p: i for p in positions if (i := self.positions.get(p)) is not None}

    def vectors_of(self, repos: Repos, item_ids: Iterable[int]) -> dict[int, np.ndarray]:
        """Every stored vector of these items (row 0 = the whole item), from memory or else from the database."""
        wanted = list(item_ids)
        missing = [i for i in wanted if i not in self.vectors]
        if missing:
            for item_id, stored in repos.items.vectors.get(self.embedder.name, missing).items():
                self.vectors[item_id] = stored.vectors
        return {i: self.vectors[i] for i in wanted if i in self.vectors}

    def corpus_sample(self, repos: Repos, sample_size: int, shape: Shape = WHOLE) -> CorpusSample:
        """The number of documents (counted again when the journal moves; past RECOUNT_ALWAYS_BELOW documents, once
        it has moved by a hundredth of them) and a uniform random sample of them (drawn again once the corpus has
        changed by a tenth)."""
        head = self.applied
        if self._counted_at < 0 or (
            head != self._counted_at
            and (self.documents < RECOUNT_ALWAYS_BELOW or head - self._counted_at > self.documents // 100)
        ):
            self.documents, self._counted_at = repos.items.lexical.count(), head
            self.frequencies = {}
        size = self.documents
        if (
            self.corpus is None
            or abs(size - self._corpus_drawn_at) > 0.1 * max(1, self._corpus_drawn_at)
            or (size and not len(self.corpus))
            or self.corpus.shape != shape
        ):
            self.corpus = CorpusSample.of(repos.items.lexical.sample(sample_size), shape)
            self._corpus_drawn_at, self.sample_matrix = size, None
        return self.corpus

    def document_frequencies(self, repos: Repos, terms: list[str], cap: int) -> dict[str, int]:
        """How many documents hold each term, kept as long as the document count (`corpus_sample`): exact below
        RECOUNT_ALWAYS_BELOW documents, off by under a hundredth of the corpus past it. Counting a frequent term
        reads its whole posting list (~0.3 ms a term at 100k on FTS5), and queries keep naming the same people."""
        missing = [t for t in terms if t not in self.frequencies]
        if not missing:
            return {t: self.frequencies[t] for t in terms}
        if len(self.frequencies) > FREQUENCIES_KEPT:
            self.frequencies = {}
        counted = repos.items.lexical.document_frequencies(missing, cap)
        # a term no document holds is asked again: the next memory may bring it, and a count of 0 drops it
        self.frequencies.update((t, n) for t, n in counted.items() if n)
        return {t: self.frequencies.get(t) or counted.get(t, 0) for t in terms}

    # ---- kept in step by the write journal ---------------------------------------------------------------

    def forget(self, changed: Iterable[int], rows: Iterable[ItemLike]) -> None:
        """Drop what ranking keeps of changed items, and the positions they hold or held (a new turn fills one)."""
        for item_id in changed:
            self.ranked.pop(item_id, None)
            self.documents_of.pop(item_id, None)
        for row in rows:
            if row.episode is not None and row.seq is not None:  # (a row without a place held none)
                self.positions.pop((row.episode, row.seq), None)

    def forget_ranking(self) -> None:
        """Drop every item's ranking columns, document and place (a collection filled again from the start)."""
        self.ranked, self.documents_of, self.positions = {}, {}, {}

    def replace_vectors(self, item_id: int, vectors: np.ndarray) -> None:
        """An item's vectors grew (memory/followup.py: a long text's every window) without its texts changing."""
        with self._lock:
            self.vectors[item_id] = vectors.astype(np.float16)
            self.sample_vectors_changed([item_id])

    def sample_vectors_changed(self, item_ids: Iterable[int]) -> None:
        """New vectors of these items: the sample's stacked vectors are stacked again when it holds one of them."""
        if self.corpus and set(self.corpus.ids) & set(item_ids):
            self.sample_matrix = None

    # ---- background warm-up ------------------------------------------------------------------------------

    def start_warmup(self, on_exit: Callable[[], None]) -> None:
        """Copy every stored vector into memory in the background (once per process, on first use); `on_exit` is
        called at interpreter exit while it runs (it stops it: `stop_warmup`)."""
        if self.warmup is not None or self._stop_warmup.is_set():
            return
        self.warmup = threading.Thread(target=self._warm, name="memory-warmup", daemon=True)
        # a daemon thread still inside Chroma's native code when the interpreter finalises crashes it
        # (measured: SIGSEGV when `kb add` exited mid-warm-up), so exit stops it between two pages first
        self._on_exit = on_exit
        atexit.register(on_exit)
        self.warmup.start()

    def stop_warmup(self) -> None:
        """Stop the background copy between two pages (safe to call more than once)."""
        self._stop_warmup.set()
        if self.warmup is not None:
            self.warmup.join(timeout=60)
            if self._on_exit is not None:
                atexit.unregister(self._on_exit)

    def _warm(self) -> None:
        """Copy every stored vector, and what ranking reads of every item (its columns, full-text document and
        place), into the caches."""
        try:
            started = time.monotonic()
            vectors = self.warm_pages(
                lambda repos, after: repos.items.vectors.page(self.embedder.name, after, WARMUP_PAGE), self.keep_vectors
            )
            rows = self.warm_pages(
                lambda repos, after: self.ranking_page(repos, after), self.keep_ranking, limit=RANKING_CACHE
            )
            log.info(
                "memory warmed: %d items' vectors, %d items' ranking rows in %.1fs",
                vectors,
                rows,
                time.monotonic() - started,
            )
        except Exception:  # the caches are only an accelerator; misses are read on demand
            log.debug("memory warm-up stopped", exc_info=True)
        finally:
            if self._on_exit is not None:  # done: nothing to stop at exit, and the index can be collected
                atexit.unregister(self._on_exit)

    def warm_pages(
        self,
        read: Callable[[Repos, int], Mapping[int, V]],
        keep: Callable[[Mapping[int, V]], None],
        limit: int | None = None,
    ) -> int:
        """Page through `read(repos, after_id) -> {id: value}` and `keep` each page, unless the journal moved while
        it was read (a change the sync has already dropped from the caches must not come back stale): then read it
        again."""
        after, copied = 0, 0
        while not self._stop_warmup.is_set() and (limit is None or copied < limit):
            seen = self.applied
            with self.db.unit() as repos:
                page = read(repos, after)
            if not page:
                break
            with self._lock:
                if self.applied != seen:
                    continue
                keep(page)
            copied, after = copied + len(page), max(page)
        return copied

    def keep_vectors(self, page: Mapping[int, Any]) -> None:
        for item_id, stored in page.items():
            self.vectors.setdefault(item_id, stored.vectors)

    @staticmethod
    def ranking_page(repos: Repos, after: int) -> dict[int, tuple[Ranked, tuple[str, str]]]:
        rows = {row.id: Ranked.of(row) for row in repos.items.ranking_page(after, WARMUP_PAGE)}
        documents = repos.items.lexical.documents(rows)
        return {i: (ranked, documents.get(i, ("", ""))) for i, ranked in rows.items()}

    def keep_ranking(self, page: Mapping[int, tuple[Ranked, tuple[str, str]]]) -> None:
        for item_id, (ranked, document) in page.items():
            self.ranked.setdefault(item_id, ranked)
            self.documents_of.setdefault(item_id, document)
            if ranked.episode is not None and ranked.seq is not None:
                self.positions.setdefault((ranked.episode, ranked.seq), item_id)
