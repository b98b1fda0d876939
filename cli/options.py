"""What the commands share: the options that say where a persona's data is, and opening it.

A data dir remembers the persona it was run with (graph/services.py), so `inspect`, `kb`, `persona show` and the
rest read that persona's settings without `--persona`.

The options that are settings (--data-dir, --db, --persona, --embed-url, --chroma-url, --llm-url, --model, --name,
--debug …) have no `envvar=` of their own: a flag not given is None, and the settings read ANIMA_DATA_DIR & co
themselves (persona/settings.py) — one resolution, which `run.py config show` reports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape

from cli.startup import starting

if TYPE_CHECKING:  # the domains are imported by the functions that open them: `run.py say --help` needs none
    from managers import ManagerFactory, Managers
    from memory import Database
    from persona.settings import Settings

console = Console(stderr=False)
err = Console(stderr=True)

DataDir = typer.Option(
    None,
    "--data-dir",
    show_default=False,
    help="Where the database and checkpoints live (default: $ANIMA_DATA_DIR, else data).",
)
DbUrl = typer.Option(
    None,
    "--db",
    help="Database URL (postgresql://… or a SQLite path); default $ANIMA_DB_URL, else <data-dir>/anima.sqlite.",
)
PersonaDir = typer.Option(
    None,
    "--persona",
    help="Persona directory (default: $ANIMA_PERSONA_DIR, else the one this data dir was run "
    "with, else persona/default).",
)
EmbedUrl = typer.Option(
    None,
    "--embed-url",
    help="OpenAI-compatible /v1 server for embeddings (default: $ANIMA_EMBED_URL, else embedded MiniLM).",
)
EmbedModel = typer.Option(None, "--embed-model", help="The embedding model (default: $ANIMA_EMBED_MODEL).")
ChromaUrl = typer.Option(
    None,
    "--chroma-url",
    help="Chroma server, e.g. http://127.0.0.1:8000 (default: $ANIMA_CHROMA_URL, else embedded, in the data dir).",
)
LlmUrl = typer.Option(
    None, "--llm-url", help="OpenAI-compatible server, e.g. http://127.0.0.1:1234/v1 (default: $ANIMA_LLM_URL)."
)
Model = typer.Option(None, "--model", help="Model name on that server (default: $ANIMA_MODEL).")
LlmApi = typer.Option(None, "--llm-api", help="chat or completions (base models, continuation); default chat.")
Lang = typer.Option(
    None,
    "--lang",
    help="The web app's and the prompts' language: auto, en, ja or ru (default: "
    "$ANIMA_LANGUAGE, else the persona's config.yaml `language`, else auto).",
)
Thread = typer.Option("main", "--thread", help="Thread id (resume by using the same one).")


def _persona_name(value: str | None) -> str | None:
    """--name, else the setting `persona_name` (ANIMA_PERSONA_NAME, read by the settings: `config show` reports it)."""
    from persona.settings import run_value

    with starting():
        name: str | None = run_value("persona_name", value)
    return name


PersonaName = typer.Option(
    None,
    "--name",
    callback=_persona_name,
    help="A persona of a deployment (run.py personas list), with --db postgresql://… (default: $ANIMA_PERSONA_NAME).",
)


def located(data_dir: str | None, db: str | None) -> Settings:
    """Where the data is: --data-dir and --db, else ANIMA_DATA_DIR and ANIMA_DB_URL, else the defaults (the settings'
    one resolution; the data dir's own layer is read once it is open: `open_data`)."""
    from persona.settings import Overrides, load_settings

    with starting():
        return load_settings(overrides=Overrides.of(data_dir=data_dir, db_url=db))


def open_database(data_dir: str | None, db: str | None, name: str | None = None) -> Database:
    """The data dir's database (or, with `name`, that deployed persona's); one that cannot be opened stops the command
    with one message (cli/startup.py)."""
    from memory import Database

    where = located(data_dir, db)
    with starting():
        if name:
            return open_deployed(where.db_url, name)
        return Database.open(where.data_dir, where.db_url)


def open_deployed(db: str | None, name: str) -> Database:
    """A deployed persona's memory (its own schema of the deployment's database), after checking it is registered."""
    from memory import Database, DatabaseOpenError
    from memory.fleet import Fleet, schema_of

    if not db:
        raise DatabaseOpenError(f"--name {name}: give the deployment's database (--db postgresql://…)")
    fleet = Fleet.open(db)
    try:
        with fleet.registry() as registry:
            registry.require(name)
    finally:
        fleet.close()
    return Database.open(url=db, schema=schema_of(name))


def managers_of(
    database: Database, data_dir: str | None, db: str | None, settings: Settings | None = None, **more: Any
) -> ManagerFactory:
    """The command line's managers over an opened database: with the settings given, or those of the persona it
    belongs to, read when a manager first needs them (a listing reads none)."""
    from functools import cache

    from managers import ManagerDeps, ManagerFactory
    from persona.settings import Overrides, stored_settings

    if settings is not None:
        return ManagerFactory(database, ManagerDeps(settings=settings))

    @cache
    def deps() -> ManagerDeps:
        with starting():
            return ManagerDeps(settings=stored_settings(database, Overrides.of(data_dir=data_dir, db_url=db, **more)))

    return ManagerFactory(database, deps)


@contextmanager
def owner_unit_of(
    database: Database, data_dir: str | None, db: str | None, settings: Settings | None = None, **more: Any
) -> Iterator[Managers]:
    """One transaction of an opened database, its managers acting for the owner (the terminal is the owner's door)."""
    from managers.audience import OWNER

    with managers_of(database, data_dir, db, settings, **more).unit(OWNER) as house:
        yield house


@contextmanager
def owner_unit(data_dir: str | None, db: str | None, name: str | None = None, **more: Any) -> Iterator[Managers]:
    """One transaction of a data dir's database (or a deployed persona's), its managers acting for the owner (the
    terminal is the owner's door); the database is closed after."""
    database = open_database(data_dir, db, name)
    try:
        with owner_unit_of(database, data_dir, db, **more) as house:
            yield house
    finally:
        database.close()


def read_rows(
    data_dir: str | None,
    db: str | None,
    rows_of: Callable[[Managers], list[dict[str, Any]]],
    name: str | None = None,
) -> list[dict[str, Any]]:
    """Rows built from a data dir's database (or a deployed persona's) in one transaction (`rows_of(house)`)."""
    with owner_unit(data_dir, db, name) as house:
        return rows_of(house)


def print_listing(rows: Sequence[Mapping[str, Any]], as_json: bool, empty: str) -> bool:
    """Print `rows` as JSON, or say `empty` when there are none; True when nothing is left to print."""
    import json

    if as_json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return True
    if not rows:
        console.print(empty)
    return not rows


LINE_CHARS = 400


def preview(value: Any, limit: int = LINE_CHARS) -> str:
    """Model-written `value` as markup-safe text of at most `limit` characters, saying how much was left out (print it
    with highlight=False: Rich's highlighter takes seconds on long text)."""
    text = value if isinstance(value, str) else str(value)
    if len(text) > limit:
        text = f"{text[:limit]}… ({len(text) - limit:,} more characters)"
    return escape(text)


def open_data(
    data_dir: str | None, db: str | None, persona: str | None = None, **more: Any
) -> tuple[Database, Settings]:
    """The database of a data dir and the settings of the persona it belongs to (`more`: other flags given)."""
    from graph.services import open_settings
    from persona.settings import Overrides

    database = open_database(data_dir, db)
    try:
        with starting():
            return database, open_settings(
                database, Overrides.of(data_dir=data_dir, db_url=db, persona_dir=persona, **more)
            )
    except BaseException:
        database.close()
        raise


def open_memory(
    data_dir: str | None,
    db: str | None,
    persona: str | None,
    embed_url: str | None,
    embed_model: str | None,
    chroma_url: str | None,
) -> tuple[Database, Any]:
    from graph.services import open_memory_index

    database, settings = open_data(
        data_dir, db, persona, embed_url=embed_url, embed_model=embed_model, chroma_url=chroma_url
    )
    try:
        with starting():
            return database, open_memory_index(database, settings)
    except BaseException:
        database.close()
        raise


WebHost = typer.Option(
    None,
    "--host",
    show_default=False,
    help="Address the web app listens on (default: $ANIMA_WEB_HOST, else 127.0.0.1); beyond "
    "127.0.0.1 it needs ANIMA_API_TOKEN.",
)
WebPort = typer.Option(
    None,
    "--port",
    min=1,
    max=65535,
    show_default=False,
    help="Port of the web app (default: $ANIMA_WEB_PORT, else 8765).",
)
WebAllowedHosts = typer.Option(
    None,
    "--allowed-hosts",
    help="More names the web app answers to (comma-separated; *.domain for any under it; "
    "default $ANIMA_ALLOWED_HOSTS), "
    "e.g. its public name behind a reverse proxy. It always answers to localhost, "
    "127.0.0.1, [::1] and its --host; any other Host header is refused (DNS rebinding).",
)
