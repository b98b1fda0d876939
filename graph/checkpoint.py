"""Checkpointer wiring: the checkpoints live where the memory lives. A Postgres database (`--db postgresql://…`) gets
PostgresSaver over a psycopg pool, pruned by its own `prune`; the SQLite default gets SqliteSaver in the data dir,
pruned here (SqliteSaver keeps every checkpoint forever and has no prune)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

DEFAULT_KEEP = 30  # per checkpoint thread: a loop writes ~2 a tick, a one-shot run one per step
# PostgresSaver's keep_latest prune is ~8 statements plus one DELETE per channel whose blobs it frees (about 60 for
# a tick's state): run after every tick it was a third of a fleet worker's statements. Every this many runs of a
# thread instead, which keeps at most this many checkpoints of it between prunes (SQLite's prune is three
# statements and runs every time)
POSTGRES_PRUNE_EVERY = 10
POOL_SIZE = 4
CONNECT_TIMEOUT_S = 5


def open_postgres_saver(conninfo: str) -> BaseCheckpointSaver[Any]:
    """PostgresSaver on its own small pool (autocommit, dict rows, no prepared statements: what it requires)."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import DictRow, dict_row
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(
        conninfo,
        connection_class=Connection[DictRow],
        min_size=1,
        max_size=POOL_SIZE,
        open=False,
        timeout=CONNECT_TIMEOUT_S,
        kwargs={
            "autocommit": True,
            "prepare_threshold": 0,
            "row_factory": dict_row,
            "connect_timeout": CONNECT_TIMEOUT_S,
        },
    )
    pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
    saver = PostgresSaver(pool)
    saver.setup()
    return saver


def is_postgres_saver(saver: Any) -> bool:
    return type(saver).__name__ == "PostgresSaver"


def prune_due(saver: BaseCheckpointSaver[Any], runs_since: int, every: int = POSTGRES_PRUNE_EVERY) -> bool:
    """Whether a thread run `runs_since` times since its last prune is pruned now (see POSTGRES_PRUNE_EVERY)."""
    return runs_since >= every if is_postgres_saver(saver) else True


def prune(saver: BaseCheckpointSaver[Any], thread_id: str, keep: int = DEFAULT_KEEP) -> None:
    """Old checkpoints of a thread go: Postgres keeps the latest (its own prune), SQLite the newest `keep`."""
    if is_postgres_saver(saver):
        saver.prune([thread_id], strategy="keep_latest")
    elif isinstance(saver, SqliteSaver):
        prune_checkpoints(saver, thread_id, keep)


def latest_checkpoint_id(saver: BaseCheckpointSaver[Any], thread_id: str) -> str | None:
    """The id of the thread's newest top-level checkpoint (None: it has none), read without loading it: one small
    query (the savers order checkpoint ids by time, as their own `get_tuple` does). Raises NotImplementedError for a
    saver it does not know."""
    if isinstance(saver, SqliteSaver):
        with saver.lock:
            row = saver.conn.execute(
                "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' "
                "ORDER BY checkpoint_id DESC LIMIT 1",
                (thread_id,),
            ).fetchone()
        return None if row is None else str(row[0])
    if is_postgres_saver(saver):
        with saver._cursor() as cur:  # type: ignore[attr-defined]  # PostgresSaver's own locked connection
            cur.execute(
                "SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = '' "
                "ORDER BY checkpoint_id DESC LIMIT 1",
                (thread_id,),
            )
            found = cur.fetchone()
        return None if found is None else str(found["checkpoint_id"])
    if isinstance(saver, InMemorySaver):
        stored = saver.storage.get(thread_id, {}).get("", {})
        return max(stored) if stored else None
    raise NotImplementedError(type(saver).__name__)


def close_saver(saver: BaseCheckpointSaver[Any]) -> None:
    conn = getattr(saver, "conn", None)  # a sqlite3 connection, or PostgresSaver's pool
    if conn is not None:
        conn.close()


def open_sqlite_saver(path: str | Path) -> SqliteSaver:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    saver = SqliteSaver(conn)
    saver.setup()
    return saver


