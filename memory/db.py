"""Opening the database: SQLite (WAL) under the data dir by default, PostgreSQL by URL.

Schema versioning: `schema_version` holds one row with the version the tables were built for.
A new database is created at `SCHEMA_VERSION`. An older one is upgraded by the ordered steps in
`MIGRATIONS` (version -> function taking a Connection), each in its own transaction; a database
newer than this code is refused with a clear error instead of being written to.

Units of work (`Database.unit()`): one transaction each, committed on success, rolled back on error. A run of the
graph (`graph/agent.py`, one tick) opens `Database.shared_session()`: its units take a few kept sessions, each on a
connection of its own, in turn, instead of a session and a pooled connection each (a tick runs about twenty units; a
new session and a checkout cost each about what a small query does). Sharing changes no unit's transaction, which is
what the crash-safety rule ("a killed process or worker resumes without losing a note or running a command twice")
rests on:
- a unit that wrote commits when it ends, as before; one that only read commits nothing (on SQLite, the default, a
  read opens no transaction: the driver begins one before the first write only), so between two units a kept
  session holds no lock and no open write — a process killed between them loses nothing a unit had finished;
- a unit that raises rolls back, as before, and only its own writes: every earlier unit that wrote has committed;
- a unit opened inside another (the model-call recorder inside a unit that asks a model, the memory index's sync
  inside the prompt's unit) gets another of the kept sessions, a session of its own as before: sharing the outer's
  would commit the outer's writes with the inner's;
- what a kept session loaded is detached when each unit ends, as a closed session's was, so a unit never sees
  another's objects (nor a row an earlier unit read, changed since by the web or another process, from its cache);
- the crash-safety points therefore stay where they were: the tick row's start (`s01`, its attempts count), the
  model's answer kept with the tick before it is acted on (`s05`), each command with its `executed_commands` row
  (`s12`), the memory's rows before Chroma follows them (the index syncs in units of its own, after the write
  committed), the tick's close. Pinned by tests/unit/test_resume_late_note.py (a kill after the answer is kept),
  test_hardening.py (a tick that keeps killing the process is quarantined; a failed step is never replayed),
  test_consent.py (an approval is not run twice when the run dies before its commit), test_memory.py (a crash
  before the Chroma write), test_hmp_rows_33.py (a task cycle cut by a crash), test_llm_failures.py (a stop during
  the model call), tests/integration/test_kill_after_answer.py (a real kill -9); test_storage.py pins the sharing.
A kept session serves one unit at a time (another thread's unit takes another, or a new one).

On PostgreSQL (a tick, and a fleet worker's whole job: `kept_sessions()`, graph/fleet/runtime.py) a read runs in
a transaction too (psycopg begins one before the first statement of any kind), so a kept session there commits at
the end of every unit, one that only read included — exactly what a session of its own did (`session.commit()`,
then `close()`): the same BEGIN and COMMIT around the same statements, and between two units its connection is
idle, outside any transaction, holding no snapshot and no lock. A unit that ran no statement sends neither.
`reading()` takes a kept session of its own kind, on a connection in autocommit (each statement its own
transaction, as its new session's was). A unit that raises rolls back and its kept session is dropped, connection
and all (a connection the server dropped is not handed to the next unit). What sharing saves there is SQLAlchemy's
and the pool's bookkeeping, not a round trip: a session made and closed, a connection checked out, reset and
checked in, some thirty times a job. Pinned by tests/integration/test_fleet.py
(`test_units_in_a_shared_session_on_postgres_keep_their_own_transactions`) and its kill -9 takeover.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, DateTime, Engine, create_engine, event, inspect, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import ArgumentError, DBAPIError, DisconnectionError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry

from memory.clock import utcnow
from memory.history import install as record_history
from memory.models import (
    MESH_TABLES,
    A2AInbound,
    A2AOutbox,
    A2ARefusal,
    AgentRecord,
    AgentScript,
    AgentTable,
    AgentTableRow,
    AntiStagnationMetric,
    Approval,
    AuditEntry,
    Base,
    ChannelCursor,
    ChannelInbox,
    ChannelOutbox,
    ConfigEntry,
    ContactRequest,
    Feed,
    FeedItem,
    LiveEvent,
    MemoryBlockVersion,
    MemoryChange,
    MemoryItem,
    MemoryVector,
    Note,
    OpenQuestion,
    Peer,
    PeerCredential,
    PeopleGroup,
    PeopleGroupMember,
    Person,
    PersonIdentity,
    ProcessRun,
    SchemaVersion,
    SealedSecret,
    StagnationStrategy,
    Taint,
    ThinkingMethod,
    ToolUse,
    table_of,
)
from memory.models import (
    Session as SessionRow,
)
from memory.repositories import Repos
from memory.repositories.config import MESH_DISCOVERED_KEY, TICK_SNAPSHOT, ConfigSnapshot
from memory.repositories.lexical import backfill_lexical_index, create_lexical_index
from memory.repositories.peers import MET, met_name
from memory.taint import READS as TAINT_READS
from memory.taint import TAINT
from memory.taint import install as record_taints

log = logging.getLogger(__name__)
REACH_TABLES = (
    Feed,
    FeedItem,
    AgentScript,
    ProcessRun,
    StagnationStrategy,
    ThinkingMethod,
    AgentTable,
    AgentTableRow,
    AgentRecord,
)

SCHEMA_VERSION = 29


# version N -> the step that upgrades a version N-1 database to N. Steps use SQLAlchemy DDL only
# (e.g. `Table.create(conn)`, `conn.execute(text("ALTER TABLE … ADD COLUMN …"))` with portable
# types), so they run on SQLite and PostgreSQL alike.
def _v2_stelis_columns(conn: Connection) -> None:
    for column in ("origin VARCHAR(20) DEFAULT 'root'", "owner VARCHAR(200)", "error TEXT"):
        conn.execute(text(f"ALTER TABLE threads ADD COLUMN {column}"))
    conn.execute(text("UPDATE threads SET origin = 'playbook' WHERE parent_id IS NOT NULL"))


def _v3_memory_tiers(conn: Connection) -> None:
    Base.metadata.create_all(conn)  # v3 only adds tables (memory catalogue, journal and the tiers)


def _v4_llm_memory_status(conn: Connection) -> None:
    conn.execute(text("ALTER TABLE unverified_facts ADD COLUMN resolution TEXT"))
    conn.execute(text("ALTER TABLE llm_memory ADD COLUMN status VARCHAR(16) DEFAULT 'active'"))
    conn.execute(text("UPDATE llm_memory SET status = 'active'"))
    # the entries join the retrieval catalogue, in this migration's transaction (and so its full-text index)
    create_lexical_index(conn)
    Repos(Session(bind=conn)).llm_memory.index_all()


def _v5_anti_stagnation_metrics(conn: Connection) -> None:
    table_of(AntiStagnationMetric).create(conn, checkfirst=True)  # v3 created every table then known


def _add_missing_columns(conn: Connection, table: str, columns: list[str]) -> None:
    """`ALTER TABLE … ADD COLUMN` for each "name TYPE …" the table lacks: v3 created every table as the models
    stood then, so a later column may be there already."""
    have = {c["name"] for c in inspect(conn).get_columns(table)}
    for column in columns:
        if column.split()[0] not in have:
            conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column}"))


def _v6_persona_autonomy(conn: Connection) -> None:
    _add_missing_columns(
        conn,
        "tasks",
        [
            "repl_mode VARCHAR(16) DEFAULT 'none'",
            "repl_status VARCHAR(16)",
            "repl_config JSON",
            "repl_thread VARCHAR(128)",
            "repl_error TEXT",
        ],
    )
    conn.execute(text("UPDATE tasks SET repl_mode = 'none'"))
    table_of(OpenQuestion).create(conn, checkfirst=True)
    table_of(SessionRow).create(conn, checkfirst=True)


def _v7_consent_and_archive(conn: Connection) -> None:
    table_of(Approval).create(conn, checkfirst=True)
    table_of(AuditEntry).create(conn, checkfirst=True)
    table_of(MemoryBlockVersion).create(conn, checkfirst=True)
    for index in table_of(Note).indexes:  # the human's latest note was a full scan (26 ms at 100k notes)
        index.create(conn, checkfirst=True)
    moment = DateTime(timezone=True).compile(dialect=conn.dialect)  # TIMESTAMP WITH TIME ZONE / DATETIME
    for table in ("goals", "tasks"):
        _add_missing_columns(conn, table, [f"archived_at {moment}"])


def _v8_live_events_and_history(conn: Connection) -> None:
    table_of(LiveEvent).create(conn, checkfirst=True)
    table_of(MemoryChange).create(conn, checkfirst=True)


def _v9_reach(conn: Connection) -> None:
    for table in REACH_TABLES:  # feeds, scripts and their runs, loop-breaking strategies, thinking methods
        table_of(table).create(conn, checkfirst=True)


def _v10_full_text_index(conn: Connection) -> None:
    """The lexical index moves from an in-process BM25 rebuilt at every start into the database's full-text engine
    (FTS5 / tsvector + GIN): create it and index every memory (progress in the log)."""
    create_lexical_index(conn)
    backfill_lexical_index(conn)


def _v11_memory_vectors(conn: Connection) -> None:
    """A memory's sentence vectors move from Chroma into the database (Chroma keeps one vector per memory, in a
    collection of a new name); the first sync embeds every memory again, with progress in the log."""
    table_of(MemoryVector).create(conn, checkfirst=True)


def _v12_provenance(conn: Connection) -> None:
    """Where untrusted text came from (memory/provenance.py): on a command's result, and on an approval it caused."""
    _add_missing_columns(conn, "process_log", ["sources JSON"])
    _add_missing_columns(conn, "approvals", ["provenance JSON"])


