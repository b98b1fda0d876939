"""Copying a persona's memory into another database (spawn, persona/spawn.py): whole tables or chosen rows, in
foreign-key order, with the ids kept (so the retrieval catalogue, its journal and the vectors keyed by item id stay
valid), on SQLite and PostgreSQL alike; and a new PostgreSQL database beside an existing one."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import Integer, Table, create_engine, func, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from memory.models import Base, MemoryItem, MemoryJournal, Message, Note, Thread, table_of
from memory.repositories.config import inherited_by_child
from memory.repositories.lexical import backfill_lexical_index

NEVER_COPIED = ("schema_version", "live_events", "sealed_secrets", "peer_credentials")  # the target has its own
# version; the live journal is the run's; a persona's sealed keys are its own (a child makes its own), and so are the
# credentials it issued to its peers (a child's peers get theirs from the child)
BATCH = 1000


def tables(names: Iterable[str] | None = None) -> list[Table]:
    """The tables named (all but NEVER_COPIED when None), parents before children."""
    wanted = set(names) if names is not None else None
    return [
        t for t in Base.metadata.sorted_tables if t.name not in NEVER_COPIED and (wanted is None or t.name in wanted)
    ]


def copy_table(
    source: Session,
    target: Session,
    table: Table,
    where: Any = None,
    transform: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None,
) -> int:
    """Every row of `table` (matching `where`) from `source` into `target`, ids kept; `transform` may change a row
    or drop it (None). Returns the rows written."""
    query = select(table)
    if where is not None:
        query = query.where(where)
    order = [table.c.depth, table.c.id] if table.name == "threads" else list(table.primary_key.columns)
    written = 0
    batch: list[dict[str, Any]] = []
    for row in source.execute(query.order_by(*order)).mappings():
        values = dict(row)
        if transform is not None:
            changed = transform(values)
            if changed is None:
                continue
            values = changed
        batch.append(values)
        if len(batch) >= BATCH:
            target.execute(table.insert(), batch)
            written += len(batch)
            batch = []
    if batch:
        target.execute(table.insert(), batch)
        written += len(batch)
    return written


def reset_sequences(target: Session, copied: Iterable[Table]) -> None:
    """PostgreSQL: each serial id's sequence moved past the ids copied in (SQLite needs nothing)."""
    if target.get_bind().dialect.name != "postgresql":
        return
    for table in copied:
        keys = list(table.primary_key.columns)
        if len(keys) != 1 or keys[0].name != "id" or not isinstance(keys[0].type, Integer):
            continue
        target.execute(
            text(
                f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
                f"GREATEST((SELECT COALESCE(MAX(id), 0) FROM {table.name}), 1), "
                f"(SELECT COUNT(*) > 0 FROM {table.name}))"
            )
        )


def journal_items(target: Session) -> int:
    """A journal entry for every catalogue item (the items were copied without their journal): the index builds
    its vectors from it on first use."""
    ids = list(target.scalars(select(MemoryItem.id).order_by(MemoryItem.id)).all())
    for start in range(0, len(ids), BATCH):
        target.execute(
            table_of(MemoryJournal).insert(), [{"item_id": i, "op": "upsert"} for i in ids[start : start + BATCH]]
        )
    return len(ids)


def holds_memory(session: Session) -> bool:
    """Whether a database already has a persona's memory in it (a spawn never writes over one)."""
    return any(session.scalar(select(func.count()).select_from(model)) for model in (Thread, Message, Note))


def create_postgres_database(url: str, name: str) -> str:
    """A new, empty database `name` on the server of `url` (its user needs CREATEDB); the new database's URL."""
    parsed = make_url(url)
    engine = create_engine(
        parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False), isolation_level="AUTOCOMMIT"
    )
    try:
        with engine.connect() as conn:
            exists = conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name}).first()
            if exists:
                raise ValueError(f"the database {name!r} exists already on {parsed.host or 'localhost'}")
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        engine.dispose()
    return parsed.set(database=name).render_as_string(hide_password=False)


# what a "trained" child takes — HMP's table of descendants: "cognitive diaries, semantic graphs, known agents"
# (diary_entries; concepts and links; peers), with the distilled tiers (goals, tasks, llm_memory, insights) — not
# the episodes, conversation or notes
TRAINED_TABLES = (
    "goals",
    "goal_links",
    "tasks",
    "concepts",
    "links",
    "llm_memory",
    "insights",
    "diary_entries",
    "peers",
    "memory_items",
    "taints",
)
TRAINED_TIERS = ("concept", "llm_memory", "insight", "diary")
# the provenance of what it takes goes with it: a row written from untrusted text stays marked in the child
TRAINED_TAINTS = ("goal", "task", "concept", "link", "llm_memory", "insight", "diary")


def _config_row(mode: str) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    def keep(row: dict[str, Any]) -> dict[str, Any] | None:
        return row if inherited_by_child(row["key"], trained=mode == "trained") else None

    return keep


def _task_row(row: dict[str, Any]) -> dict[str, Any]:
    return {
        **row,
        "repl_mode": "none",
        "repl_status": None,
        "repl_thread": None,
        "repl_config": None,
        "repl_error": None,
    }


def _diary_row(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "thread_id": None}  # the parent's threads stay with the parent


def copy_memory(
    source: Session, target: Session, mode: str, progress: Callable[[str, int], None] | None = None
) -> dict[str, int]:
    """A spawn's memory: `clone` every table (ids kept, vectors stay valid), `trained` the goals, tasks, concepts
    and links, llm_memory, insights, the diary and the known peers, with their catalogue items (journalled anew,
    so the child's index embeds them) and their provenance (`taints`), `newborn` nothing. Returns rows written per
    table."""
    if mode == "newborn":
        return {}
    chosen = tables(None if mode == "clone" else TRAINED_TABLES + ("config",))
    counts: dict[str, int] = {}
    for table in chosen:
        where, transform = None, None
        if table.name == "config":
            transform = _config_row(mode)
        elif mode == "trained" and table.name == "memory_items":
            where = table.c.tier.in_(TRAINED_TIERS)
        elif mode == "trained" and table.name == "taints":
            where = table.c.tier.in_(TRAINED_TAINTS)
        elif mode == "trained" and table.name == "tasks":
            transform = _task_row
        elif mode == "trained" and table.name == "diary_entries":
            transform = _diary_row
        counts[table.name] = copy_table(source, target, table, where, transform)
        if progress is not None:
            progress(table.name, counts[table.name])
    reset_sequences(target, chosen)
    if counts.get("memory_items"):  # the catalogue came in as rows: its full-text documents are written here
        counts["memory_fts"] = backfill_lexical_index(target.connection())
    if mode == "trained":
        counts["memory_journal"] = journal_items(target)
        reset_sequences(target, tables(["memory_journal"]))
    return counts
