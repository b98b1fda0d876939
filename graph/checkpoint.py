"""Checkpointer wiring: the checkpoints live where the memory lives. A Postgres database (`--db postgresql://…`) gets
PostgresSaver over a psycopg pool, pruned by its own `prune`; the SQLite default gets SqliteSaver in the data dir,
pruned here (SqliteSaver keeps every checkpoint forever and has no prune)."""

from __future__ import annotations

import sqlite3
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

    pool = ConnectionPool(conninfo, connection_class=Connection[DictRow], min_size=1, max_size=POOL_SIZE, open=False,
                          timeout=CONNECT_TIMEOUT_S,
                          kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row,
                                  "connect_timeout": CONNECT_TIMEOUT_S})
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
                "ORDER BY checkpoint_id DESC LIMIT 1", (thread_id,)).fetchone()
        return None if row is None else str(row[0])
    if is_postgres_saver(saver):
        with saver._cursor() as cur:  # type: ignore[attr-defined]  # PostgresSaver's own locked connection
            cur.execute("SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = '' "
                        "ORDER BY checkpoint_id DESC LIMIT 1", (thread_id,))
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