def _v13_mesh(conn: Connection) -> None:
    """The mesh: signed containers in and out, refusals, evaluations, blocklist, revoked keys, topics."""
    for table in MESH_TABLES:
        table_of(table).create(conn, checkfirst=True)


def _v14_peers_and_a2a(conn: Connection) -> None:
    """The personas and A2A agents this one knows (`peers`), its messages to them waiting for delivery (`a2a_outbox`)
    and the A2A tasks waiting for its reply (`a2a_inbound`)."""
    for table in (Peer, A2AOutbox, A2AInbound):
        table_of(table).create(conn, checkfirst=True)


def _v15_people_and_channels(conn: Connection) -> None:
    """Several humans (people, their identities per channel, contact requests) and the channels' inbox, outbox
    and cursors; every note gets its author. The one human there was becomes the owner, author of their notes."""
    for table in (Person, PersonIdentity, ContactRequest, ChannelInbox, ChannelOutbox, ChannelCursor):
        table_of(table).create(conn, checkfirst=True)
    _add_missing_columns(conn, "notes", ["author_id INTEGER"])
    if conn.execute(select(Person.id).limit(1)).first() is None:
        conn.execute(table_of(Person).insert().values(name="User", role="owner", added_by="migration", about=""))
    owner = conn.execute(select(Person.id).where(Person.role == "owner").order_by(Person.id)).scalar_one()
    conn.execute(
        text("UPDATE notes SET author_id = :owner WHERE source IN ('user', 'cli') AND author_id IS NULL"),
        {"owner": owner},
    )


