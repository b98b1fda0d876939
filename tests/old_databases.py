"""A persona's SQLite database made to look like one an older anima left behind, for the migration tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import text

from memory import Database


def as_version(data_dir: Path, version: int, *undo: str) -> None:
    """The database in `data_dir` at schema `version`: `undo` are the statements that take away what came later."""
    conn = sqlite3.connect(data_dir / "anima.sqlite")
    try:
        for statement in undo:
            conn.execute(statement)
        conn.execute("UPDATE schema_version SET version = ?", (version,))
        conn.commit()
    finally:
        conn.close()


def schema_version(db: Database) -> int:
    with db.session() as s:
        return int(s.execute(text("SELECT version FROM schema_version")).scalar_one())
