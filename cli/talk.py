"""`run.py say`: a note to the persona, from another terminal while it runs."""

from __future__ import annotations

from typing import Optional

import typer

from cli.options import DataDir, DbUrl, console, open_database


def say(text: str = typer.Argument(..., help="What to tell the persona."), data_dir: str = DataDir, db: Optional[str] = DbUrl,
        priority: int = typer.Option(1, "--priority", help="Higher is more urgent."),
        tags: list[str] = typer.Option([], "--tag", help="Tags for the note (repeatable).")) -> None:
    """Post a note to the persona (works while a run is going in another process)."""
    database = open_database(data_dir, db)
    try:
        with database.unit() as repos:
            note_id = repos.notes.add(text, source="user", priority=priority, tags=tags).id
    finally:
        database.close()
    console.print(f"note {note_id} posted; the next tick will see it.")