def _v16_goal_related_values(conn: Connection) -> None:
    """Nexus Ark's long-term goals carry `related_values` (the values they serve): a JSON list on every goal."""
    _add_missing_columns(conn, "goals", ["related_values JSON"])
    conn.execute(text("UPDATE goals SET related_values = '[]' WHERE related_values IS NULL"))


def _v17_ethics_on_audit_entries(conn: Connection) -> None:
    """An audit entry of an ethics decision keeps the ethics model it was taken under (model type, weights,
    violation policy, audit settings, the rating): a JSON object, empty for the other entries."""
    _add_missing_columns(conn, "audit_log", ["ethics JSON"])


def _v18_tool_uses(conn: Connection) -> None:
    """HMP's long-term store of frequently used tools and links: a use count per tool and per semantic link."""
    table_of(ToolUse).create(conn, checkfirst=True)


def _v19_kb_document_source(conn: Connection) -> None:
    """A knowledge-base document keeps who gave it (a channel's sender, added with the owner's consent); the
    documents before it were the owner's own: empty."""
    _add_missing_columns(conn, "kb_documents", ["source VARCHAR(300) DEFAULT ''"])
    conn.execute(text("UPDATE kb_documents SET source = '' WHERE source IS NULL"))


def _v20_contact_request_warning(conn: Connection) -> None:
    """A contact request says what the owner should know of it ("claims to be the owner's address but failed
    authentication"); the requests before it had nothing to say: empty."""
    _add_missing_columns(conn, "contact_requests", ["warning TEXT DEFAULT ''"])
    conn.execute(text("UPDATE contact_requests SET warning = '' WHERE warning IS NULL"))


def _v21_memory_event_time(conn: Connection) -> None:
    """Knowledge updates: a memory's event time (when what it tells happened, `event_at`, resolved from its text
    or given by its source) apart from its record time (`created_at`), indexed so recall can filter by it."""
    moment = DateTime(timezone=True).compile(dialect=conn.dialect)
    _add_missing_columns(conn, "memory_items", [f"event_at {moment}"])
    for index in table_of(MemoryItem).indexes:
        if index.name == "ix_memory_items_event_at":
            index.create(conn, checkfirst=True)


def _v22_sealed_secrets(conn: Connection) -> None:
    """A fleet persona's secrets (its mesh key) sealed with the deployment's key: nonce and ciphertext only."""
    table_of(SealedSecret).create(conn, checkfirst=True)


def _v23_peer_tags(conn: Connection) -> None:
    """A peer carries the owner's tags (`friend`: the distributed notes replicate through it); the peers before
    had none: an empty list."""
    _add_missing_columns(conn, "peers", ["tags JSON"])
    conn.execute(text("UPDATE peers SET tags = '[]' WHERE tags IS NULL"))


def _v24_taints(conn: Connection) -> None:
    """Provenance that follows what it taints: a memory row written from untrusted text keeps its sources
    (`taints`, memory/taint.py) until the owner trusts it; the rows before it carried none."""
    table_of(Taint).create(conn, checkfirst=True)


def _v25_peer_credentials(conn: Connection) -> None:
    """Each peer has credentials of its own (`peer_credentials`: a token's hash, never the owner's token), and an A2A
    task knows which caller opened it (`caller`: its credential's peer, or `anonymous`), what the persona replied
    besides text (`reply_parts`) and how (`reply_kind`: an answer, a question, a refusal, a plain message); what the
    endpoint refused is counted by caller and reason (`a2a_refusals`). Tasks before had no proven caller: the empty
    caller, which no request matches."""
    table_of(PeerCredential).create(conn, checkfirst=True)
    table_of(A2ARefusal).create(conn, checkfirst=True)
    _add_missing_columns(
        conn,
        "a2a_inbound",
        ["caller VARCHAR(140) DEFAULT ''", "reply_kind VARCHAR(16) DEFAULT 'answer'", "reply_parts JSON"],
    )
    conn.execute(text("UPDATE a2a_inbound SET caller = '' WHERE caller IS NULL"))
    conn.execute(text("UPDATE a2a_inbound SET reply_kind = 'answer' WHERE reply_kind IS NULL"))
    conn.execute(text("UPDATE a2a_inbound SET reply_parts = '[]' WHERE reply_parts IS NULL"))
    for index in table_of(A2AInbound).indexes:
        if index.name == "ix_a2a_inbound_caller":
            index.create(conn, checkfirst=True)


