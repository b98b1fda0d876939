"""`run.py llm list|select|update|add|remove`: the operator's side of the models chosen at run time (managers/models.py;
the
persona has llm_registry.select/update, the web app its Controls page); persisted in the data dir, taken by a running
loop at
its next tick."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from cli.options import DataDir, DbUrl, console, err, open_database, owner_unit_of, print_listing

if TYPE_CHECKING:
    from managers.models import ModelManager

app = typer.Typer(help="The models a persona thinks with: list them, choose the primary one, change their order.")


def _change(data_dir: str | None, db: str | None, change: Callable[[ModelManager], str]) -> None:
    from managers.models import RegistryError

    database = open_database(data_dir, db)
    try:
        with owner_unit_of(database, data_dir, db) as house:
            said = change(house.models)
    except RegistryError as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(1) from None
    finally:
        database.close()
    console.print(escape(said) + " (a running loop takes it at its next tick)")


@app.command("list")
def list_llms(
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """The registered models: priority, enabled, validator, chosen, last call."""
    database = open_database(data_dir, db)
    try:
        with owner_unit_of(database, data_dir, db) as house:
            rows = house.models.listing()
    finally:
        database.close()
    if print_listing(rows, as_json, "no models registered yet (run the persona once)"):
        return
    for row in rows:
        flags = ", ".join(
            f
            for f, on in (
                ("chosen", row["selected"]),
                ("validator", row["is_validator"]),
                ("disabled", not row["enabled"]),
            )
            if on
        )
        console.print(
            f"{escape(row['id'])}  {escape(row['provider'])} {escape(row['model'])}  priority {row['priority']}"
            f"{'  [' + flags + ']' if flags else ''}",
            highlight=False,
        )


@app.command("select")
def select_llm(
    llm_id: str = typer.Argument(..., help="The model to think with; 'auto' for the highest priority."),
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
) -> None:
    """Choose the primary model (the others stay as fallbacks)."""
    _change(data_dir, db, lambda models: models.select(None if llm_id == "auto" else llm_id))


@app.command("update")
def update_llm(
    llm_id: str = typer.Argument(...),
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    priority: int | None = typer.Option(None, "--priority", min=-1000, max=1000),
    enabled: bool | None = typer.Option(None, "--enable/--disable"),
    validator: bool | None = typer.Option(None, "--validator/--no-validator"),
) -> None:
    """Change a model's priority, switch it on or off, make it a validator or not."""
    if priority is None and enabled is None and validator is None:
        err.print("[red]llm update: give --priority, --enable/--disable or --validator/--no-validator[/]")
        raise typer.Exit(2)
    _change(
        data_dir, db, lambda models: models.update(llm_id, priority=priority, enabled=enabled, is_validator=validator)
    )


@app.command("add")
def add_llm(
    base_url: str = typer.Argument(..., help="The OpenAI-compatible API root, e.g. http://127.0.0.1:11434/v1"),
    model: str = typer.Argument(..., help="The model the server runs (its /models lists them)."),
    name: str | None = typer.Option(None, "--name", help="What to call it here (its id)."),
    api_key_env: str | None = typer.Option(
        None, "--api-key-env", help="An environment variable holding the key (kept by name)."
    ),
    ask_key: bool = typer.Option(
        False,
        "--api-key",
        help="Ask for the key (hidden); it is kept in a 0600 file of the data dir's secrets/, never in the database.",
    ),
    no_check: bool = typer.Option(False, "--no-check", help="Skip the health check (model list, one answer)."),
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
) -> None:
    """Add a model on an OpenAI-compatible server (Ollama, LM Studio, llama.cpp server, vLLM, a hosted API), after a
    health check; a running loop thinks with it from its next tick."""
    from managers.models import RegistryError

    api_key = typer.prompt("API key", hide_input=True) if ask_key else None
    database = open_database(data_dir, db)
    try:
        with owner_unit_of(database, data_dir, db) as house:
            row = house.models.add(
                base_url, model, name=name, api_key=api_key, api_key_env=api_key_env, check=not no_check
            )
    except RegistryError as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(1) from None
    finally:
        database.close()
    console.print(
        f"added {escape(row['id'])}: {escape(row['model'])}, priority {row['priority']} "
        "(a running loop takes it at its next tick)",
        highlight=False,
    )


@app.command("remove")
def remove_llm(
    llm_id: str = typer.Argument(..., help="A model added with `llm add` or the web app."),
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
) -> None:
    """Forget a model added at run time (and its key file)."""
    _change(data_dir, db, lambda models: models.remove(llm_id))


@app.command("local")
def local_servers(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """The model servers running on this machine (Ollama, LM Studio, llama.cpp server, vLLM…) and their models."""
    from llm.discovery import detect_local

    found = detect_local()
    rows = [{"name": s.name, "base_url": s.base_url, "models": s.models} for s in found]
    if print_listing(rows, as_json, "no model server found on loopback"):
        return
    for server in found:
        console.print(
            f"{escape(server.offer)}  [dim]run.py llm add {escape(server.base_url)} "
            f"{escape(server.models[0] if server.models else 'MODEL')}[/]",
            highlight=False,
        )
