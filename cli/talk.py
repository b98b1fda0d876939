"""`run.py say`: a note to the persona, from another terminal while it runs (or to a deployed persona: `--name`,
which wakes it at once on a free worker)."""

from __future__ import annotations

import typer

from cli.options import DataDir, DbUrl, PersonaName, console, open_database, owner_unit_of


def say(
    text: str = typer.Argument(..., help="What to tell the persona."),
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    priority: int = typer.Option(1, "--priority", help="Higher is more urgent."),
    tags: list[str] = typer.Option([], "--tag", help="Tags for the note (repeatable)."),
    name: str | None = PersonaName,
) -> None:
    """Post a note to the persona (works while a run is going in another process)."""
    from managers.conversation import Words
    from managers.errors import Refused
    from memory.note_kinds import Door

    database = open_database(data_dir, db, name)
    try:
        with owner_unit_of(database, data_dir, db) as house:  # the terminal is the owner's own door
            note_id = house.conversation.hear(Words(text, door=Door.CLI, priority=priority, tags=tags)).note_id
    except Refused as refused:
        console.print(f"[red]not posted:[/red] {refused}")
        raise typer.Exit(2) from None
    finally:
        database.close()
    if name:
        from cli.fleet import open_deployment

        deployment = open_deployment(db)
        try:
            deployment.wake(name)
        finally:
            deployment.close()
        console.print(f"note {note_id} posted to {name}; it thinks about it now, on the first free worker.")
        return
    console.print(f"note {note_id} posted; the next tick will see it.")