def _v26_conversations(conn: Connection) -> None:
    """A note keeps its conversation (`person_id`: the person who wrote it, or whom the persona's message went to)
    and its door (`door`: web, cli, matrix, a2a, …); an identity keeps the last conversation its person alone reads
    (`private_conversation`). The notes before: their door from their source and `via:` tag, their person from
    their author, a message's from its `to:` tag (`to:user` was the owner)."""
    from memory.note_kinds import NoteSource, door_of

    _add_missing_columns(conn, "notes", ["person_id INTEGER", "door VARCHAR(16)"])
    _add_missing_columns(conn, "person_identities", ["private_conversation VARCHAR(300)"])
    for index in table_of(Note).indexes:
        if index.name == "ix_notes_person":
            index.create(conn, checkfirst=True)
    people = {name: pid for pid, name in conn.execute(select(Person.id, Person.name)).all()}
    owner = conn.execute(select(Person.id).where(Person.role == "owner").order_by(Person.id)).scalar()
    notes = table_of(Note)
    rows = conn.execute(select(notes.c.id, notes.c.source, notes.c.tags, notes.c.author_id)).all()
    for note_id, source, tags, author in rows:
        tags = tags if isinstance(tags, list) else []
        person = author
        if source == NoteSource.PERSONA and "outgoing" in tags:
            to = next((t[3:] for t in tags if isinstance(t, str) and t.startswith("to:")), None)
            person = owner if to == "user" else people.get(to or "")
        door = door_of(source, tags)
        if person is not None or door is not None:
            conn.execute(
                notes.update().where(notes.c.id == note_id).values(person_id=person, door=door.value if door else None)
            )


def _v27_people_groups(conn: Connection) -> None:
    """HMP `users_group`: groups of the persona's humans and who is in each; there were none."""
    table_of(PeopleGroup).create(conn, checkfirst=True)
    table_of(PeopleGroupMember).create(conn, checkfirst=True)


def _v28_peers_matter(conn: Connection) -> None:
    """Peers met on the mesh or over A2A become peers (`added_by` met) with what they say they offer (`offers`); a
    strategy or thinking method a peer offered and the owner approved keeps where it came from (`origin`). The DIDs
    the door had seen before (the config key `mesh/discovered`) become such peers."""
    _add_missing_columns(conn, "peers", ["offers JSON"])
    conn.execute(text("UPDATE peers SET offers = '{}' WHERE offers IS NULL"))
    _add_missing_columns(conn, "stagnation_strategies", ["origin JSON"])
    _add_missing_columns(conn, "thinking_methods", ["origin JSON"])
    config, peers = table_of(ConfigEntry), table_of(Peer)
    raw = conn.execute(select(config.c.value).where(config.c.key == MESH_DISCOVERED_KEY)).scalar()
    seen = raw if isinstance(raw, dict) else {}
    known = {did for (did,) in conn.execute(select(peers.c.did).where(peers.c.did.is_not(None))).all()}
    names = {name for (name,) in conn.execute(select(peers.c.name)).all()}
    for did, info in sorted(seen.items()):
        if not isinstance(did, str) or did in known:
            continue
        name = met_name(did, names)
        names.add(name)
        moment = _moment(info.get("first_seen")) if isinstance(info, dict) else None
        last = _moment(info.get("last_seen")) if isinstance(info, dict) else None
        conn.execute(
            peers.insert().values(
                name=name,
                did=did,
                a2a_url=None,
                p2p_addrs=[],
                added_by=MET,
                note="",
                blocked=False,
                tags=[],
                offers={},
                first_seen=moment,
                last_seen=last,
                created_at=moment or utcnow(),
            )
        )
    conn.execute(config.delete().where(config.c.key == MESH_DISCOVERED_KEY))


def _moment(value: Any) -> datetime | None:
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _v29_cached_tokens(conn: Connection) -> None:
    """A model call's prompt tokens the server served from its prompt cache (its usage says so; 0 before)."""
    _add_missing_columns(conn, "llm_calls", ["cached_tokens INTEGER DEFAULT 0"])
    conn.execute(text("UPDATE llm_calls SET cached_tokens = 0 WHERE cached_tokens IS NULL"))


MIGRATIONS: dict[int, Callable[[Connection], None]] = {
    2: _v2_stelis_columns,
    3: _v3_memory_tiers,
    4: _v4_llm_memory_status,
    5: _v5_anti_stagnation_metrics,
    6: _v6_persona_autonomy,
    7: _v7_consent_and_archive,
    8: _v8_live_events_and_history,
    9: _v9_reach,
    10: _v10_full_text_index,
    11: _v11_memory_vectors,
    12: _v12_provenance,
    13: _v13_mesh,
    14: _v14_peers_and_a2a,
    15: _v15_people_and_channels,
    16: _v16_goal_related_values,
    17: _v17_ethics_on_audit_entries,
    18: _v18_tool_uses,
    19: _v19_kb_document_source,
    20: _v20_contact_request_warning,
    21: _v21_memory_event_time,
    22: _v22_sealed_secrets,
    23: _v23_peer_tags,
    24: _v24_taints,
    25: _v25_peer_credentials,
    26: _v26_conversations,
    27: _v27_people_groups,
    28: _v28_peers_matter,
    29: _v29_cached_tokens,
}


CONNECT_TIMEOUT_S = 5  # a server that does not answer fails the start-up, it does not hang it


class SchemaError(RuntimeError):
    pass


class DatabaseOpenError(RuntimeError):
    """The database could not be opened; the message names the URL (password hidden) or file, and what failed."""


