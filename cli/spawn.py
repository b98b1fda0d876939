"""`run.py spawn NAME --mode clone|trained|newborn [--from PERSONA]`: a child persona from a parent (persona/spawn.py);
the persona's own `persona.spawn` command does the same with its human's approval."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape

from cli.options import ChromaUrl, DataDir, DbUrl, console, err, open_data, owner_unit_of
from cli.startup import starting


def spawn(
    name: str = typer.Argument(..., help="The child's name."),
    mode: str = typer.Option(
        ...,
        "--mode",
        help="clone (all memory and vectors), trained (goals, concepts, "
        "llm_memory, insights) or newborn (persona files with a fresh identity).",
    ),
    parent: str | None = typer.Option(
        None, "--from", help="The parent's persona directory (default: the one the data dir was run with)."
    ),
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    chroma_url: str | None = ChromaUrl,
    directory: Path | None = typer.Option(
        None, "--dir", help="The child's persona directory (default: beside the parent's, or personas/NAME)."
    ),
    to_data_dir: Path | None = typer.Option(None, "--to-data-dir", help="The child's data dir (default: DATA-NAME)."),
    to_db: str | None = typer.Option(
        None,
        "--to-db",
        help="The child's database URL (default: SQLite in its "
        "data dir; with a PostgreSQL parent, a new database on the same server).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Spawn a child persona: its own persona directory, database and vectors; it records its parent."""
    from graph.services import open_memory_index
    from managers.spawn import open_child_index
    from memory import Database
    from memory.clock import utcnow
    from persona.spawn import MODES, SpawnError, default_places
    from persona.spawn import spawn as make_child

    if mode not in MODES:
        err.print(f"[red]spawn: --mode must be one of {', '.join(MODES)}, not {escape(mode)!r}[/]")
        raise typer.Exit(2)
    database, settings = open_data(data_dir, db, parent, chroma_url=chroma_url)
    child_db = parent_index = child_index = None
    try:
        assert settings.persona_dir is not None  # load_settings resolved it
        parent_dir = Path(settings.persona_dir)
        with starting():
            places = default_places(name, parent_dir, Path(settings.data_dir), database, create_database=to_db is None)
            child_dir = directory or places.persona_dir
            child_data = to_data_dir or places.data_dir
            child_db = Database.open(child_data, to_db or places.db_url)
        if mode == "clone":
            parent_index = open_memory_index(database, settings)
            child_index = open_child_index(child_db, Path(child_data), parent_index)
        report = make_child(
            name,
            mode,
            parent_dir=parent_dir,
            parent_db=database,
            child_dir=child_dir,
            child_db=child_db,
            now=utcnow(),
            parent_index=parent_index,
            child_index=child_index,
            progress=lambda line: err.print(f"  {escape(line)}", highlight=False),
        )

        with owner_unit_of(
            database, data_dir, db, settings
        ) as house:  # each in the other's peers: its own DID, its address, its port
            met = house.spawn.meet(
                name,
                mode,
                parent_dir=parent_dir,
                parent_db=database,
                child_db=child_db,
                child_data_dir=Path(child_data),
                child_persona_dir=report.persona_dir,
                postgres=child_db.is_postgres,
            )
    except (SpawnError, ValueError) as exc:
        err.print(f"[red]spawn: {escape(str(exc))}[/]")
        raise typer.Exit(1) from None
    finally:
        for index in (child_index, parent_index):
            if index is not None:
                index.close()
        if child_db is not None:
            child_db.close()
        database.close()
    if as_json:
        print(json.dumps(report.as_dict(), indent=2, ensure_ascii=False))
        return
    console.print(
        f"{escape(name)} ({mode}) spawned from {escape(report.parent['name'])}: "
        f"{sum(report.rows.values())} memory row(s), {report.vectors} vector(s)",
        highlight=False,
    )
    for note in report.notes:
        console.print(escape(note), highlight=False)
    command = f"python run.py --persona {child_dir} --data-dir {child_data} --port {met['port']}" + (
        f" --db {report.database}" if (to_db or places.db_url) else ""
    )
    console.print(
        f"its DID {met['did']}, its address {met['url']}; parent and child are each other's peers",
        highlight=False,
        emoji=False,
    )
    console.print(f"run it: {escape(command)} (or beside the parent's loop: spawn.autostart)", highlight=False)
