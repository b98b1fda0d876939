"""A canary name planted in every store a persona keeps text in, through real ticks (the loop with its live journal
and its session), and the search for it in each store afterwards: anonymisation's proof (tests/unit/
test_anonymise_everywhere.py on SQLite, tests/integration/test_postgres.py on PostgreSQL)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import inspect, text

from managers import ManagerDeps, Managers
from managers.sessions import trace_jsonl

CANARY = "Zorblax Quenn"
WORDS = ("zorblax", "quenn")  # lower-cased, as the full-text index keeps its terms


def _block(*commands: tuple[str, dict]) -> str:
    items = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return "\n# Commands:\n" + json.dumps(items) + "\n# End commands"


THOUGHTS = [
    f"My neighbour {CANARY} brought figs; I keep that."
    + _block(
        ("diary.add", {"text": f"Figs from {CANARY} today."}),
        ("llm_memory.add", {"text": f"{CANARY} likes the harbour at dawn", "title": "neighbours"}),
        ("search.web", {"query": f"{CANARY} figs"}),  # external: it waits for the owner, its arguments kept
        ("memory.search", {"query": "figs"}),
    ),  # its result is a process row holding what it found
    f"Thinking of {CANARY}'s figs and the knowledge base's note on them."
    + _block(("goals.add", {"title": f"Thank {CANARY} for the figs"})),
    "A quiet thought about the tide.",
]


def plant(agent: Any, tmp_path: Path) -> None:
    """The human's note and a knowledge-base document naming the canary, then three ticks of the loop with its live
    journal (the session kept, the events written) whose thoughts and commands name it everywhere."""
    from graph.loop.driver import Stopper, run_loop
    from graph.loop.journal import LiveJournal
    from managers import ManagerDeps, Managers

    deps = ManagerDeps(settings=agent.services.settings, clock=agent.services.clock)
    with agent.services.db.unit(actor="human") as repos:
        repos.notes.add(f"{CANARY} from next door grows figs by the harbour.", source="user")
        Managers(repos, deps).memory.upload_kb(
            "figs.md", f"# Figs\n\n{CANARY} grows figs by the harbour wall; the figs ripen in August.\n".encode()
        )
    agent.services.memory.sync(flush=True)
    journal = LiveJournal(agent.services.db, agent.thread_id, flush_every_s=0.01)
    try:
        run_loop(agent, ticks=3, stopper=Stopper(), idle_poll_s=0, on_stream=journal, note_poll_s=0)
    finally:
        journal.close()
    agent.services.memory.sync(flush=True)


def tables_holding(db: Any, words: tuple[str, ...] = WORDS) -> dict[str, int]:
    """table -> rows in which any text or JSON column holds one of `words` (case-insensitive), over every table of the
    database (the full-text index's included), read by SQL as any tool would."""
    found: dict[str, int] = {}
    inspector = inspect(db.engine)
    with db.engine.connect() as conn:
        for table in inspector.get_table_names(schema=db.schema):
            if table.startswith("memory_fts_"):  # FTS5's shadow tables: searched through the index below
                continue
            columns = [c["name"] for c in inspector.get_columns(table, schema=db.schema)]
            cast = "CAST({} AS TEXT)" if db.is_postgres else "CAST({} AS TEXT)"
            where = " OR ".join(f"lower({cast.format(_q(c))}) LIKE :w{i}" for c in columns for i in range(len(words)))
            if not where:
                continue
            count = conn.execute(
                text(f"SELECT count(*) FROM {_q(table)} WHERE {where}"),
                {f"w{i}": f"%{w}%" for i, w in enumerate(words)},
            ).scalar()
            if count:
                found[table] = int(count)
    return found


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def full_text_hits(db: Any, words: tuple[str, ...] = WORDS) -> int:
    """Documents the full-text index finds for the words, by its own engine (FTS5 MATCH, or tsvector @@)."""
    with db.engine.connect() as conn:
        if db.is_postgres:
            return int(
                conn.execute(
                    text("SELECT count(*) FROM memory_fts WHERE document @@ to_tsquery('simple', :q)"),
                    {"q": " | ".join(words)},
                ).scalar()
                or 0
            )
        terms = conn.execute(
            text(
                "SELECT count(*) FROM memory_fts_terms WHERE "
                + " OR ".join(f"term LIKE :w{i}" for i in range(len(words)))
            ),
            {f"w{i}": f"{w}%" for i, w in enumerate(words)},
        ).scalar()
        matched = conn.execute(
            text("SELECT count(*) FROM memory_fts WHERE memory_fts MATCH :q"), {"q": " OR ".join(words)}
        ).scalar()
        return int(terms or 0) + int(matched or 0)


# hnswlib (Chroma's vector index) writes each vector's unused neighbour slots from uninitialised heap memory, so
# `data_level0.bin` can hold stray bytes of any text the process once held, record or not; Chroma's records are
# searched through Chroma itself (`_chroma`), and docs/memory.md says what this leaves on disk.
HNSW_SEGMENT_FILES = ("data_level0.bin", "link_lists.bin")


def files_holding(folder: Path, words: tuple[str, ...] = WORDS) -> list[str]:
    """Files under `folder` whose bytes hold one of the words (any case): what a grep of the disk finds (beside
    Chroma's HNSW segment files, which are searched as records)."""
    found = []
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name not in HNSW_SEGMENT_FILES:
            data = path.read_bytes().lower()
            if any(w.encode() in data for w in words):
                found.append(str(path.relative_to(folder)))
    return found


def checkpoint_blob_hits(db: Any, words: tuple[str, ...] = WORDS) -> int:
    """PostgreSQL: the checkpoint rows whose serialised blobs hold one of the words (bytea, read as bytes; the
    JSONB columns are searched by `tables_holding`); 0 on SQLite (its checkpoints are a file: `files_holding`)."""
    if not db.is_postgres:
        return 0
    hits = 0
    with db.engine.connect() as conn:
        for table in ("checkpoint_blobs", "checkpoint_writes"):
            for (blob,) in conn.execute(text(f"SELECT blob FROM {table} WHERE blob IS NOT NULL")):
                data = bytes(blob).lower()
                hits += any(w.encode() in data for w in words)
    return hits


# where the planting put the canary (what the ticks, the journal and the session write), checked before anonymising so
# the search afterwards cannot pass by finding nothing to find
PLANTED = {
    "notes",
    "messages",
    "memory_items",
    "memory_fts",
    "process_log",
    "approvals",
    "taints",
    "live_events",
    "sessions",
    "diary_entries",
    "goals",
    "memory_history",
    "executed_commands",
    "audit_log",
}


def _export(agent: Any) -> str:
    deps = ManagerDeps(settings=agent.services.settings, clock=agent.services.clock)
    with agent.services.db.unit() as repos:
        house = Managers(repos, deps)
        [session] = [s for s in house.sessions.listing() if s.thread_id == agent.thread_id]
        data, markdown = house.sessions.export(session.id)
    return json.dumps(data, ensure_ascii=False, default=str) + markdown + trace_jsonl(data)


def _chroma(agent: Any) -> tuple[list[Any], int, int]:
    """Chroma's stored documents, its position in the catalogue's journal, and the journal's head, read by a client
    of its own (as another process would)."""
    import chromadb

    store = agent.services.memory.store
    client = chromadb.PersistentClient(path=str(store.path), settings=chromadb.Settings(anonymized_telemetry=False))
    collection = client.get_collection(store.collection_name())
    got = collection.get(include=["documents", "metadatas"])
    with agent.services.db.unit() as repos:
        head = repos.items.journal_head()
    return [d for d in (got["documents"] or []) if d], int((collection.metadata or {}).get("journal", 0)), head


def planted(agent: Any, tmp_path: Path) -> None:
    """`plant`, then the proof that the canary is where the search afterwards will look."""
    plant(agent, tmp_path)
    before = tables_holding(agent.services.db)
    assert PLANTED <= set(before), sorted(PLANTED - set(before))
    assert full_text_hits(agent.services.db) > 0
    if agent.services.db.is_postgres:
        assert checkpoint_blob_hits(agent.services.db) > 0
    else:
        assert {"anima.sqlite", "checkpoints.sqlite"} <= {f.removesuffix("-wal") for f in files_holding(tmp_path)}
    assert any(f.startswith("knowledge/") for f in files_holding(tmp_path))
    assert CANARY in _export(agent)


def nowhere(agent: Any, tmp_path: Path) -> None:
    """The canary in no store: every table, the full-text index, every file of the data dir, the checkpoints,
    Chroma's records and a session export (which shows the placeholder instead)."""
    assert tables_holding(agent.services.db) == {}  # every table, by SQL
    assert full_text_hits(agent.services.db) == 0  # the full-text index, by its own engine
    holding = files_holding(tmp_path)
    assert holding == [], holding  # every byte of the data dir: SQLite and its WAL, checkpoints, Chroma, KB
    assert checkpoint_blob_hits(agent.services.db) == 0  # PostgreSQL's checkpoint blobs (bytea: read as bytes)
    documents, position, head = _chroma(agent)
    assert documents == [] and position == head  # Chroma keeps no text, and has every rewritten memory's new vector
    exported = _export(agent)
    assert not any(w in exported.lower() for w in WORDS) and "[NAME_" in exported


__all__ = [
    "CANARY",
    "PLANTED",
    "THOUGHTS",
    "WORDS",
    "checkpoint_blob_hits",
    "files_holding",
    "full_text_hits",
    "nowhere",
    "plant",
    "planted",
    "tables_holding",
]