def masked(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url.split("@")[-1] if "@" in url else url


def database_url(data_dir: str | Path, url: str | None = None) -> str:
    """The SQLAlchemy URL: an explicit URL wins; otherwise `<data_dir>/anima.sqlite`."""
    if url:
        if "://" not in url:  # a bare path
            return f"sqlite:///{Path(url).expanduser().resolve()}"
        scheme = url.split("://", 1)[0].split("+", 1)[0].lower()
        if scheme not in ("sqlite", "postgresql"):
            raise DatabaseOpenError(
                f"{masked(url)}: unsupported scheme {scheme!r} — anima stores its memory "
                "in PostgreSQL (postgresql://user@host:port/name) or SQLite (a file path)"
            )
        return url
    path = Path(data_dir).expanduser().resolve() / "anima.sqlite"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatabaseOpenError(f"data dir {path.parent}: cannot create it ({exc.strerror})") from exc
    return f"sqlite:///{path}"


def _open_failure(url: str, exc: Exception) -> str:
    """What went wrong opening `url`, in the user's terms: the file, or the host and port that did not answer."""
    said = str(getattr(exc, "orig", None) or exc).strip()
    reason = said.splitlines()[0] if said else type(exc).__name__
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        file = parsed.database or ":memory:"
        if "not a database" in reason or "malformed" in reason:
            return (
                f"{file} is not a usable SQLite database ({reason}); it was left untouched — move it aside "
                "(or point --data-dir/--db elsewhere) to start a new one"
            )
        hint = "; is its directory writable?" if "unable to open" in reason else ""
        return f"cannot open the SQLite database {file} ({reason}){hint}"
    where = f"{parsed.host or 'localhost'}:{parsed.port or 5432}"
    lowered = reason.lower()
    if "resolve" in lowered or "name or service not known" in lowered or "nodename" in lowered:
        what = f"the host name {parsed.host!r} does not resolve"
    elif "refused" in lowered:
        what = f"{where} refused the connection (is PostgreSQL running there?)"
    elif "timeout" in lowered or "timed out" in lowered:
        what = f"{where} did not answer within {CONNECT_TIMEOUT_S} s"
    else:
        what = f"{where}: {reason}"
    return f"{masked(url)}: {what}"


def _sqlite_pragmas(dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


SCHEMA_LOCK_KEY = 0x616E696D61  # "anima": the advisory lock id PostgreSQL schema changes take
SCHEMA_LOCK_POLL_S = 0.05
POOL_RECYCLE_S = 600
PING_AFTER_IDLE_S = 5.0  # a pooled PostgreSQL connection idle this long is checked before it is used again


SQLITE_POOL_KEPT = 5
SQLITE_POOL_MORE = 60


def create_db_engine(url: str, *, pool_size: int | None = None, server_prepare: bool = True) -> Engine:
    """`pool_size`: connections a Postgres pool keeps (a worker serving many personas sizes it to its concurrency;
    last in, first out, so a job's transactions keep to the connection its persona's search_path is set on).
    `server_prepare=False`: psycopg never prepares a statement on the server. A deployment's personas share their
    statements' texts, but each runs them under its own search_path (`SEARCH_PATH`), and PostgreSQL re-plans a
    prepared statement whenever the search_path it was planned under changed: with a worker's jobs going from
    persona to persona, the preparing would be all bookkeeping."""
    if url.startswith("sqlite"):
        # One process's threads share the file: the web app's request threads (anyio's 40), the A2A door's waits and
        # the loop's steps. SQLAlchemy's default pool (5 + 10) made a read wait for a connection behind writers that
        # wait for SQLite's write lock; a file connection costs little, so there is one for every thread that asks
        # (in WAL a read never waits for a writer).
        database = make_url(url).database
        in_memory = not database or database == ":memory:" or "mode=memory" in url  # SQLAlchemy keeps one connection
        sizing = {} if in_memory else {"pool_size": SQLITE_POOL_KEPT, "max_overflow": SQLITE_POOL_MORE}
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30}, **sizing)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    # a deployment's pool serves every persona's schema: recycled, so no connection caches every table it touched
    sizing = (
        {"pool_size": pool_size, "max_overflow": pool_size, "pool_recycle": POOL_RECYCLE_S, "pool_use_lifo": True}
        if pool_size
        else {}
    )
    connect_args: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT_S}
    if not server_prepare:
        connect_args["prepare_threshold"] = None
    engine = create_engine(url, connect_args=connect_args, **sizing)
    _ping_when_idle(engine)
    _keep_search_path(engine)
    return engine


def autocommitting(engine: Engine) -> Engine:
    """`engine` whose statements are each their own transaction (PostgreSQL: psycopg's autocommit, set and reset
    on the pooled connection without a round trip): for a read or a one-statement write, no BEGIN and COMMIT
    around it."""
    return engine.execution_options(isolation_level="AUTOCOMMIT")


SEARCH_PATH = "search_path"  # the execution option naming the schema a Database's statements run in (a persona's)


class SearchPathError(RuntimeError):
    """A statement was about to run on a connection set to another schema than its own, inside a transaction."""


def _keep_search_path(engine: Engine) -> None:
    """Every statement runs under the search_path its engine asks for: a persona's Database (`SEARCH_PATH`
    execution option) only its own schema, anything else the server's default. The statements name no schema — one
    text for every persona, so SQLAlchemy's compiled statements and psycopg's parsed queries serve them all — and
    the schema is the connection's: set (in a transaction of its own, which no rollback of the unit's undoes) before
    the first statement of a unit on a connection that was set to another, and only then; a connection's setting
    is kept in its pool record (cleared when the pool opens it anew, which starts at the default). A unit whose
    connection is found set to another schema mid-transaction is refused: its statements would read the other's
    tables."""

    @event.listens_for(engine, "before_cursor_execute")
    def set_search_path(
        conn: Connection, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool
    ) -> None:
        wanted = conn.get_execution_options().get(SEARCH_PATH)
        pooled = conn.connection
        if pooled.info.get(SEARCH_PATH) == wanted:
            return
        dbapi = pooled.dbapi_connection
        if dbapi is None or dbapi.info.transaction_status != 0:  # psycopg.pq.TransactionStatus.IDLE
            raise SearchPathError(
                f"a connection set to schema {pooled.info.get(SEARCH_PATH)!r} inside a transaction "
                f"of schema {wanted!r}: refused"
            )
        from psycopg import sql

        setting = (
            sql.SQL("SET search_path TO {}").format(sql.Identifier(wanted)) if wanted else sql.SQL("RESET search_path")
        )
        autocommit = dbapi.autocommit
        dbapi.autocommit = True  # its own transaction: never undone by a rollback of the unit that follows
        try:
            dbapi.execute(setting)
        finally:
            dbapi.autocommit = autocommit
        pooled.info[SEARCH_PATH] = wanted


