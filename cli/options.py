"""What the commands share: the options that say where a persona's data is, and opening it.

A data dir remembers the persona it was run with (graph/services.py), so `inspect`, `kb`, `persona show` and the
rest read that persona's settings without `--persona`.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import typer
from rich.console import Console
from rich.markup import escape

from cli.startup import starting
from graph.services import open_memory_index, open_settings
from memory import Database, DatabaseOpenError
from persona.settings import Settings

console = Console(stderr=False)
err = Console(stderr=True)

DataDir = typer.Option("data", "--data-dir", envvar="ANIMA_DATA_DIR", help="Where the database and checkpoints live.")
DbUrl = typer.Option(None, "--db", envvar="ANIMA_DB_URL",
                     help="Database URL (postgresql://… or a SQLite path); default <data-dir>/anima.sqlite.")
PersonaDir = typer.Option(None, "--persona", envvar="ANIMA_PERSONA_DIR",
                          help="Persona directory (default: the one this data dir was run with, else persona/default).")
EmbedUrl = typer.Option(None, "--embed-url", envvar="ANIMA_EMBED_URL",
                        help="OpenAI-compatible /v1 server for embeddings (default: embedded MiniLM).")
EmbedModel = typer.Option(None, "--embed-model", envvar="ANIMA_EMBED_MODEL")
ChromaUrl = typer.Option(None, "--chroma-url", envvar="ANIMA_CHROMA_URL",
                         help="Chroma server, e.g. http://127.0.0.1:8000 (default: embedded, in the data dir).")
Thread = typer.Option("main", "--thread", help="Thread id (resume by using the same one).")
PersonaName = typer.Option(None, "--name", envvar="ANIMA_PERSONA_NAME",
                           help="A persona of a deployment (run.py personas list), with --db postgresql://…")


def open_database(data_dir: str, db: Optional[str], name: Optional[str] = None) -> Database:
    """The data dir's database (or, with `name`, that deployed persona's); one that cannot be opened stops the command
    with one message (cli/startup.py)."""
    with starting():
        if name:
            return open_deployed(db, name)
        return Database.open(data_dir, db)


def open_deployed(db: Optional[str], name: str) -> Database:
    """A deployed persona's memory (its own schema of the deployment's database), after checking it is registered."""
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


def read_rows(data_dir: str, db: Optional[str], rows_of: Callable[[Any], list[dict[str, Any]]],
              name: Optional[str] = None) -> list[dict[str, Any]]:
    """Rows built from a data dir's database (or a deployed persona's) in one transaction (`rows_of(repos)`)."""
    database = open_database(data_dir, db, name)
    try:
        with database.unit() as repos:
            return rows_of(repos)
    finally:
        database.close()


def print_listing(rows: list[dict[str, Any]], as_json: bool, empty: str) -> bool:
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


def flags(**given: Any) -> dict[str, Any]:
    """Command-line settings that were given (None means: not on the command line)."""
    return {k: v for k, v in given.items() if v is not None}


def open_data(data_dir: str, db: Optional[str], persona: Optional[str] = None, **more: Any) -> tuple[Database, Settings]:
    """The database of a data dir and the settings of the persona it belongs to."""
    database = open_database(data_dir, db)
    try:
        with starting():
            return database, open_settings(database, flags(data_dir=data_dir, db_url=db, persona_dir=persona, **more))
    except BaseException:
        database.close()
        raise


def open_memory(data_dir: str, db: Optional[str], persona: Optional[str], embed_url: Optional[str],
                embed_model: Optional[str], chroma_url: Optional[str]):
    database, settings = open_data(data_dir, db, persona, embed_url=embed_url, embed_model=embed_model,
                                   chroma_url=chroma_url)
    try:
        with starting():
            return database, open_memory_index(database, settings)
    except BaseException:
        database.close()
        raise
WebHost = typer.Option("127.0.0.1", "--host", envvar="ANIMA_WEB_HOST",
                       help="Address the web app listens on; beyond 127.0.0.1 it needs ANIMA_API_TOKEN.")
WebPort = typer.Option(8765, "--port", envvar="ANIMA_WEB_PORT", min=1, max=65535, help="Port of the web app.")
WebAllowedHosts = typer.Option(None, "--allowed-hosts", envvar="ANIMA_ALLOWED_HOSTS",
                               help="More names the web app answers to (comma-separated; *.domain for any under it), "
                                    "e.g. its public name behind a reverse proxy. It always answers to localhost, "
                                    "127.0.0.1, [::1] and its --host; any other Host header is refused (DNS rebinding).")
