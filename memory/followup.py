"""What follows a memory's write, off the tick's path: the memory index's follow-up.

The write (a tick's `write_memory`, a command, the web) commits the row, its full-text document and, at the sync
right after, its vectors — a bounded amount of work whatever the text's length (memory/text.py `parts`: the whole
text and the parts of its first WRITTEN_CHARS characters). Everything else a new memory needs runs here, in one
background thread of the
process that holds the index (`FollowUp.start`: the loop's; a fleet worker's indexing job calls `run_pending`
instead), item by item in the order they were written, a page at a time (the page read and its event times set in
one short transaction, one sync of the vectors and one move of the cursor after it):

1. its event time, when its text says when (memory/event_time.py; every tier but the knowledge base's chunks);
2. in the tiers where facts live (`FACT_TIERS`), the older memories it updates or contradicts, marked superseded
   (memory/updates.py: kept, restorable, ranked lower, chained both ways) — searched for only when its text holds
   a name or a frame word, without which it could replace nothing (`may_supersede`);
3. a long text's vectors past what the write embedded: the vectors of its parts (sentences) past its first
   WRITTEN_CHARS, read in windows as the write reads its own, DEEP_BATCH_CHARS at a time, stored with its other
   vectors (a 300,000-character paste is found by any of its parts, not only those the write embedded);
4. when configured (`memory.expansion`, off by default: bench/expansion.py), its index-time expansion by the LLM
   (memory/expansion.py): key phrases, facts and resolved dates, searchable by their words and their meaning.

Where it stands is kept in the database (`ConfigRepo.follow_up_cursor`): a restarted process goes on from the first
memory not yet followed up. Every step is idempotent, so a crash between a step and the cursor repeats it harmlessly;
a stop between two batches of a long text's parts keeps none of them and leaves the cursor before it (the next
pass does the whole text), so a stopping process is not held up by a paste's thousands of sentences.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from memory.clock import utcnow
from memory.db import Database
from memory.event_time import event_time
from memory.retrieval.caches import RetrievalCaches, expansion_of, item_texts, texts_key
from memory.retrieval.embeddings import Embedder
from memory.text import WRITTEN_CHARS, parts, split_written
from memory.updates import Statement, supersede

log = logging.getLogger(__name__)

FACT_TIERS = frozenset({"message", "diary", "llm_memory", "concept"})
NO_EVENT_TIERS = frozenset({"kb", "episode", "abstract"})  # documents and summaries: their dates are their texts'
LONG_TEXT = WRITTEN_CHARS  # characters: a text longer than this gets its remaining vectors here
DEEP_BATCH_CHARS = 16_000  # characters of parts embedded at a time (the index's lock is not held meanwhile)
PROGRESS_CHARS = 50_000  # a text longer than this logs its progress
PAGE = 64  # items a pass reads at a time

Expander = Callable[[str, str, datetime], str]  # (text, author, record time) -> expansion text ("" for none)


class FollowedIndex(Protocol):
    """What the follow-up uses of its memory index (memory/retrieval/index.py `MemoryIndex`)."""

    db: Database
    embedder: Embedder
    caches: RetrievalCaches

    def sync(self, progress: bool = False, flush: bool = False) -> int: ...

    def search(self, query: Any, **kwargs: Any) -> list[Any]: ...


@dataclass(frozen=True)
class _Read:
    """What the follow-up's steps need of a memory, read with its page."""

    id: int
    tier: str
    text: str
    created: datetime | None
    status: str
    author: str


@dataclass
class FollowUpReport:
    looked_at: int = 0
    event_times: int = 0
    superseded: list[tuple[int, int]] = field(default_factory=list)  # (older, newer)
    deep_parts: int = 0  # a long text's parts embedded after its write
    expanded: int = 0


