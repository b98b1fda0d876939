"""The history of every memory change, recorded in one place: a flush listener on the database's sessions.

After each flush it looks at what the flush wrote of the memory tiers (core memory and notepad, llm_memory, diary,
concepts, links, goals, tasks, episodes, entities, dream insights, unverified facts, the knowledge base, open
questions) and adds one `memory_history` row per changed row, in the same transaction: `create` with the row
after, `update` with the changed columns before and after, `archive`/`restore` when its archived state flips
(a status, an `archived_at`, or — for the tiers archived through their retrieval item — the item's status), and
`delete` with the row before. The actor is the unit's (`Database.unit(actor=…)`: "human" for the web, "persona"
by default).

Cheap on the tick's path: a flush that touched none of these tables costs one pass over its rows; values are
bounded (long texts cut, long lists shortened) and `updated_at`-only changes are not history."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy import event
from sqlalchemy import inspect as sa_inspect

from memory.models import (
    Concept,
    ConceptLink,
    DiaryEntry,
    Entity,
    Episode,
    Goal,
    Insight,
    KBDocument,
    LLMMemory,
    MemoryBlock,
    MemoryItem,
    OpenQuestion,
    Task,
    UnverifiedFact,
)
from memory.repositories.history import HistoryRepo

DEFAULT_ACTOR = "persona"
MAX_TEXT = 4000  # characters of one value kept in a change
MAX_ITEMS = 50  # entries of one list or dict kept
NOT_HISTORY = frozenset({"updated_at"})  # bumped by every write: never a change of its own
ITEM_ARCHIVED_TIERS = frozenset({"episode", "entity", "insight", "kb"})  # archived through their catalogue item
ARCHIVED_STATUSES = frozenset({"archived", "concept_archived"})
SEEN = "memory_history_items_seen"  # session.info: the item-archived rows already recorded in this transaction


@dataclass(frozen=True)
class Tracked:
    tier: str | None  # None: the row's `name` is its tier (core, notepad)
    ref: str = "id"
    archived_by: str | None = None  # the column that says whether the row is archived
    archived: Callable[[Any], bool] = lambda value: value in ARCHIVED_STATUSES

    def tier_of(self, values: dict[str, Any]) -> str:
        return self.tier or str(values.get("name"))


def _set(value: Any) -> bool:
    return value is not None


TRACKED: dict[type, Tracked] = {
    MemoryBlock: Tracked(None, ref="name"),
    LLMMemory: Tracked("llm_memory", archived_by="status"),
    DiaryEntry: Tracked("diary", archived_by="status"),
    Concept: Tracked("concept", archived_by="status"),
    ConceptLink: Tracked("link", archived_by="status"),
    Goal: Tracked("goal", archived_by="archived_at", archived=_set),
    Task: Tracked("task", archived_by="archived_at", archived=_set),
    Episode: Tracked("episode"),
    Entity: Tracked("entity"),
    Insight: Tracked("insight"),
    UnverifiedFact: Tracked("fact"),
    KBDocument: Tracked("kb"),
    OpenQuestion: Tracked("question"),
}

_columns: dict[type, tuple[str, ...]] = {}


def columns(model: type[Any]) -> tuple[str, ...]:
    if model not in _columns:
        _columns[model] = tuple(attr.key for attr in sa_inspect(model).column_attrs)
    return _columns[model]


def bounded(value: Any) -> Any:
    """A JSON-safe, size-bounded copy of a column value."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return value if len(value) <= MAX_TEXT else value[:MAX_TEXT] + "…"
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (list, tuple, set)):
        return [bounded(v) for v in list(value)[:MAX_ITEMS]]
    if isinstance(value, dict):
        return {str(k): bounded(v) for k, v in list(value.items())[:MAX_ITEMS]}
    return bounded(str(value))


def _snapshot(obj: Any) -> dict[str, Any]:
    """The row's loaded column values (never loading one: a deleted row cannot be read back)."""
    loaded = sa_inspect(obj).dict
    return {key: bounded(loaded[key]) for key in columns(type(obj)) if key in loaded and key not in NOT_HISTORY}