def prune_checkpoints(saver: SqliteSaver, thread_id: str, keep: int = DEFAULT_KEEP) -> int:
    """Delete all but the newest `keep` checkpoints of a thread (and their pending writes)."""
    with saver.lock, saver.conn:
        cur = saver.conn.execute(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' "
            "ORDER BY checkpoint_id DESC LIMIT 1 OFFSET ?",
            (thread_id, keep - 1),
        )
        row = cur.fetchone()
        if row is None:
            return 0
        oldest_kept = row[0]
        deleted = saver.conn.execute(
            "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id < ?", (thread_id, oldest_kept)
        ).rowcount
        saver.conn.execute("DELETE FROM writes WHERE thread_id = ? AND checkpoint_id < ?", (thread_id, oldest_kept))
        return deleted


def count_checkpoints(saver: SqliteSaver, thread_id: str) -> int:
    with saver.lock:
        row = saver.conn.execute("SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?", (thread_id,)).fetchone()
        count: int = row[0]
        return count


# ---- rewriting what the checkpoints hold (anonymisation: graph/forgetting.py) --------------------------------------


def deep_replace(change: Callable[[Any], Any], value: Any) -> Any:
    """`value` with every string inside it passed through `change`: dicts (their values), lists, tuples, a Send's
    argument; anything else is returned as it is (a tick's state is plain JSON: nodes/state.py)."""
    from langgraph.types import Send

    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {k: deep_replace(change, v) for k, v in value.items()}
    if isinstance(value, list):
        return [deep_replace(change, v) for v in value]
    if isinstance(value, tuple):
        items = [deep_replace(change, v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, Send):
        return Send(value.node, deep_replace(change, value.arg))
    return value


def _typed(
    saver: BaseCheckpointSaver[Any], change: Callable[[Any], Any], kind: str | None, blob: bytes | None
) -> tuple[str, bytes] | None:
    """A serialised value rewritten, or None when nothing in it changed (or it holds nothing)."""
    if blob is None or kind in (None, "empty"):
        return None
    value = saver.serde.loads_typed((kind, blob))
    new = deep_replace(change, value)
    if new == value:
        return None
    return saver.serde.dumps_typed(new)


def rewrite_checkpoints(saver: BaseCheckpointSaver[Any], change: Callable[[Any], Any], thread_prefix: str = "") -> int:
    """Every checkpoint (and pending write) of the threads under `thread_prefix` (a deployment's persona: "<name>/";
    "" every thread) with its text passed through `change`, in place: the threads resume where they were, their old
    states holding only the new text. How many rows changed. Raises NotImplementedError for a saver it does not
    know."""
    if isinstance(saver, SqliteSaver):
        return _rewrite_sqlite(saver, change, thread_prefix)
    if is_postgres_saver(saver):
        return _rewrite_postgres(saver, change, thread_prefix)
    if isinstance(saver, InMemorySaver):
        return _rewrite_memory(saver, change, thread_prefix)
    raise NotImplementedError(type(saver).__name__)


def _like(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _rewrite_sqlite(saver: SqliteSaver, change: Callable[[Any], Any], prefix: str) -> int:
    changed = 0
    with saver.lock, saver.conn:
        rows = saver.conn.execute(
            "SELECT rowid, type, checkpoint, metadata FROM checkpoints WHERE thread_id LIKE ? ESCAPE '\\'",
            (_like(prefix),),
        ).fetchall()
        for rowid, kind, blob, metadata in rows:
            checkpoint = _typed(saver, change, kind, blob)
            meta = json.loads(metadata) if metadata is not None else None
            new_meta = deep_replace(change, meta)
            if checkpoint is None and new_meta == meta:
                continue
            kind, blob = checkpoint or (kind, blob)
            saver.conn.execute(
                "UPDATE checkpoints SET type = ?, checkpoint = ?, metadata = ? WHERE rowid = ?",
                (kind, blob, json.dumps(new_meta, ensure_ascii=False) if meta is not None else None, rowid),
            )
            changed += 1
        for rowid, kind, blob in saver.conn.execute(
            "SELECT rowid, type, value FROM writes WHERE thread_id LIKE ? ESCAPE '\\'", (_like(prefix),)
        ).fetchall():
            written = _typed(saver, change, kind, blob)
            if written is not None:
                saver.conn.execute("UPDATE writes SET type = ?, value = ? WHERE rowid = ?", (*written, rowid))
                changed += 1
    return changed


def _rewrite_postgres(saver: Any, change: Callable[[Any], Any], prefix: str) -> int:
    from psycopg.types.json import Jsonb

    changed = 0
    like = _like(prefix)
    with saver._cursor() as cur:  # PostgresSaver's own locked connection (autocommit: each UPDATE stands alone)
        cur.execute(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, checkpoint, metadata FROM checkpoints "
            "WHERE thread_id LIKE %s",
            (like,),
        )
        for row in cur.fetchall():
            checkpoint, metadata = deep_replace(change, row["checkpoint"]), deep_replace(change, row["metadata"])
            if checkpoint != row["checkpoint"] or metadata != row["metadata"]:
                cur.execute(
                    "UPDATE checkpoints SET checkpoint = %s, metadata = %s WHERE thread_id = %s AND "
                    "checkpoint_ns = %s AND checkpoint_id = %s",
                    (Jsonb(checkpoint), Jsonb(metadata), row["thread_id"], row["checkpoint_ns"], row["checkpoint_id"]),
                )
                changed += 1
        cur.execute(
            "SELECT thread_id, checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs "
            "WHERE thread_id LIKE %s",
            (like,),
        )
        for row in cur.fetchall():
            written = _typed(saver, change, row["type"], row["blob"])
            if written is not None:
                cur.execute(
                    "UPDATE checkpoint_blobs SET type = %s, blob = %s WHERE thread_id = %s AND "
                    "checkpoint_ns = %s AND channel = %s AND version = %s",
                    (*written, row["thread_id"], row["checkpoint_ns"], row["channel"], row["version"]),
                )
                changed += 1
        cur.execute(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, type, blob FROM checkpoint_writes "
            "WHERE thread_id LIKE %s",
            (like,),
        )
        for row in cur.fetchall():
            written = _typed(saver, change, row["type"], row["blob"])
            if written is not None:
                cur.execute(
                    "UPDATE checkpoint_writes SET type = %s, blob = %s WHERE thread_id = %s AND "
                    "checkpoint_ns = %s AND checkpoint_id = %s AND task_id = %s AND idx = %s",
                    (
                        *written,
                        row["thread_id"],
                        row["checkpoint_ns"],
                        row["checkpoint_id"],
                        row["task_id"],
                        row["idx"],
                    ),
                )
                changed += 1
    return changed


def _rewrite_memory(saver: InMemorySaver, change: Callable[[Any], Any], prefix: str) -> int:
    changed = 0
    for thread_id, spaces in saver.storage.items():
        if not thread_id.startswith(prefix):
            continue
        for stored in spaces.values():
            for checkpoint_id, (checkpoint, metadata, parent) in list(stored.items()):
                new_checkpoint = _typed(saver, change, *checkpoint) or checkpoint
                new_metadata = _typed(saver, change, *metadata) or metadata
                if (new_checkpoint, new_metadata) != (checkpoint, metadata):
                    stored[checkpoint_id] = (new_checkpoint, new_metadata, parent)
                    changed += 1
    for key, value in list(saver.blobs.items()):
        if key[0].startswith(prefix):
            written = _typed(saver, change, *value)
            if written is not None:
                saver.blobs[key] = written
                changed += 1
    for place, writes in saver.writes.items():
        if place[0].startswith(prefix):
            for inner, (task_id, channel, value, path) in list(writes.items()):
                written = _typed(saver, change, *value)
                if written is not None:
                    writes[inner] = (task_id, channel, written, path)
                    changed += 1
    return changed


def compact_saver(saver: BaseCheckpointSaver[Any]) -> None:
    """SQLite: the freed pages and the write-ahead log rewritten away (VACUUM, then the WAL truncated), so what was
    replaced is in no byte of the file; other savers keep nothing a file would show (PostgreSQL reuses the space of
    dead rows: VACUUM FULL is the operator's, at rest)."""
    if isinstance(saver, SqliteSaver):
        with saver.lock:
            saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            saver.conn.execute("VACUUM")
            saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
