"""Memory: browse and search every tier, a human's edits, archive / restore / delete, the history of every change,
and knowledge-base uploads — the web's door to the tiers (memory/tiers.py) and the memory manager
(managers/memory.py).

Reads take the request's unit of work; a write opens its own unit as the human (`actor="human"`, so the memory history
names who did it), commits, and then brings the retrieval index up to date so search sees it at once. A tier's
refusal (`TierError`) is answered with its HTTP status, naming the field."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from managers import Managers
from managers.audience import OWNER
from managers.memory import MAX_UPLOAD_BYTES, Changed, search_index
from memory.retrieval.index import Hit
from memory.tiers import (
    TIERS,
    AnyTier,
    Conflict,
    FieldInfo,
    Invalid,
    NotEditable,
    RowNotFound,
    TierError,
    TooLarge,
    UnknownTier,
    Unsupported,
    hit_ref,
    searchable,
)
from memory.tiers import tier_of as _tier_of
from web.context import WebServices
from web.errors import NotFoundError, ServiceError
from web.schemas.memory import (
    Change,
    Done,
    History,
    KBUploaded,
    MemoryList,
    MemoryRecord,
    SearchHit,
    SearchResults,
    TierInfo,
    Tiers,
)

log = logging.getLogger(__name__)

Tier = AnyTier
STATUSES: dict[type[TierError], int] = {TooLarge: 413, Unsupported: 415, Invalid: 422, NotEditable: 405, Conflict: 409}

__all__ = [
    "MAX_UPLOAD_BYTES",
    "TIERS",
    "Page",
    "Tier",
    "archive",
    "delete",
    "edit",
    "form_fields",
    "get_record",
    "history",
    "list_tier",
    "page",
    "restore",
    "search",
    "tier_of",
    "tiers",
    "upload_kb",
]


@contextmanager
def _answered() -> Iterator[None]:
    """A tier's refusal as the web's: 404 for an unknown tier or row, else the status of its kind."""
    try:
        yield
    except (UnknownTier, RowNotFound) as exc:
        raise NotFoundError(exc.message, field=exc.field) from exc
    except TierError as exc:
        status = next((code for kind, code in STATUSES.items() if isinstance(exc, kind)), 400)
        raise ServiceError(exc.message, field=exc.field, status=status) from exc


def _index(services: WebServices, flush: bool = False) -> int:
    """Bring the retrieval index up to what was just committed; a failure is logged and the next sync repairs it."""
    try:
        return services.memory.sync(flush=flush)
    except Exception:
        log.exception("memory index sync failed; it is retried on the next sync")
        return 0


def tier_of(name: str) -> Tier:
    with _answered():
        return _tier_of(name)


# ---- reading ---------------------------------------------------------------------------------------------------


def tiers(house: Managers) -> Tiers:
    return Tiers(
        tiers=[
            TierInfo(
                name=t.name,
                label=t.label,
                count=house.memory.count(t.name),
                searchable=t.searchable,
                archivable=t.archivable,
                editable=t.editable,
                deletable=t.deletable,
                fields=list(t.fields),
            )
            for t in TIERS.values()
        ]
    )


def list_tier(
    house: Managers, services: WebServices, name: str, *, q: str | None = None, archived: bool = False, limit: int = 50
) -> MemoryList:
    """A tier's rows, newest first (archived ones instead when asked); `q` narrows them: by hybrid search in a
    searchable tier, by the words in the others."""
    q = (q or "").strip() or None
    with _answered():
        items = house.memory.list(name, q=q, archived=archived, limit=limit)
    return MemoryList(tier=name, archived=archived, q=q, items=items)


def get_record(house: Managers, name: str, ref: str) -> MemoryRecord:
    with _answered():
        return house.memory.get(name, ref)


def _hit(hit: Hit, texts: Mapping[int, str] | None = None) -> SearchHit:
    item = hit.item
    meta, texts = item.meta or {}, texts or {}
    newer = meta.get("superseded_by")
    event = meta.get("event") or {}
    said = " · ".join(str(v) for v in (event.get("phrase"), event.get("precision")) if v) or None
    return SearchHit(
        tier=item.tier,
        ref=hit_ref(item.tier, item.ref),
        title=item.title,
        text=item.text,
        score=hit.score,
        status=item.status,
        browsable=item.tier in TIERS,
        replaced=[texts[i] for i in reversed(meta.get("replaces", [])) if i in texts],
        superseded_by=texts.get(newer) if newer is not None else None,
        recorded_at=_aware(item.created_at),
        happened_at=_aware(item.event_at),
        happened_as=said if item.event_at is not None else None,
    )


def _aware(moment: datetime | None) -> datetime | None:
    """A stored time as UTC with its zone (SQLite gives it back without one)."""
    return moment if moment is None or moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def day_of(value: str, field: str) -> date | None:
    """A page's date box: empty is none; anything but YYYY-MM-DD is refused, naming the field."""
    if not value.strip():
        return None
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        raise ServiceError(f"{value!r} is not a date (YYYY-MM-DD)", field=field, status=422) from None


