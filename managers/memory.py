"""Memory as a whole: browse and search every tier (memory/tiers.py), edit, archive, restore and purge a row, the
history of every change, knowledge-base uploads — and the persona's own recall, archive and restore.

The tiers are declared once in `memory/tiers.py`; this manager is what a door calls with them. It works in the unit
of work it is given and never commits: a door that writes as the human opens its unit with `actor="human"` (so the
memory history names who did it), and brings the retrieval index up to date after the commit (`sync_index`), so
search sees the change at once. A human's delete purges for good; the persona's own deletes only archive
(`set_aside`).

A change that is a goal's or a task's status goes through the goals manager's rule whichever door made it: a human
closing a goal on the memory page closes it for the persona's memory upkeep too (a failed goal is a warning in the
process log, a closed goal or task asks for an abstract) — the same as the persona's own `goals.update`. The human's
change is recorded on the main thread (`MAIN_THREAD`), where the persona's loop runs.
"""

from __future__ import annotations

import builtins
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from managers.views import frozen_all
from memory.knowledge import Ingested, KnowledgeError, ingest
from memory.repositories import ArchivedRow, NotFound
from memory.retrieval.index import Hit, Query
from memory.tiers import (
    TIERS,
    AnyTier,
    GoalEdit,
    Invalid,
    MemoryRecord,
    RowNotFound,
    TaskEdit,
    TierEdit,
    TierError,
    TooLarge,
    Unsupported,
    hit_ref,
    ref_id,
    searchable,
    tier_of,
)
from memory.updates import Supersession, chain, restore, supersede_older, versions_of

if TYPE_CHECKING:
    from managers import Managers
    from memory.retrieval.recall_index import RecallIndex

MAX_UPLOAD_BYTES = 20 * 1024 * 1024  # a knowledge-base document
UPLOAD_DIR = "knowledge"  # under the data dir: the uploaded files, one directory per content hash
MAX_LIST = 500
MAIN_THREAD = "main"  # where a human's change is recorded (the persona's main loop)
MAX_RECALL = 20


class SearchUnavailable(LookupError):
    """This run has no retrieval index."""


@dataclass(frozen=True)
class Changed:
    """What a write did: whether anything changed, and the row as it is now (None after a purge)."""

    tier: str
    ref: str
    changed: bool
    record: MemoryRecord | None = None


@dataclass(frozen=True)
class KBUpload:
    """A knowledge-base upload: the document, its chunks, or why nothing was added (`skipped`)."""

    doc_id: int | None
    title: str
    chunks: int
    chars: int
    skipped: str | None


@dataclass(frozen=True)
class KBDocumentView:
    """A knowledge-base document as a door lists it."""

    id: int
    path: str
    title: str
    chunks: int
    chars: int


@dataclass(frozen=True)
class ChangeView:
    """One change of a memory tier's row: who, when, and the row before and after."""

    id: int
    at: datetime
    tier: str
    ref: str
    action: str  # create | update | archive | restore | delete
    actor: str  # human | persona | dream | upkeep | system | peer
    before: dict[str, Any] | None
    after: dict[str, Any] | None


class MemoryManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    # ---- reading -----------------------------------------------------------------------------------------------

    @property
    def index(self) -> RecallIndex:
        index = self.house.deps.recall()
        if index is None:
            raise SearchUnavailable("memory search is not available in this run (no memory index)")
        return index

    def vector_database(self) -> str:
        """The name this persona's vectors go under on a Chroma server (kept in its database, so two personas on one
        server never share a collection)."""
        return self.repos.config.vector_database()

    def count(self, tier: str) -> int:
        return tier_of(tier).count(self.repos)

    def list(
        self, tier: str, *, q: str | None = None, archived: bool = False, limit: int = 50
    ) -> builtins.list[MemoryRecord]:
        """A tier's rows, newest first (archived ones instead when asked), each with what may be done to it; `q`
        narrows them: by hybrid search in a searchable tier, by the words in the others."""
        found = tier_of(tier)
        q = (q or "").strip() or None
        wanted = "archived" if archived else "active"
        if q is None:
            items = found.rows(self.repos, archived, limit)
        elif found.item_tier is not None:
            hits = self.index.search(Query(text=q, k=limit, tiers=[found.item_tier], include_archived=archived))
            items = []
            for ref in dict.fromkeys(hit_ref(hit.item.tier, hit.item.ref) for hit in hits):
                try:
                    record = found.one(self.repos, ref)
                except RowNotFound:
                    continue
                if record.status == wanted:
                    items.append(record)
        else:
            words = q.lower().split()
            items = [
                r
                for r in found.rows(self.repos, archived, MAX_LIST)
                if all(w in f"{r.title}\n{r.text}".lower() for w in words)
            ][:limit]
        return [found.actions(r) for r in items]

    def get(self, tier: str, ref: str) -> MemoryRecord:
        found = tier_of(tier)
        return found.actions(found.one(self.repos, str(ref)))

    def search(
        self, q: str, *, k: int = 10, tiers: builtins.list[str] | None = None, archived: bool = False
    ) -> builtins.list[Hit]:
        """The persona's own hybrid retrieval (BM25 + vectors, fused) across the searchable tiers (or those named)."""
        return search_index(self.index, q, k=k, tiers=tiers, archived=archived)

    def history(
        self,
        *,
        tier: str | None = None,
        ref: str | None = None,
        actor: str | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> builtins.list[ChangeView]:
        """Changes, newest first: of one row (tier + ref), one tier, or all."""
        if tier is not None:
            tier_of(tier)
        return frozen_all(
            ChangeView, self.repos.history.list(tier=tier, ref=ref, actor=actor, limit=limit, before_id=before_id)
        )

    # ---- writing -----------------------------------------------------------------------------------------------

    def edit(self, tier: str, ref: str, edit: TierEdit | Mapping[str, Any], *, thread_id: str = MAIN_THREAD) -> Changed:
        """Only the given fields change (checked against the tier's edit model when given as a mapping)."""
        found: AnyTier = tier_of(tier)
        fields = edit if isinstance(edit, TierEdit) else found.parse_edit(edit)
        before = found.one(self.repos, ref)
        if fields.given():
            try:
                found.edit(self.repos, ref, fields, self.house.deps.clock())
            except TierError:
                raise
            except NotFound as exc:
                raise RowNotFound(str(exc), field="ref") from exc
            except ValueError as exc:
                raise Invalid(str(exc)) from exc
            self._consequences(ref, fields, thread_id)
        record = found.one(self.repos, ref)
        return Changed(tier, ref, record != before, found.actions(record))

    def _consequences(self, ref: str, edit: TierEdit, thread_id: str) -> None:
        """What a status change also changes, the same for every door (managers/goals.py)."""
        if isinstance(edit, GoalEdit) and edit.status is not None:
            self.house.goals.status_set(
                self.repos.goals.get(ref_id(ref)), edit.status, thread_id=thread_id, root_thread=thread_id
            )
        elif isinstance(edit, TaskEdit) and edit.status is not None:
            self.house.tasks.status_set(ref_id(ref), edit.status, root_thread=thread_id)

    def archive(self, tier: str, ref: str) -> Changed:
        """Set a row aside: out of the persona's lists and retrieval, restorable."""
        found = tier_of(tier)
        changed = found.archive(self.repos, ref, self.house.deps.clock())
        return Changed(tier, ref, bool(changed), found.actions(found.one(self.repos, ref)))

    def restore(self, tier: str, ref: str) -> Changed:
        """Bring an archived row back (for core memory and the notepad: put a replaced version back — the ref of
        what it answers is then the block's name)."""
        found = tier_of(tier)
        changed = found.restore(self.repos, ref)
        record = found.one(self.repos, tier if found.versioned else ref)
        return Changed(tier, record.ref, bool(changed), found.actions(record))

    def purge(self, tier: str, ref: str) -> Changed:
        """A human's delete: gone for good (its history stays)."""
        tier_of(tier).purge(self.repos, ref)
        return Changed(tier, ref, True)

    # ---- the knowledge base -------------------------------------------------------------------------------------

    def upload_kb(self, filename: str, data: bytes, *, source: str = "", author: str = "") -> KBUpload:
        """A document for the knowledge base (PDF, text or markdown, at most 20 MB): kept under the data dir,
        chunked, stored. The same text twice is skipped. `source`: who gave it when it was not the owner at the
        web page (`Ann (guest, via matrix)`), kept with the document; `author`: their name, every chunk's author.
        The door syncs the index after the commit."""
        return self.add_kept_document(
            self.keep_document(filename, data), source=source, author=author, filename=filename
        )

    def keep_document(self, filename: str, data: bytes) -> Path:
        """A document's bytes under the data dir, where the knowledge base keeps it (one directory per content
        hash), checked first (size, not empty, PDF or UTF-8 text by its content); nothing ingested yet — a channel
        keeps a document there while it waits for the owner's consent."""
        if len(data) > MAX_UPLOAD_BYTES:
            raise TooLarge(
                f"the file is over {MAX_UPLOAD_BYTES // (1024 * 1024)} MB; split it or upload a smaller one",
                field="file",
            )
        if not data.strip():
            raise Invalid("the file is empty", field="file")
        suffix = _kind(filename, data)
        if suffix is None:
            raise Unsupported("not a PDF or UTF-8 text/markdown file (checked by its content)", field="file")
        settings = self.house.deps.settings
        directory = Path(settings.data_dir).expanduser() / UPLOAD_DIR / hashlib.sha256(data).hexdigest()[:16]
        path = directory / f"{_safe_stem(filename)}{suffix}"
        directory.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path.resolve()

    def add_kept_document(self, path: Path, *, source: str = "", author: str = "", filename: str = "") -> KBUpload:
        """A kept document (`keep_document`) into the knowledge base: chunked and stored, `source` with it."""
        try:
            result = ingest(self.repos, path, source=source, author=author)
        except KnowledgeError as exc:
            path.unlink(missing_ok=True)
            raise Invalid(str(exc).replace(str(path), filename or path.name), field="file") from exc
        doc = self.repos.kb.get(result.doc_id) if result.doc_id is not None else None
        title, chars = (doc.title, doc.chars) if doc is not None else (path.stem, 0)
        if result.skipped and Path(result.path) == path and doc is not None and doc.path != str(path):
            path.unlink(missing_ok=True)
        return KBUpload(doc_id=result.doc_id, title=title, chunks=result.chunks, chars=chars, skipped=result.skipped)

    def ingest_file(self, path: Path, *, source: str = "", author: str = "") -> Ingested:
        """A file on this machine into the knowledge base (the operator's `run.py kb add`): chunked and stored; the
        same text twice is skipped. Raises KnowledgeError for what cannot be read."""
        return ingest(self.repos, path, source=source, author=author)

    def kb_documents(self) -> builtins.list[KBDocumentView]:
        return [KBDocumentView(d.id, d.path, d.title, d.chunks, d.chars) for d in self.repos.kb.list()]

    def remove_kb_document(self, doc_id: int) -> KBDocumentView:
        """A document and its chunks, gone (the human's delete: not restorable); the door syncs the index after."""
        doc = self.repos.kb.remove(doc_id)
        return KBDocumentView(doc.id, doc.path, doc.title, doc.chunks, doc.chars)

    @staticmethod
    def drop_kept_document(path: Path) -> None:
        """A kept document the owner refused: its bytes are deleted (the note keeps the reference)."""
        path.unlink(missing_ok=True)
        try:
            path.parent.rmdir()
        except OSError:  # not empty (the same bytes under another name), or gone
            pass

    # ---- the persona's own ---------------------------------------------------------------------------------------

    def recall(
        self,
        text: str,
        *,
        k: int = 5,
        tiers: builtins.list[str] | None = None,
        days: int | None = None,
        tags: builtins.list[str] | None = None,
        include_archived: bool = False,
        happened_after: date | None = None,
        happened_before: date | None = None,
    ) -> builtins.list[Hit]:
        """The persona's search: what it finds counts as used (its last-used time moves). `days` counts back over
        record time; `happened_after`/`happened_before` bound event time (memory/event_time.py). Only what this
        unit's audience may see (managers/audience.py): all of it for the owner and the persona alone."""
        now = self.house.deps.clock()
        wanted = max(1, min(k, MAX_RECALL))
        scope = self.house.actor.recall_tags()  # a guest's or a peer's tick: their conversation and shareable ones
        hits = self.index.search(
            Query(
                text=text,
                k=wanted if scope is None or not tags else MAX_RECALL * 2,
                tiers=tiers,
                tags=scope if scope is not None else tags,
                include_archived=include_archived,
                since=now - timedelta(days=days) if days else None,
                happened_since=day_start(happened_after),
                happened_until=day_start(happened_before),
            )
        )
        if scope is not None and tags:  # both: in scope, and with one of the tags asked for
            hits = [h for h in hits if set(tags) & {str(t) for t in h.item.tags or ()}][:wanted]
        self.repos.items.touch([h.item.id for h in hits], now)
        return hits

    def versions_of(self, hits: builtins.list[Hit]) -> dict[int, str]:
        """The texts of what the hits replaced or were replaced by (knowledge updates), by item id."""
        return versions_of(self.repos, [h.item for h in hits])

    def sample_lines(self, tiers: builtins.list[str] | tuple[str, ...], limit: int) -> builtins.list[Any]:
        """Up to `limit` active memories of these tiers drawn at random, as plain rows (id, tier, text, title,
        created_at, …: the items' sample columns)."""
        return self.repos.items.sample_lines(tiers, limit)

    def touch(self, tier: str, ref: str | int) -> None:
        """The row was used now (its retrieval item's last-used time)."""
        self.repos.items.touch(self.repos.items.ids_of(tier, [str(ref)]), self.house.deps.clock())

    def set_aside(self, tier: str, ref: str | int, *, by: str, thread_id: str) -> bool:
        """The persona's delete: archived, out of every list and search, restorable; `by` (the command) is named in
        the process log. False when there was nothing to archive."""
        if not self.repos.archive(tier, ref, self.house.deps.clock()):
            return False
        self.repos.processes.add(by, f"{tier} {ref} archived on request", thread_id=thread_id)
        return True

    def bring_back(
        self, tier: str, ref: str | int, *, by: str, thread_id: str, message: str | None = None, status: str = "ok"
    ) -> bool:
        """The persona's restore (of an archived row, or a replaced core/notepad version), said in the process log
        (`message`, or "restored on request"); False when nothing was archived."""
        if not self.repos.restore(tier, ref):
            return False
        text = message or f"{tier} {ref} restored on request"
        self.repos.processes.add(by, text, status=status, thread_id=thread_id)
        return True

    def archived(self, limit: int = 10) -> builtins.list[ArchivedRow]:
        """What is archived, of every tier, most recently archived first."""
        return self.repos.archived(limit=limit)

    # ---- knowledge updates (memory/updates.py) -------------------------------------------------------------------

    def supersede_older(self, tier: str, ref: str | int) -> builtins.list[Supersession]:
        """The row's older statements it updates or contradicts, marked superseded (kept, restorable, ranked
        lower); run after its commit, by a background job, never on the tick's path."""
        item = self.repos.items.find(tier, ref)
        return [] if item is None else supersede_older(self.index, item.id)

    def versions(self, tier: str, ref: str | int) -> builtins.list[tuple[str, str, str]]:
        """The row's line of versions, oldest first, as (ref, status, text) (the Memory page's chain)."""
        item = self.repos.items.find(tier, ref)
        if item is None:
            return []
        ids = chain(self.repos, item.id)
        rows = self.repos.items.many(ids)
        return [(rows[i].ref, rows[i].status, rows[i].text) for i in ids if i in rows]

    def restore_superseded(self, tier: str, ref: str | int) -> bool:
        """Undo a supersession: the older row is active again."""
        item = self.repos.items.find(tier, ref)
        return item is not None and restore(self.repos, item.id)


def day_start(day: date | None) -> datetime | None:
    """A day's first moment in UTC (an event-time bound)."""
    return None if day is None else datetime(day.year, day.month, day.day, tzinfo=UTC)


def search_index(
    index: RecallIndex,
    q: str,
    *,
    k: int = 10,
    tiers: builtins.list[str] | None = None,
    archived: bool = False,
    happened_after: date | None = None,
    happened_before: date | None = None,
) -> builtins.list[Hit]:
    """`MemoryManager.search` without a unit of work (the index reads on its own): Invalid naming the tiers that
    are not searchable; nothing for an empty query. `happened_after`/`happened_before` bound event time."""
    wanted = searchable(tiers)
    return (
        index.search(
            Query(
                text=q,
                k=k,
                tiers=wanted,
                include_archived=archived,
                happened_since=day_start(happened_after),
                happened_until=day_start(happened_before),
            )
        )
        if q.strip()
        else []
    )


def _kind(filename: str, data: bytes) -> str | None:
    """The suffix ingestion reads the upload as, from its content: a PDF's magic bytes, or UTF-8 text."""
    if data.startswith(b"%PDF"):
        return ".pdf"
    if b"\x00" in data:
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return ".md" if filename.lower().endswith((".md", ".markdown")) else ".txt"


def _safe_stem(filename: str) -> str:
    stem = Path(filename.replace("\\", "/")).name.rsplit(".", 1)[0] if filename else ""
    return re.sub(r"[^\w.\- ]+", "_", stem).strip(" .")[:120] or "document"


__all__ = [
    "MAIN_THREAD",
    "MAX_UPLOAD_BYTES",
    "TIERS",
    "Changed",
    "KBUpload",
    "MemoryManager",
    "SearchUnavailable",
    "search_index",
]
