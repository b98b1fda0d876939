"""Checkpointer wiring: SqliteSaver for the CLI, with pruning (SqliteSaver keeps every checkpoint forever)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from langgraph.checkpoint.sqlite import SqliteSaver

DEFAULT_KEEP = 30  # per checkpoint thread: a loop writes ~2 a tick, a one-shot run one per step


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
        return saver.conn.execute("SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?", (thread_id,)).fetchone()[0]
