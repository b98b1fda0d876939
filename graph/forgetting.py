"""What anonymisation finishes once its unit of work has committed. managers/anonymise.py rewrites, in one
transaction, every row of the database that keeps text (the tiers and their history, notes, thoughts, ticks, the
catalogue and its full-text index, process rows, approvals, taints, live events, kept exports); the rest lives
outside that transaction and is finished here:

- the loop's LangGraph checkpoints (SqliteSaver in the data dir, or PostgresSaver beside a PostgreSQL memory; a
  deployment's persona only its own threads, `<name>/…`): every checkpoint and pending write rewritten in place
  (graph/checkpoint.py `rewrite_checkpoints`), so a thread resumes where it was and no old state holds a name;
- Chroma: the rewritten memories embedded again and their records replaced (the catalogue's journal, synced now);
  Chroma keeps vectors and metadata, never the text;
- the knowledge base's kept copies of text documents (under the data dir), rewritten as their chunks were (a PDF
  cannot be, and stays as it came);
- the SQLite files (memory and checkpoints): rebuilt (VACUUM) with their write-ahead logs truncated, so the replaced
  text is in no free page or log frame. On PostgreSQL the old row versions are dead and their space reused
  (autovacuum); erasing them at rest is the operator's `VACUUM FULL`.

The doors call `finish`: the CLI after its unit, the loop after the tick that ran an approved `memory.anonymise`
(graph/agent.py), and the people's delete (a person forgotten: managers/people.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from graph.checkpoint import close_saver, compact_saver, open_postgres_saver, open_sqlite_saver, rewrite_checkpoints
from memory import Database

log = logging.getLogger(__name__)


@dataclass
class Finished:
    checkpoints: int = 0  # checkpoint rows rewritten
    vectors: int = 0  # memories embedded again
    files: int = 0  # the knowledge base's kept text documents rewritten


def open_saver(db: Database, data_dir: str | Path) -> BaseCheckpointSaver[Any] | None:
    """The saver a loop over this memory uses (graph/agent.py `build_agent`), None when it has none yet."""
    if db.is_postgres:
        return open_postgres_saver(db.libpq_url())
    from graph.services import checkpoint_path

    path = checkpoint_path(data_dir)
    return open_sqlite_saver(path) if path.exists() else None


def finish(
    change: Callable[[Any], Any],
    *,
    db: Database,
    memory: Any = None,
    saver: BaseCheckpointSaver[Any] | None = None,
    thread_prefix: str = "",
    data_dir: str | Path | None = None,
) -> Finished:
    """The stores beyond the unit of work (module doc), in order: the kept documents, checkpoints, vectors, then the
    files compacted."""
    from managers.anonymise import AnonymisationManager

    done = Finished()
    if data_dir is not None:
        done.files = AnonymisationManager.rewrite_kept_documents(change, data_dir)
    if saver is not None:
        done.checkpoints = rewrite_checkpoints(saver, change, thread_prefix)
    if memory is not None:
        done.vectors = int(memory.sync(flush=True) or 0)
    if saver is not None:
        compact_saver(saver)
    db.compact()
    log.info(
        "anonymisation finished: %d checkpoint rows rewritten, %d memories embedded again",
        done.checkpoints,
        done.vectors,
    )
    return done


def finish_at(change: Callable[[Any], Any], *, db: Database, data_dir: str | Path, memory: Any = None) -> Finished:
    """`finish` for a door that holds no saver (the CLI, the web): the persona's own, opened and closed here."""
    saver = open_saver(db, data_dir)
    try:
        return finish(change, db=db, memory=memory, saver=saver, data_dir=data_dir)
    finally:
        if saver is not None:
            close_saver(saver)


__all__ = ["Finished", "finish", "finish_at", "open_saver"]
