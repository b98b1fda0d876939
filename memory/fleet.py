"""A deployment of many personas on one PostgreSQL database.

Isolation: each persona's memory is its own PostgreSQL schema (`persona_<name>`), and a persona's `Database` runs
every statement with only that schema in the connection's search_path (memory/db.py: `SEARCH_PATH`). A repository
has no persona key to forget and its statements name no schema: a query cannot reach another persona's tables, and
a bug in one (a missing filter, a wrong join) stays inside the persona that ran it. The personas of one process
share one connection pool, and one text per statement.

Beside them, in the database's default schema: the registry of personas (`anima_personas`), the job engine's tables
(procrastinate) and LangGraph's checkpoints (one table for every thread, each thread id prefixed by its persona).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from memory.db import Database, DatabaseOpenError, _open_failure, autocommitting, create_db_engine, masked, schema_lock
from memory.models import RegistryBase
from memory.repositories.personas import PersonaRegistryRepo

NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
SCHEMA_PREFIX = "persona_"
FENCE_POLL_S = 0.1


class FleetError(ValueError):
    pass


def check_name(name: str) -> str:
    if not NAME.match(name or ""):
        raise FleetError(
            f"persona name {name!r}: use 1-40 lowercase letters, digits or _ (starting with a letter); "
            "it names the persona's database schema and vector database"
        )
    return name


def schema_of(name: str) -> str:
    """The PostgreSQL schema (and the Chroma database) holding a persona's memory."""
    return SCHEMA_PREFIX + check_name(name)


class Fleet:
    """The deployment's database: the registry, and each persona's memory in its own schema over one pool."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.sessions = sessionmaker(engine, expire_on_commit=False)
        self.statements = sessionmaker(autocommitting(engine), expire_on_commit=False)  # `registry(each=True)`

    @classmethod
    def open(cls, url: str, *, pool_size: int = 5) -> Fleet:
        if not url.startswith("postgresql"):
            raise DatabaseOpenError(
                f"{masked(url)}: many personas need PostgreSQL (postgresql://user@host/db); "
                "one persona runs on SQLite with `run.py` alone"
            )
        engine = create_db_engine(url, pool_size=pool_size, server_prepare=False)
        try:
            if not _registry_exists(engine):
                with schema_lock(engine), engine.begin() as conn:
                    RegistryBase.metadata.create_all(conn)
        except DBAPIError as exc:
            engine.dispose()
            raise DatabaseOpenError(_open_failure(url, exc)) from exc
        return cls(engine)

    @property
    def url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    def libpq_url(self) -> str:
        """The URL as libpq takes it, for the job engine's and the checkpointer's own pools."""
        return self.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)

    @contextmanager
    def registry(self, *, each: bool = False) -> Iterator[PersonaRegistryRepo]:
        """One transaction on the registry; `each`: every statement its own (a worker's one-statement look-up
        before a job and its record after one: no BEGIN and COMMIT round trips around them)."""
        with (self.statements if each else self.sessions)() as session:
            try:
                yield PersonaRegistryRepo(session)
                session.commit()
            except BaseException:
                session.rollback()
                raise

    @contextmanager
    def fence(self, name: str) -> Iterator[None]:
        """Held while a job of the persona runs (a session advisory lock on a connection of its own): should the
        engine ever hand a job of a live but silent worker to another, the second waits for the first instead of
        running beside it. A killed worker's connection closes, and its lock with it."""
        key = int.from_bytes(hashlib.blake2b(f"anima:{name}".encode(), digest_size=8).digest(), "big", signed=True)
        # each statement its own transaction: no snapshot held while waiting (see memory/db.py: schema_lock), no
        # connection idle in a transaction for the whole job, and no BEGIN and COMMIT round trips around the two
        with autocommitting(self.engine).connect() as conn:
            while not PersonaRegistryRepo(Session(bind=conn)).try_advisory_lock(key):
                time.sleep(FENCE_POLL_S)
            try:
                yield
            finally:
                PersonaRegistryRepo(Session(bind=conn)).advisory_unlock(key)

    def database(self, name: str) -> Database:
        """A persona's memory (its schema is created or upgraded on first open), over this fleet's pool."""
        return Database.open(schema=schema_of(name), engine=self.engine)

    def close(self) -> None:
        self.engine.dispose()


def holds_registry(url: str) -> bool:
    """Whether the PostgreSQL database at `url` holds a deployment (its registry of personas)."""
    engine = create_db_engine(url)
    try:
        return _registry_exists(engine)
    except DBAPIError as exc:
        raise DatabaseOpenError(_open_failure(url, exc)) from exc
    finally:
        engine.dispose()


def _registry_exists(engine: Engine) -> bool:
    from sqlalchemy import inspect

    with engine.connect() as conn:
        return inspect(conn).has_table(RegistryBase.metadata.sorted_tables[0].name)