class FollowUp:
    """The follow-up of new memories (module doc), for one memory index."""

    def __init__(self, index: FollowedIndex, *, expander: Expander | None = None):
        self.index = index
        self.expander = expander
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._running = threading.Lock()  # one pass at a time (the thread's, or a job's `run_pending`)

    # ---- the background thread ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Follow up what is written from now on (and what an earlier process left) in a thread of its own."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="memory-follow-up", daemon=True)
        self._thread.start()
        self._wake.set()

    def wake(self) -> None:
        """Something was written (the index's sync saw it)."""
        self._wake.set()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(timeout=30.0)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self.run_pending(stop=self._stop)
            except Exception:  # the cursor did not move past the item: the next pass tries it again
                log.exception("memory follow-up failed; it is tried again on the next write")

    def idle(self) -> bool:
        """Whether every memory written so far has been followed up."""
        with self.index.db.reading() as reads:
            return reads.config.follow_up_cursor >= reads.items.newest_id()

    # ---- one pass --------------------------------------------------------------------------------------------

    def run_pending(self, limit: int | None = None, stop: threading.Event | None = None) -> FollowUpReport:
        """Follow up the memories written since the last pass (at most `limit`), oldest first, a page at a time: the
        page read and its event times in one transaction, then each item's other steps, then one sync and the cursor
        moved past what was done (a failure leaves it after the last item done: that item is tried again)."""
        report = FollowUpReport()
        with self._running:
            while limit is None or report.looked_at < limit:
                room = PAGE if limit is None else min(PAGE, limit - report.looked_at)
                with self.index.db.unit() as repos:
                    cursor = repos.config.follow_up_cursor
                    page = [self._read(item, report, repos) for item in repos.items.after(cursor, room)]
                done = cursor
                try:
                    for item in page:
                        if stop is not None and stop.is_set():
                            return report
                        self._follow_up_read(item, report, stop)
                        if (
                            stop is not None and stop.is_set()
                        ):  # cut short (a long text's windows): done again next time
                            return report
                        done = item.id
                        report.looked_at += 1
                finally:
                    if done != cursor:
                        self.index.sync()
                        with self.index.db.unit() as repos:
                            repos.config.follow_up_cursor = done
                if len(page) < room:
                    break
        return report

    def follow_up(
        self, item_id: int, report: FollowUpReport | None = None, stop: threading.Event | None = None
    ) -> FollowUpReport:
        """Every step of the module doc for one memory (a long text's windows stop early when `stop` is set)."""
        report = report or FollowUpReport()
        with self.index.db.unit() as repos:
            item = repos.items.many([item_id]).get(item_id)
            if item is None or item.status == "deleted":
                return report
            read = self._read(item, report, repos)
        self._follow_up_read(read, report, stop)
        self.index.sync()
        return report

    def _read(self, item: Any, report: FollowUpReport, repos: Any) -> _Read:
        """Step 1 (its event time, set in the caller's unit) and what the other steps need of the item."""
        read = _Read(item.id, item.tier, item.text or "", item.created_at, item.status, item.author or "")
        if (
            item.event_at is None
            and read.tier not in NO_EVENT_TIERS
            and (found := event_time(read.text, read.created or utcnow())) is not None
        ):
            repos.items.set_event_time(item, found.at, found.phrase, found.precision)
            report.event_times += 1
        return read

    def _follow_up_read(self, item: _Read, report: FollowUpReport, stop: threading.Event | None = None) -> None:
        """Steps 2-4 for an item `_read` has read (the caller syncs after; a long text's windows stop early when
        `stop` is set)."""
        if item.tier in FACT_TIERS and item.status == "active":
            found = supersede(self.index, Statement(item.id, item.author, item.text, item.created), item.tier)
            report.superseded += [(s.older, s.newer) for s in found]
        if self.expander is not None and item.tier in FACT_TIERS and not self._expanded(item.id):
            report.expanded += self.expand(item.id, item.text, item.author, item.created)
            self.index.sync()  # its vectors, with the expansion's
        if len(item.text) > LONG_TEXT:
            report.deep_parts += self.deepen(item.id, stop)

    def _expanded(self, item_id: int) -> bool:
        with self.index.db.reading() as reads:
            item = reads.items.many([item_id]).get(item_id)
            return item is None or "expansion" in (item.meta or {})

    def expand(self, item_id: int, text: str, author: str, created: datetime | None) -> int:
        """The item's expansion by the configured model, stored (an empty answer is stored too: not asked again)."""
        assert self.expander is not None
        try:
            expansion = self.expander(text, author, created or utcnow()).strip()
        except Exception:  # a model that failed says nothing about the memory: asked again on the next pass
            log.exception("memory follow-up: the expansion of item %s failed", item_id)
            return 0
        with self.index.db.unit() as repos:
            item = repos.items.many([item_id]).get(item_id)
            if item is None:
                return 0
            repos.items.set_expansion(item, expansion)
        return 1 if expansion else 0

    def deepen(self, item_id: int, stop: threading.Event | None = None) -> int:
        """A long item's vectors of its parts past those the write embedded (module doc, step 3), read in windows as
        the write reads its own (memory/retrieval/embeddings.py `embed_parts`), DEEP_BATCH_CHARS of text at a time;
        returns how many parts were embedded. `stop` set between two batches: none is kept (a stopping process is
        not held up by a paste's thousands of sentences, nor cut off inside the embedding model at exit)."""
        index = self.index
        name = index.embedder.name
        with index.db.reading() as reads:
            item = reads.items.many([item_id]).get(item_id)
            if item is None:
                return 0
            key = texts_key(item)
            stored = reads.items.vectors.get(name, [item_id]).get(item_id)
            prefix = f"{item.author}: " if item.author else ""
            text = item.text or ""
            made = 1 + len(item_texts(item)[2]) + (1 if expansion_of(item) else 0)  # the write's rows
        later = split_written(parts(text))[1]
        if not later:
            return 0
        if stored is None or stored.texts_key != key:
            index.sync()  # the write's vectors first
            with index.db.reading() as reads:
                stored = reads.items.vectors.get(name, [item_id]).get(item_id)
            if stored is None or stored.texts_key != key:
                return 0  # changed meanwhile: its next version is followed up in turn
        if len(stored.vectors) >= made + len(later):
            return 0  # done before (a repeated pass)
        rows = [stored.vectors[:made].astype(np.float32)]
        started, done = time.monotonic(), 0
        for body, group in batches(text, later, DEEP_BATCH_CHARS):
            if stop is not None and stop.is_set():
                return 0
            rows.append(part_vectors(index.embedder, prefix, body, group))
            done += len(body)
            if len(text) > PROGRESS_CHARS:
                log.info(
                    "memory follow-up: item %d, %d/%d characters in windows (%.0f characters/s)",
                    item_id,
                    min(len(text), WRITTEN_CHARS + done),
                    len(text),
                    done / max(1e-6, time.monotonic() - started),
                )
        matrix = np.vstack(rows)
        with index.db.unit() as repos:
            current = repos.items.many([item_id]).get(item_id)
            if current is None or texts_key(current) != key:
                return 0
            repos.items.vectors.put(name, [(item_id, key, matrix)])
        index.caches.replace_vectors(item_id, matrix)
        return len(later)


def batches(text: str, found: list[str], size: int) -> list[tuple[str, list[str]]]:
    """Consecutive parts of `text` in groups of about `size` characters, each with the stretch of `text` it covers
    (from its first part to its last: the windows are read from the text itself)."""
    groups: list[tuple[str, list[str]]] = []
    cursor, group, begin, end = 0, list[str](), -1, 0
    for part in found:
        at = text.find(part, cursor)
        at = cursor if at < 0 else at
        if group and at + len(part) - begin > size:
            groups.append((text[begin:end], group))
            group, begin = [], -1
        if begin < 0:
            begin = at
        group.append(part)
        cursor = end = max(end, at + len(part))
    if group:
        groups.append((text[begin:end], group))
    return groups


def part_vectors(embedder: Embedder, prefix: str, body: str, found: list[str]) -> np.ndarray:
    """The vectors of `found`, parts of `body`: pooled from the windows' passes when the embedder can, else each
    part encoded on its own (prefix + part)."""
    embed_parts = getattr(embedder, "embed_parts", None)
    if embed_parts is not None:
        return np.asarray(embed_parts([(prefix, body, found)])[0][1:], dtype=np.float32)
    return np.asarray(embedder.embed([prefix + part for part in found]), dtype=np.float32)