def _ping_when_idle(engine: Engine) -> None:
    """SQLAlchemy's pessimistic disconnect handling, only for a connection that sat idle in the pool: `pool_pre_ping`
    pings on every checkout — a round trip per unit of work, a dozen per tick — while a connection handed back
    milliseconds ago (a busy worker's) is as alive as it was. One idle for `PING_AFTER_IDLE_S` (a server restarted
    meanwhile drops it) is pinged; if that fails, the checkout event's DisconnectionError makes the pool replace it."""

    @event.listens_for(engine, "checkin")
    def returned(dbapi_connection: Any, record: Any) -> None:
        record.info["returned_at"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def taken(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        returned_at = record.info.get("returned_at")  # (a new connection has none: it was just made)
        if returned_at is None or time.monotonic() - returned_at < PING_AFTER_IDLE_S:
            return
        try:
            cursor = dbapi_connection.cursor()
            cursor.execute("SELECT 1")
            cursor.close()
            dbapi_connection.rollback()  # the ping's implicit transaction is not the unit's
        except Exception as exc:  # noqa: BLE001 - any failure: the pool takes a fresh connection
            raise DisconnectionError(f"an idle connection failed its ping: {exc}") from exc


@contextmanager
def schema_lock(engine: Engine) -> Iterator[None]:
    """One process at a time creates or upgrades a schema: a run and fifty `say`s opening a new database together
    would otherwise race to create the same tables. SQLite: an flock on `<database>.lock` — never on the database
    file itself, whose descriptor closing would drop SQLite's own locks in this process; PostgreSQL: an advisory
    lock."""
    if engine.dialect.name == "sqlite":
        database = engine.url.database
        try:
            handle = (
                os.open(f"{database}.lock", os.O_RDWR | os.O_CREAT, 0o644)
                if database and database != ":memory:"
                else None
            )
        except OSError:  # an unwritable directory: SQLite will say so
            handle = None
        if handle is None:
            yield
            return
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield
        finally:
            os.close(handle)
        return
    with engine.connect() as conn:
        # tried, not waited on: a session waiting inside pg_advisory_lock holds a snapshot, and the holder's
        # CREATE INDEX CONCURRENTLY (LangGraph's checkpoint tables) waits for every older snapshot — a deadlock
        while not conn.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": SCHEMA_LOCK_KEY}).scalar():
            conn.commit()
            time.sleep(SCHEMA_LOCK_POLL_S)
        conn.commit()
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": SCHEMA_LOCK_KEY})
            conn.commit()


def _schema_is_current(engine: Engine, schema: str | None = None) -> bool:
    with engine.connect() as conn:
        names = set(inspect(conn).get_table_names(schema=schema))
        if SchemaVersion.__tablename__ not in names or not set(Base.metadata.tables) <= names:
            return False
        return conn.execute(select(SchemaVersion.version).where(SchemaVersion.id == 1)).scalar() == SCHEMA_VERSION


def ensure_schema(engine: Engine, schema: str | None = None) -> int:
    """Create or upgrade the schema; return the version now in force. Only a database that needs it is locked
    (a current one, the usual case, is opened without touching anything beside it). `schema`: a persona's own
    PostgreSQL schema in a deployment (`engine` then carries its search_path, `SEARCH_PATH`)."""
    if _schema_is_current(engine, schema):
        return SCHEMA_VERSION
    with schema_lock(engine):
        if schema:
            with engine.begin() as conn:
                conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
        return _ensure_schema(engine, schema)


def _ensure_schema(engine: Engine, schema: str | None = None) -> int:
    with engine.begin() as conn:
        has_version_table = inspect(conn).has_table(SchemaVersion.__tablename__, schema=schema)
        if not has_version_table:
            Base.metadata.create_all(conn)
            create_lexical_index(conn)
            conn.execute(table_of(SchemaVersion).insert().values(id=1, version=SCHEMA_VERSION))
            log.info("created schema v%s", SCHEMA_VERSION)
            return SCHEMA_VERSION
        current = conn.execute(select(SchemaVersion.version).where(SchemaVersion.id == 1)).scalar_one()
    if current > SCHEMA_VERSION:
        raise SchemaError(
            f"the database schema is v{current}, newer than this anima (v{SCHEMA_VERSION}); "
            "upgrade anima or point --data-dir/--db at another database"
        )
    for version in range(current + 1, SCHEMA_VERSION + 1):
        with engine.begin() as conn:
            MIGRATIONS[version](conn)
            conn.execute(table_of(SchemaVersion).update().where(SchemaVersion.id == 1).values(version=version))
        log.info("migrated schema to v%s", version)
    with engine.begin() as conn:  # tables added since the database was made
        Base.metadata.create_all(conn)
        create_lexical_index(conn)
    return SCHEMA_VERSION


class _Kept:
    """A session on its own connection, kept for a run's units (`busy` while one holds it; `reader`: on a connection
    in autocommit, for `reading()` on PostgreSQL)."""

    def __init__(self, connection: Connection, session: Session, reader: bool = False):
        self.connection, self.session, self.busy, self.reader = connection, session, True, reader

    def wrote(self) -> bool:
        """Whether the session's transaction has written (SQLite's driver begins one before the first write only);
        True when that cannot be told (PostgreSQL: always, its driver begins one before any statement)."""
        dbapi = getattr(self.connection.connection, "dbapi_connection", None)
        return bool(getattr(dbapi, "in_transaction", True))


class SharedSession:
    """The sessions, each on a connection of its own, that the units of work of a run take in turn instead of a new
    session and a pooled connection each (module doc): `take` gives a unit a session no other unit holds — a unit
    inside another gets another one, as it got a new one before (at most `MOST`; past that, None: a new session) —
    and `give_back` detaches what it loaded. Between two units a session holds no transaction that wrote."""

    MOST = 3  # a unit, one inside it, one inside that (the memory index's read, and its write inside it)
    MOST_READERS = 2  # PostgreSQL's autocommit sessions for `reading()` (a search's read inside a unit)

    def __init__(self, database: Database):
        self.database = database
        self._kept: list[_Kept] = []
        self._lock = threading.Lock()
        self._closed = False

    def take(self, database: Database, *, reader: bool = False) -> _Kept | None:
        """A kept session no other unit holds (`reader`: one in autocommit, PostgreSQL's `reading()`), or None."""
        if database is not self.database:
            return None
        with self._lock:
            if self._closed:
                return None
            for kept in self._kept:
                if not kept.busy and kept.reader == reader:
                    kept.busy = True
                    return kept
            if sum(kept.reader == reader for kept in self._kept) >= (self.MOST_READERS if reader else self.MOST):
                return None
            engine = autocommitting(database.engine) if reader else database.engine
            connection = engine.connect()
            kept = _Kept(connection, (database.readers if reader else database.sessions)(bind=connection), reader)
            self._kept.append(kept)
            return kept

    def give_back(self, kept: _Kept) -> None:
        kept.session.expunge_all()  # as a closed session leaves them: detached
        kept.session.info.pop("actor", None)
        kept.session.info.pop(TICK_SNAPSHOT, None)
        kept.session.info.pop(TAINT, None)
        kept.session.info.pop(TAINT_READS, None)
        kept.busy = False

    def drop(self, kept: _Kept) -> None:
        """A kept session whose unit failed (PostgreSQL): closed with its connection instead of taken again."""
        with self._lock:
            if kept in self._kept:
                self._kept.remove(kept)
        try:
            kept.session.close()
        finally:
            kept.connection.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            kept, self._kept = self._kept, []
        for each in kept:
            each.session.close()
            each.connection.close()


T = TypeVar("T")
_SHARED: ContextVar[SharedSession | None] = ContextVar("anima_shared_session", default=None)
# the run's database and the config keys its tick read once (memory/repositories/config.py), on both dialects
_RUN_CONFIG: ContextVar[tuple[Database, ConfigSnapshot] | None] = ContextVar("anima_run_config", default=None)


class Database:
    """An engine plus a session factory; `unit()` gives a transaction with every repository.

    In a deployment of many personas on one PostgreSQL database (memory/fleet.py) each persona is a `Database` over
    its own schema: every statement it runs runs with only that schema in its search_path (`SEARCH_PATH`,
    `_keep_search_path`), so no repository query can reach another persona's tables, and the personas a process
    serves share one connection pool and one text per statement (`engine` given: closing this Database leaves the
    pool open)."""

    def __init__(self, engine: Engine, *, schema: str | None = None, owns_engine: bool = True):
        self.schema = schema
        self.owns_engine = owns_engine
        self.base_engine = engine  # the one holding the pool
        self.engine = engine.execution_options(**{SEARCH_PATH: schema}) if schema else engine
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)
        record_history(self.sessions)  # every change to a memory tier lands in memory_history (memory/history.py)
        record_taints(self.sessions)  # a row written from untrusted text keeps its sources (memory/taint.py)
        self.readers = (
            sessionmaker(autocommitting(self.engine), expire_on_commit=False)
            if self.engine.dialect.name == "postgresql"
            else self.sessions
        )  # `reading`

    @classmethod
    def open(
        cls,
        data_dir: str | Path = "data",
        url: str | None = None,
        *,
        schema: str | None = None,
        engine: Engine | None = None,
    ) -> Database:
        """Open (create or upgrade) the database; DatabaseOpenError says what failed. A file that is not a
        database is refused, never overwritten. `schema`: a persona's own PostgreSQL schema (created when
        missing); `engine`: a shared one (its pool serves every persona of the process)."""
        url = database_url(data_dir, url) if engine is None else engine.url.render_as_string(hide_password=False)
        if schema is not None and not url.startswith("postgresql"):
            raise DatabaseOpenError(f"{masked(url)}: a persona of a deployment needs PostgreSQL (one schema each)")
        try:
            shared = engine is not None
            engine = engine if engine is not None else create_db_engine(url)
        except (ArgumentError, ImportError) as exc:  # a dialect or driver that is not installed
            raise DatabaseOpenError(f"{masked(url)}: cannot use this URL ({exc})") from exc
        database = cls(engine, schema=schema, owns_engine=not shared)
        try:
            ensure_schema(database.engine, schema)
        except DBAPIError as exc:
            database.close()
            raise DatabaseOpenError(_open_failure(url, exc)) from exc
        return database

    @property
    def url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    @property
    def is_postgres(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    def compact(self) -> None:
        """SQLite: the file rebuilt (VACUUM) and its write-ahead log truncated, so a replaced text is in no free page
        or log frame of it (anonymisation). PostgreSQL marks the old row versions dead and reuses their space
        (autovacuum); erasing them at rest is `VACUUM FULL`, the operator's."""
        if self.is_postgres:
            return
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.exec_driver_sql("VACUUM")
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")

    def libpq_url(self) -> str:
        """The Postgres URL as libpq takes it (no SQLAlchemy driver suffix), for the checkpointer's own pool."""
        if not self.is_postgres:
            raise ValueError(f"{self.url} is not a PostgreSQL database")
        return self.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)

    @contextmanager
    def unit(self, actor: str | None = None) -> Iterator[Repos]:
        """One transaction: committed on success, rolled back on error. `actor` (default "persona") is who the
        memory history names for what it changes ("human" for the web). Inside `shared_session()`, a kept session
        no other unit holds: committed only if the unit wrote (module doc). Inside it on either dialect, the run's
        config snapshot (`ConfigSnapshot`)."""
        shared = _SHARED.get()
        kept = shared.take(self) if shared is not None else None
        snapshot = self._config_snapshot()
        if shared is None or kept is None:
            with self.sessions() as session:
                if actor:
                    session.info["actor"] = actor
                if snapshot is not None:
                    session.info[TICK_SNAPSHOT] = snapshot
                try:
                    yield Repos(session)
                    session.commit()
                except BaseException:
                    session.rollback()
                    raise
            return
        session = kept.session
        try:
            if actor:
                session.info["actor"] = actor
            if snapshot is not None:
                session.info[TICK_SNAPSHOT] = snapshot
            yield Repos(session)
            session.flush()
            if kept.wrote():  # PostgreSQL: always — a read's transaction ends with its unit (module doc)
                session.commit()
        except BaseException:
            session.rollback()
            if self.is_postgres:
                shared.drop(kept)
                kept = None
            raise
        finally:
            if kept is not None:
                shared.give_back(kept)

    def _config_snapshot(self) -> ConfigSnapshot | None:
        """The config snapshot of the run this context is in, when the run is on this database."""
        run = _RUN_CONFIG.get()
        return run[1] if run is not None and run[0] is self else None

    @contextmanager
    def kept_sessions(self) -> Iterator[None]:
        """Within: this context's units of work take kept sessions and connections in turn (module doc; a context
        copied into another thread, as LangGraph's step threads copy it, shares them too, a session to a unit), on
        either dialect. A fleet worker's job takes them for all its units (graph/fleet/runtime.py). Nested: the
        outer ones are used."""
        if _SHARED.get() is not None:
            yield
            return
        shared = SharedSession(self)
        _SHARED.set(shared)
        try:
            yield
        finally:
            if _SHARED.get() is shared:  # (a stream dropped unfinished may be closed later, from another run)
                _SHARED.set(None)
            shared.close()

    @contextmanager
    def shared_session(self) -> Iterator[None]:
        """Within: the kept sessions (`kept_sessions`) and the run's one config snapshot (the keys its tick reads in
        several steps, read once: memory/repositories/config.py). Nested: the outer one is used."""
        if _RUN_CONFIG.get() is not None:
            with self.kept_sessions():
                yield
            return
        run = (self, ConfigSnapshot())
        _RUN_CONFIG.set(run)
        try:
            with self.kept_sessions():
                yield
        finally:
            if _RUN_CONFIG.get() is run:  # (a stream dropped unfinished may be closed later, from another run)
                _RUN_CONFIG.set(None)

    def sharing(self, items: Iterator[T]) -> Iterator[T]:
        """`items` (a graph's stream: the steps run as it is iterated) with `shared_session()` around each step."""
        with self.shared_session():
            yield from items

    @contextmanager
    def reading(self) -> Iterator[Repos]:
        """Repositories for reads only: nothing is committed, so a check that usually finds nothing new costs no
        commit (SQLite: the session's transaction ends when it closes). PostgreSQL: no transaction at all — each
        statement is its own, seeing what was committed before it, as in a READ COMMITTED transaction — which
        saves the BEGIN and ROLLBACK round trips around it; never write through it. Inside `shared_session()`, a
        kept session no unit holds (PostgreSQL: a kept one in autocommit), and the run's config snapshot."""
        shared = _SHARED.get()
        kept = shared.take(self, reader=self.is_postgres) if shared is not None else None
        snapshot = self._config_snapshot()
        if shared is None or kept is None:
            with self.readers() as session:
                if snapshot is not None:
                    session.info[TICK_SNAPSHOT] = snapshot
                yield Repos(session)
            return
        failed = False
        try:
            if snapshot is not None:
                kept.session.info[TICK_SNAPSHOT] = snapshot
            yield Repos(kept.session)
        except BaseException:
            failed = True
            raise
        finally:
            if failed and self.is_postgres:
                shared.drop(kept)
            else:
                if not kept.reader and kept.wrote():  # nothing written through it stays, as when its session
                    kept.session.rollback()  # closed (in autocommit each statement was its own transaction)
                shared.give_back(kept)

    @contextmanager
    def session(self) -> Iterator[Session]:
        with self.sessions() as session:
            yield session

    def close(self) -> None:
        if self.owns_engine:
            self.base_engine.dispose()
