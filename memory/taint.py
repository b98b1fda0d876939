"""Provenance that follows what it taints: a memory row written from untrusted text keeps the sources of that text
(`taints`, one row per tier + ref), and what it is later derived from or read with knows it.

Three session hooks, installed on the database's sessions beside the memory history (memory/history.py):
- **writes** (`after_flush`): while a unit is `tainted(...)` (the tick's command from a prompt that held untrusted
  text, nodes/steps/s12_execute_commands.py), every row of a memory tier it creates — and every row whose content
  it changes (a status, a pin, a priority or a read mark is no content) — is marked with the sources;
- **the owner's own words** (`after_flush`, a unit of the owner's: `actor="human"`): a tainted row whose content
  the owner rewrites is theirs now, its taint cleared;
- **derivation** (`after_flush`, any unit): an abstract or an episode summary made from tainted rows (their
  `sources` name them) inherits their sources, so a digest cannot launder what it digests;
- **reads** (`do_orm_execute`): while a unit `tracks_reads()`, the memory rows its ORM queries return are noted,
  so a command's result that shows a tainted row carries its sources into the prompt that shows the result.

The sources are plain JSON (`memory/provenance.py` Source: origin, ref, excerpt, and who wrote it); this layer
merges and stores them and never judges them. The owner clears a row's taint (managers/consent.py `trust`), and
owner-approved commands run untainted."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy import inspect as sa_inspect

from memory.models import Abstract, Episode

# part of this module's interface (the session key of the rows read, a tainted item's key)
from memory.repositories.taints import READS as READS
from memory.repositories.taints import TIERS, TaintRepo, merge, note_reads, row_key
from memory.repositories.taints import item_key as item_key

TAINT = "anima_taint"  # session.info: {"sources": [...], "thread_id": …, "tick": …} while a unit writes tainted

# changes that carry no words of anyone's: they leave a row's provenance as it was
NOT_CONTENT = frozenset(
    {
        "updated_at",
        "status",
        "archived_at",
        "completed_at",
        "priority",
        "pinned",
        "read",
        "hidden",
        "weight",
        "access_count",
        "last_accessed_at",
        "repl_mode",
        "repl_status",
        "repl_config",
        "repl_thread",
        "repl_error",
        "tick",
        "thread_id",
        "llm_id",
    }
)
DERIVED = (Abstract, Episode)  # rows that name what they were made from (`sources`)
HUMAN = "human"  # the unit's actor when the owner writes (`Database.unit(actor=…)`, as the memory history names it)


@contextmanager
def tainted(
    session: Any, sources: Sequence[Mapping[str, Any]], *, thread_id: str | None, tick: int | None
) -> Iterator[None]:
    """Every memory row written inside this block carries `sources` (none: nothing happens)."""
    if not sources:
        yield
        return
    session.info[TAINT] = {"sources": merge(sources), "thread_id": thread_id, "tick": tick}
    try:
        yield
        session.flush()  # what was written inside is marked now, not at a commit after the block
    finally:
        session.info.pop(TAINT, None)


@contextmanager
def tracking_reads(session: Any) -> Iterator[set[tuple[str, str]]]:
    """The (tier, ref) of every memory row the ORM queries inside this block return."""
    seen: set[tuple[str, str]] = set()
    session.info[READS] = seen
    try:
        yield seen
    finally:
        session.info.pop(READS, None)


def _written(session: Any) -> list[tuple[str, str]]:
    keys: list[tuple[str, str]] = []
    for obj in session.new:
        if type(obj) in TIERS and (key := row_key(obj)) is not None:
            keys.append(key)
    for obj in session.dirty:
        if type(obj) not in TIERS or not _content_changed(obj):
            continue
        if (key := row_key(obj)) is not None:
            keys.append(key)
    return keys


def _content_changed(obj: Any) -> bool:
    state = sa_inspect(obj)
    for attr in state.mapper.column_attrs:
        if attr.key in NOT_CONTENT:
            continue
        history = state.attrs[attr.key].history
        if history.added and (not history.deleted or history.added[0] != history.deleted[0]):
            return True
    return False


def _derived(session: Any) -> list[tuple[tuple[str, str], list[str]]]:
    """New digests and what they name as their sources."""
    found = []
    for obj in session.new:
        if isinstance(obj, DERIVED) and (key := row_key(obj)) is not None:
            found.append((key, [str(s) for s in (getattr(obj, "sources", None) or [])]))
    return found


def _source_keys(session: Any, names: list[str]) -> list[tuple[str, str]]:
    """A digest's sources (`message:12`, `diary:3`, `message:msg:9`, `day:2026-01-05`) as tainted-row keys."""
    keys: list[tuple[str, str]] = []
    days: list[str] = []
    for name in names:
        tier, _, ref = name.partition(":")
        if tier == "day":
            days.append(ref)
        elif (key := item_key(tier, ref)) is not None:
            keys.append(key)
    if days:
        keys += [("episode", str(i)) for i in TaintRepo(session).day_episodes(days)]
    return keys


def _after_flush(session: Any, _flush_context: Any) -> None:
    if not session.new and not session.dirty:
        return
    taint = session.info.get(TAINT)
    repo = TaintRepo(session)
    if taint is not None:
        keys = _written(session)
        if keys:
            repo.mark(keys, taint["sources"], thread_id=taint.get("thread_id"), tick=taint.get("tick"))
    elif session.info.get("actor") == HUMAN:  # the owner rewrote it (the web's memory pages): the words are theirs
        edited = [
            key
            for obj in session.dirty
            if type(obj) in TIERS and _content_changed(obj) and (key := row_key(obj)) is not None
        ]
        if edited:
            repo.clear_keys(edited, by="human (rewrote it)")
    for key, names in _derived(session):
        inherited = repo.of_keys(_source_keys(session, names)) if names else {}
        if inherited:
            repo.mark([key], merge(*inherited.values()), thread_id=None, tick=None)


INSTALLED = "_anima_taints"


def install(target: Any) -> None:
    """Install the hooks on every session `target` (a sessionmaker) makes (marked on the target, as history does)."""
    if getattr(target, INSTALLED, False):
        return
    event.listen(target, "after_flush", _after_flush)
    event.listen(target, "do_orm_execute", note_reads)
    setattr(target, INSTALLED, True)
