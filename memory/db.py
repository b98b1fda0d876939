"""Opening the database: SQLite (WAL) under the data dir by default, PostgreSQL by URL.

Schema versioning: `schema_version` holds one row with the version the tables were built for.
A new database is created at `SCHEMA_VERSION`. An older one is upgraded by the ordered steps in
`MIGRATIONS` (version -> function taking a Connection), each in its own transaction; a database
newer than this code is refused with a clear error instead of being written to.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Connection, DateTime, Engine, create_engine, event, inspect, select, text
from sqlalchemy.orm import Session, sessionmaker

from memory.models import (
    AntiStagnationMetric,
    Approval,
    AuditEntry,
    Base,
    MemoryBlockVersion,
    Note,
    OpenQuestion,
    SchemaVersion,
    Session as SessionRow,
)
from memory.repositories import Repos

log = logging.getLogger(__name__)

SCHEMA_VERSION = 7

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
    # the entries join the retrieval catalogue, in this migration's transaction
    Repos(Session(bind=conn)).llm_memory.index_all()


def _v5_anti_stagnation_metrics(conn: Connection) -> None:
    AntiStagnationMetric.__table__.create(conn, checkfirst=True)  # v3 created every table then known


def _add_missing_columns(conn: Connection, table: str, columns: list[str]) -> None:
    """`ALTER TABLE … ADD COLUMN` for each "name TYPE …" the table lacks: v3 created every table as the models
    stood then, so a later column may be there already."""
    have = {c["name"] for c in inspect(conn).get_columns(table)}
    for column in columns:
        if column.split()[0] not in have:
            conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column}"))


def _v6_persona_autonomy(conn: Connection) -> None:
    _add_missing_columns(conn, "tasks", ["repl_mode VARCHAR(16) DEFAULT 'none'", "repl_status VARCHAR(16)",
                                         "repl_config JSON", "repl_thread VARCHAR(128)", "repl_error TEXT"])
    conn.execute(text("UPDATE tasks SET repl_mode = 'none'"))
    OpenQuestion.__table__.create(conn, checkfirst=True)
    SessionRow.__table__.create(conn, checkfirst=True)


def _v7_consent_and_archive(conn: Connection) -> None:
    Approval.__table__.create(conn, checkfirst=True)
    AuditEntry.__table__.create(conn, checkfirst=True)
    MemoryBlockVersion.__table__.create(conn, checkfirst=True)
    for index in Note.__table__.indexes:  # the human's latest note was a full scan (26 ms at 100k notes)
        index.create(conn, checkfirst=True)
    moment = DateTime(timezone=True).compile(dialect=conn.dialect)  # TIMESTAMP WITH TIME ZONE / DATETIME
    for table in ("goals", "tasks"):
        _add_missing_columns(conn, table, [f"archived_at {moment}"])


MIGRATIONS: dict[int, Callable[[Connection], None]] = {2: _v2_stelis_columns, 3: _v3_memory_tiers,
                                                       4: _v4_llm_memory_status, 5: _v5_anti_stagnation_metrics,
                                                       6: _v6_persona_autonomy, 7: _v7_consent_and_archive}


class SchemaError(RuntimeError):
    pass


def database_url(data_dir: str | Path, url: str | None = None) -> str:
    """The SQLAlchemy URL: an explicit URL wins; otherwise `<data_dir>/anima.sqlite`."""
    if url:
        if "://" not in url:  # a bare path
            return f"sqlite:///{Path(url).expanduser().resolve()}"
        return url
    path = Path(data_dir).expanduser().resolve() / "anima.sqlite"
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def create_db_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://"):]
    return create_engine(url, pool_pre_ping=True)


def ensure_schema(engine: Engine) -> int:
    """Create or upgrade the schema; return the version now in force."""
    with engine.begin() as conn:
        has_version_table = inspect(conn).has_table(SchemaVersion.__tablename__)
        if not has_version_table:
            Base.metadata.create_all(conn)
            conn.execute(SchemaVersion.__table__.insert().values(id=1, version=SCHEMA_VERSION))
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
            conn.execute(
                SchemaVersion.__table__.update().where(SchemaVersion.id == 1).values(version=version)
            )
        log.info("migrated schema to v%s", version)
    with engine.begin() as conn:  # tables added since the database was made
        Base.metadata.create_all(conn)
    return SCHEMA_VERSION


class Database:
    """An engine plus a session factory; `unit()` gives a transaction with every repository."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.sessions = sessionmaker(engine, expire_on_commit=False)

    @classmethod
    def open(cls, data_dir: str | Path = "data", url: str | None = None) -> "Database":
        engine = create_db_engine(database_url(data_dir, url))
        ensure_schema(engine)
        return cls(engine)

    @property
    def url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    @contextmanager
    def unit(self) -> Iterator[Repos]:
        """One transaction: committed on success, rolled back on error."""
        with self.sessions() as session:
            try:
                yield Repos(session)
                session.commit()
            except BaseException:
                session.rollback()
                raise

    @contextmanager
    def session(self) -> Iterator[Session]:
        with self.sessions() as session:
            yield session

    def close(self) -> None:
        self.engine.dispose()
