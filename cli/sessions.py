"""`run.py sessions list|export|revive`: every run of a loop, saved at stop (managers/sessions.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from cli.options import (
    DataDir,
    DbUrl,
    LlmUrl,
    Model,
    PersonaDir,
    PersonaName,
    console,
    err,
    open_database,
    owner_unit_of,
    print_listing,
    read_rows,
)
from cli.run_playbook import run

app = typer.Typer(help="Sessions: every run of a loop, saved at stop; export one, or revive it in a new thread.")


@app.command("list")
def sessions_list(
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    limit: int = typer.Option(20, "--limit"),
    as_json: bool = typer.Option(False, "--json"),
    name: str | None = PersonaName,
) -> None:
    """Every run of a loop: thread, status (running, stopped, killed), ticks and times."""
    from graph.reports import session_row

    rows = read_rows(data_dir, db, lambda house: [session_row(s) for s in house.sessions.listing(limit)], name)
    if print_listing(rows, as_json, "no sessions yet"):
        return
    for r in rows:
        revived = f" · revived from {r['revived_from']}" if r["revived_from"] else ""
        console.print(
            f"[bold]{r['id']}[/]\t{escape(r['thread_id'])}\t{r['playbook']}\t{r['status']}\tticks "
            f"{r['first_tick'] + 1}–{r['last_tick']}\t{r['started_at'][:16]} → {(r['stopped_at'] or '…')[:16]}"
            f"{revived}",
            soft_wrap=True,
        )


@app.command("export")
def sessions_export(
    session_id: int = typer.Argument(...),
    out: Path = typer.Option(Path("."), "--out", help="Directory for the four files."),
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    name: str | None = PersonaName,
) -> None:
    """Write session-ID.json (everything), session-ID.md (the transcript) and the thought log — one record per
    thought, message, note and diary entry — as session-ID.csv and session-ID.jsonl. A deployed persona's (`--name`) is
    made by a worker between its ticks."""
    from managers.sessions import trace_csv, trace_jsonl

    if name:
        data, markdown = _export_deployed(db, name, session_id)
    else:
        database = open_database(data_dir, db)
        try:
            with owner_unit_of(database, data_dir, db) as house:
                data, markdown = house.sessions.export(session_id)
        except LookupError as exc:
            err.print(f"[red]{escape(str(exc))}[/]")
            raise typer.Exit(1) from None
        finally:
            database.close()
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "json": json.dumps(data, indent=2, ensure_ascii=False),
        "md": markdown,
        "csv": trace_csv(data),
        "jsonl": trace_jsonl(data),
    }
    for suffix, text in files.items():
        (out / f"session-{session_id}.{suffix}").write_text(text, encoding="utf-8")
    console.print("\n".join(str(out / f"session-{session_id}.{suffix}") for suffix in files), soft_wrap=True)


def _export_deployed(db: str | None, name: str, session_id: int) -> tuple[dict[str, Any], str]:
    from cli.fleet import open_deployment
    from memory.fleet import FleetError

    open_database("", db, name).close()  # a registered persona of this deployment, or one line and exit 2
    deployment = open_deployment(db)
    try:
        with err.status(f"exporting session {session_id} of {name} on a worker…"):
            result = deployment.export_session(name, session_id)
    except FleetError as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(1) from None
    finally:
        deployment.close()
    return result["json"], result["markdown"]


@app.command("revive")
def sessions_revive(
    session_id: int = typer.Argument(...),
    ticks: str = typer.Option("forever", "--ticks"),
    start: bool = typer.Option(True, "--run/--no-run", help="Start the loop on the new thread."),
    persona: str | None = PersonaDir,
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    llm_url: str | None = LlmUrl,
    model: str | None = Model,
    no_fallback: bool = typer.Option(False, "--no-fallback"),
) -> None:
    """Start a new thread seeded with the session's saved context (its last thoughts): the persona remembers."""
    from memory.clock import utcnow
    from persona.settings import Overrides

    database = open_database(data_dir, db)
    try:
        with owner_unit_of(database, data_dir, db) as house:
            sessions = house.sessions
            thread_id = sessions.revive(session_id, utcnow())
            revived = sessions.get(session_id)  # revive found it
            playbook = (revived.playbook if revived is not None else None) or "repl"
    except (LookupError, ValueError) as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(1) from None
    finally:
        database.close()
    console.print(f"session {session_id} revived as thread {thread_id}", soft_wrap=True)
    if not start:
        console.print(f"continue it with: python run.py --playbook {playbook} --thread {thread_id}", soft_wrap=True)
        return
    run(
        playbook=playbook,
        inputs=[],
        ticks=ticks,
        thread=thread_id,
        overrides=Overrides.of(
            persona_dir=persona,
            data_dir=data_dir,
            db_url=db,
            llm_url=llm_url,
            model=model,
            embedded=False if no_fallback else None,
        ),
    )