def _diff(obj: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The changed columns' values before and after (unloaded previous values are None)."""
    state = sa_inspect(obj)
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    for key in columns(type(obj)):
        if key in NOT_HISTORY:
            continue
        history = state.attrs[key].history
        if not history.added and not history.deleted:
            continue
        old = history.deleted[0] if history.deleted else None
        new = history.added[0] if history.added else None
        if old == new:
            continue
        before[key], after[key] = bounded(old), bounded(new)
    return before, after


def _change(
    tier: str, ref: Any, action: str, actor: str, before: dict[str, Any] | None, after: dict[str, Any] | None
) -> dict[str, Any]:
    return {
        "tier": tier[:32],
        "ref": str(ref)[:128],
        "action": action,
        "actor": actor[:64],
        "before": before,
        "after": after,
    }


def _item_change(item: MemoryItem, actor: str) -> dict[str, Any] | None:
    """A tier archived through its catalogue item: the item's status flipping is the row's archive or restore."""
    if item.tier not in ITEM_ARCHIVED_TIERS:
        return None
    history = sa_inspect(item).attrs["status"].history
    old = history.deleted[0] if history.deleted else None
    new = history.added[0] if history.added else None
    if {old, new} != {"active", "archived"}:
        return None
    ref = item.ref.split(":", 1)[0] if item.tier == "kb" else item.ref  # a kb chunk stands for its document
    return _change(
        item.tier, ref, "archive" if new == "archived" else "restore", actor, {"status": old}, {"status": new}
    )


def changes_of(session: Any) -> list[dict[str, Any]]:
    """What the flush about to finish changed of the memory tiers, as `memory_history` rows."""
    actor = str(session.info.get("actor") or DEFAULT_ACTOR)
    found: list[dict[str, Any]] = []
    seen = session.info.setdefault(SEEN, set())  # a kb document archives chunk by chunk (and
    # flush by flush): one change for the document per transaction
    for obj in session.new:
        spec = TRACKED.get(type(obj))
        if spec is not None:
            after = _snapshot(obj)
            found.append(_change(spec.tier_of(after), after.get(spec.ref), "create", actor, None, after))
    for obj in session.dirty:
        model = type(obj)
        if model is MemoryItem:
            change = _item_change(obj, actor)
            key = change and (change["tier"], change["ref"], change["action"])
            if change is not None and key not in seen:
                seen.add(key)
                found.append(change)
            continue
        spec = TRACKED.get(model)
        if spec is None:
            continue
        before, after = _diff(obj)
        if not after:
            continue
        action = "update"
        if spec.archived_by in after:
            was, now = spec.archived(before[spec.archived_by]), spec.archived(after[spec.archived_by])
            action = "archive" if now and not was else "restore" if was and not now else "update"
        values = sa_inspect(obj).dict
        found.append(_change(spec.tier_of(values), values.get(spec.ref), action, actor, before, after))
    for obj in session.deleted:
        spec = TRACKED.get(type(obj))
        if spec is not None:
            before = _snapshot(obj)
            found.append(_change(spec.tier_of(before), before.get(spec.ref), "delete", actor, before, None))
    return found


def _after_flush(session: Any, _flush_context: Any) -> None:
    if not (session.new or session.dirty or session.deleted):
        return
    found = changes_of(session)
    if found:
        HistoryRepo(session).record(found)


def _transaction_end(session: Any, transaction: Any) -> None:
    if transaction.parent is None:  # the unit's own transaction (each flush runs in a sub-transaction of it)
        session.info.pop(SEEN, None)


INSTALLED = "_anima_memory_history"


def install(target: Any) -> None:
    """Record the memory history of every session `target` (a sessionmaker, a Session class) makes.

    Marked on the target itself: `event.contains` looks listeners up by the target's id(), and a new sessionmaker
    may get the id of a collected one whose registry entry lingers — it then said "installed" and nothing was."""
    if getattr(target, INSTALLED, False):
        return
    event.listen(target, "after_flush", _after_flush)
    event.listen(target, "after_transaction_end", _transaction_end)
    setattr(target, INSTALLED, True)
