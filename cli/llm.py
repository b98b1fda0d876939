"""`run.py llm list|select|update`: the operator's side of the models chosen at run time (managers/models.py; the
persona has llm_registry.select/update, the web app its Controls page); persisted in the data dir, taken by a running loop at
its next tick."""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

import typer
from rich.markup import escape

from cli.options import DataDir, DbUrl, console, err, open_database, print_listing
from managers import Managers
from managers.models import ModelManager, RegistryError

app = typer.Typer(help="The models a persona thinks with: list them, choose the primary one, change their order.")


def _change(data_dir: Optional[str], db: Optional[str], change: Callable[[ModelManager], str]) -> None:
    database = open_database(data_dir, db)
    try:
        with database.unit(actor="human") as repos:
            said = change(Managers(repos).models)
    except RegistryError as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(1)
    finally:
        database.close()
    console.print(escape(said) + " (a running loop takes it at its next tick)")


@app.command("list")
def list_llms(data_dir: Optional[str] = DataDir, db: Optional[str] = DbUrl,
              as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """The registered models: priority, enabled, validator, chosen, last call."""
    database = open_database(data_dir, db)
    try:
        with database.unit() as repos:
            rows = Managers(repos).models.listing()
    finally:
        database.close()
    if print_listing(rows, as_json, "no models registered yet (run the persona once)"):
        return
    for row in rows:
        flags = ", ".join(f for f, on in (("chosen", row["selected"]), ("validator", row["is_validator"]),
                                           ("disabled", not row["enabled"])) if on)
        console.print(f"{escape(row['id'])}  {escape(row['provider'])} {escape(row['model'])}  priority {row['priority']}"
                      f"{'  [' + flags + ']' if flags else ''}", highlight=False)


@app.command("select")
def select_llm(llm_id: str = typer.Argument(..., help="The model to think with; 'auto' for the highest priority."),
               data_dir: Optional[str] = DataDir, db: Optional[str] = DbUrl) -> None:
    """Choose the primary model (the others stay as fallbacks)."""
    _change(data_dir, db, lambda models: models.select(None if llm_id == "auto" else llm_id))


@app.command("update")
def update_llm(llm_id: str = typer.Argument(...), data_dir: Optional[str] = DataDir, db: Optional[str] = DbUrl,
               priority: Optional[int] = typer.Option(None, "--priority", min=-1000, max=1000),
               enabled: Optional[bool] = typer.Option(None, "--enable/--disable"),
               validator: Optional[bool] = typer.Option(None, "--validator/--no-validator")) -> None:
    """Change a model's priority, switch it on or off, make it a validator or not."""
    if priority is None and enabled is None and validator is None:
        err.print("[red]llm update: give --priority, --enable/--disable or --validator/--no-validator[/]")
        raise typer.Exit(2)
    _change(data_dir, db, lambda models: models.update(llm_id, priority=priority, enabled=enabled,
                                                       is_validator=validator))