def search(
    services: WebServices,
    q: str,
    *,
    k: int = 10,
    tiers: list[str] | None = None,
    archived: bool = False,
    happened_after: date | None = None,
    happened_before: date | None = None,
) -> SearchResults:
    """The persona's own hybrid retrieval (BM25 + vectors, fused) across the searchable tiers (or those named);
    `happened_after`/`happened_before` bound the memories' event time."""
    with _answered():
        searchable(tiers)  # the tiers are checked even for an empty query (the index is opened only for a query)
        hits = (
            search_index(
                services.memory,
                q,
                k=k,
                tiers=tiers,
                archived=archived,
                happened_after=happened_after,
                happened_before=happened_before,
            )
            if q.strip()
            else []
        )
        with services.managers.reading(OWNER) as house:  # what they updated or were updated by (memory/updates.py)
            texts = house.memory.versions_of(hits)
    return SearchResults(q=q, hits=[_hit(h, texts) for h in hits])


def history(
    house: Managers,
    *,
    tier: str | None = None,
    ref: str | None = None,
    actor: str | None = None,
    limit: int = 50,
    before_id: int | None = None,
) -> History:
    """Changes, newest first: of one row (tier + ref), one tier, or all."""
    with _answered():
        rows = house.memory.history(tier=tier, ref=ref, actor=actor, limit=limit, before_id=before_id)
    return History(
        tier=tier,
        ref=ref,
        changes=[
            Change(
                id=c.id, at=c.at, tier=c.tier, ref=c.ref, action=c.action, actor=c.actor, before=c.before, after=c.after
            )
            for c in rows
        ],
    )


# ---- writing (as the human) ------------------------------------------------------------------------------------


def form_fields(name: str, form: Mapping[str, str]) -> dict[str, Any]:
    """A page's edit form as an edit body: lists from commas (or lines), yes/no, empty numbers left out."""
    body: dict[str, Any] = {}
    for spec in tier_of(name).fields:
        if spec.name not in form:
            continue
        value = str(form[spec.name])
        if spec.kind == "list":
            body[spec.name] = [part.strip() for part in value.split(",") if part.strip()]
        elif spec.kind == "lines":
            body[spec.name] = [line.strip() for line in value.splitlines() if line.strip()]
        elif spec.kind == "bool":
            body[spec.name] = value.lower() in ("true", "on", "1", "yes")
        elif (spec.optional or spec.kind in ("int", "float", "choice")) and not value.strip():
            continue
        else:
            body[spec.name] = value
    return body


def _done(done: Changed) -> Done:
    return Done(tier=done.tier, ref=done.ref, changed=done.changed, record=done.record)


def edit(services: WebServices, name: str, ref: str, body: Mapping[str, Any]) -> Done:
    """A human's edit: only the given fields change; searchable tiers are re-indexed."""
    with _answered():
        tier = _tier_of(name)
        fields = tier.parse_edit(body)
        with services.managers.unit(OWNER) as house:
            done = house.memory.edit(name, ref, fields)
    if tier.searchable:
        _index(services)
    return _done(done)


def archive(services: WebServices, name: str, ref: str) -> Done:
    """Set a row aside: out of the persona's lists and retrieval, restorable."""
    with _answered(), services.managers.unit(OWNER) as house:
        done = house.memory.archive(name, ref)
    _index(services)
    return _done(done)


def restore(services: WebServices, name: str, ref: str) -> Done:
    """Bring an archived row back (for core memory and the notepad: put a replaced version back)."""
    with _answered(), services.managers.unit(OWNER) as house:
        done = house.memory.restore(name, ref)
    _index(services)
    return _done(done)


def delete(services: WebServices, name: str, ref: str) -> Done:
    """A human's delete: gone for good (its history stays)."""
    with _answered(), services.managers.unit(OWNER) as house:
        done = house.memory.purge(name, ref)
    _index(services)
    return _done(done)


def upload_kb(services: WebServices, filename: str, data: bytes) -> KBUploaded:
    """A document for the knowledge base (PDF, text or markdown, at most 20 MB): kept under the data dir, chunked,
    indexed. The same text twice is skipped."""
    with _answered(), services.managers.unit(OWNER) as house:
        result = house.memory.upload_kb(filename, data)
    indexed = 0 if result.skipped else _index(services, flush=True)
    return KBUploaded(
        doc_id=result.doc_id,
        title=result.title,
        chunks=result.chunks,
        chars=result.chars,
        skipped=result.skipped,
        indexed=indexed,
    )


# ---- the page --------------------------------------------------------------------------------------------------


@dataclass
class Page:
    """What the memory page shows: the tiers, the one open, its rows, the latest changes."""

    tiers: Tiers
    tier: Tier
    listing: MemoryList
    history: History
    fields: tuple[FieldInfo, ...] = field(default_factory=tuple)


def page(house: Managers, services: WebServices, name: str, *, q: str | None = None, archived: bool = False) -> Page:
    tier = tier_of(name)
    return Page(
        tiers=tiers(house),
        tier=tier,
        listing=list_tier(house, services, name, q=q, archived=archived),
        history=history(house, limit=20),
        fields=tier.fields,
    )
