"""Many personas: `run.py worker` runs the deployment's jobs; `run.py personas add|list|pause|resume|remove` manages
which personas should be thinking (graph/fleet/). Both need the deployment's PostgreSQL database (`--db`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from cli.options import (
    ChromaUrl,
    EmbedModel,
    EmbedUrl,
    LlmApi,
    LlmUrl,
    Model,
    PersonaDir,
    console,
    err,
    located,
    print_listing,
)
from cli.startup import StartupError, starting

if TYPE_CHECKING:
    from graph.fleet.personas import Deployment

app = typer.Typer(help="The personas of a deployment: which should be thinking (run.py worker runs them).")

FleetDb = typer.Option(None, "--db", help="The deployment's PostgreSQL URL (postgresql://…; default $ANIMA_DB_URL).")
NameArg = typer.Argument(..., help="The persona's name in the deployment (lowercase letters, digits, _).")


def deployment_db(db: str | None) -> str:
    """The deployment's database: --db, else ANIMA_DB_URL (the settings' one resolution)."""
    url = located(None, db).db_url
    if not url:
        raise StartupError("deployment", "give the deployment's database: --db postgresql://… (or ANIMA_DB_URL)")
    return url


def open_deployment(db: str | None) -> Deployment:
    from graph.fleet.personas import Deployment

    url = deployment_db(db)
    with starting():
        return Deployment.open(url)


def worker(
    db: str | None = FleetDb,
    chroma_url: str | None = ChromaUrl,
    concurrency: int = typer.Option(
        1, "--concurrency", min=1, max=256, help="Jobs this worker runs at once (threads; one persona never twice)."
    ),
    llm_url: str | None = LlmUrl,
    model: str | None = Model,
    llm_api: str | None = LlmApi,
    no_fallback: bool = typer.Option(False, "--no-fallback", help="With --llm-url: no embedded model as fallback."),
    embed_url: str | None = EmbedUrl,
    embed_model: str | None = EmbedModel,
    keep_open: int = typer.Option(
        256, "--keep-open", min=1, help="Personas kept open (warm) in this worker; the least recent close."
    ),
    poll_s: float = typer.Option(1.0, "--poll", min=0.1, help="Seconds between looks for due scheduled ticks."),
    verbose: bool = typer.Option(False, "--verbose", "-v"),
) -> None:
    """Run the deployment's jobs — every active persona's ticks, dreams, task sub-cycles, indexing and exports — until
    Ctrl-C or SIGTERM (the running jobs finish; a second signal stops at once). Start as many as you like, on any
    machine that reaches the database and the Chroma server: a killed worker's personas continue on the others."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    from graph.fleet.worker import run_worker
    from graph.services import EMBEDDED_CHROMA_REFUSED
    from persona.settings import Overrides

    overrides = Overrides.of(
        chroma_url=chroma_url,
        llm_url=llm_url,
        model=model,
        llm_api=llm_api,
        embedded=False if no_fallback else None,
        embed_url=embed_url,
        embed_model=embed_model,
    )
    with starting():
        from memory.fleet import Fleet
        from persona.settings import load_settings

        settings = load_settings(overrides=overrides)  # a bad flag: one line, exit 2
    if not settings.chroma_url:
        err.print(f"[red]{escape(EMBEDDED_CHROMA_REFUSED)}[/]")
        raise typer.Exit(2)
    url = deployment_db(db)
    with starting():
        Fleet.open(url).close()  # the database answers and is PostgreSQL
    if settings.embedded:
        from cli.run_playbook import install_model_with_progress

        install_model_with_progress(settings.cache_dir, settings.embedded_model)
    err.print(
        f"[bold]worker[/] · {concurrency} at a time · jobs from {escape(_masked(url))} · vectors on "
        f"{escape(settings.chroma_url)} (Ctrl-C stops after the running jobs)"
    )
    run_worker(url, overrides, concurrency=concurrency, keep_open=keep_open, poll_s=poll_s)


def _masked(url: str) -> str:
    from memory.db import masked

    return masked(url)


@app.command("add")
def personas_add(
    name: str = NameArg,
    db: str | None = FleetDb,
    persona: str | None = PersonaDir,
    playbook: str = typer.Option("repl", "--playbook", "-p", help="repl (chat) or epos (continuation)."),
) -> None:
    """Add a persona (its files from --persona, default the shipped one, are stored in the database) and start it."""
    deployment = open_deployment(db)
    try:
        with starting():
            row = deployment.add(name, persona, playbook)
    finally:
        deployment.close()
    console.print(f"added {escape(row.name)} ({escape(row.display_name)}): thinking as soon as a worker is free")


@app.command("list")
def personas_list(db: str | None = FleetDb, as_json: bool = typer.Option(False, "--json")) -> None:
    """Every persona of the deployment: state, ticks, when and where it last thought, when it thinks next."""
    from dataclasses import asdict

    deployment = open_deployment(db)
    try:
        rows = [asdict(row) for row in deployment.rows()]
    finally:
        deployment.close()
    if print_listing(rows, as_json, "no personas yet: run.py personas add NAME --db …"):
        return
    for row in rows:
        last = f"last {row['last_tick_at'][:19]} on {row['last_worker']}" if row["last_tick_at"] else "not yet"
        console.print(
            f"{row['name']}\t{row['state']}\t{escape(row['display_name'])}\t{row['playbook']}\t"
            f"{row['ticks']} tick(s)\t{escape(last)}",
            highlight=False,
            soft_wrap=True,
        )


@app.command("pause")
def personas_pause(name: str = NameArg, db: str | None = FleetDb) -> None:
    """Stop a persona's thinking (its waiting jobs are cancelled, its session saved); `resume` starts it again."""
    _change(db, name, "pause")


@app.command("resume")
def personas_resume(name: str = NameArg, db: str | None = FleetDb) -> None:
    """Start a paused persona again (a tick now, on the first free worker)."""
    _change(db, name, "resume")


def _change(db: str | None, name: str, verb: str) -> None:
    from managers.errors import NotFound

    deployment = open_deployment(db)
    try:
        row = getattr(deployment, verb)(name)
    except NotFound as exc:
        raise StartupError("no such persona", str(exc)) from exc
    finally:
        deployment.close()
    console.print(f"{escape(row.name)}: {row.state}")


@app.command("remove")
def personas_remove(
    name: str = NameArg,
    db: str | None = FleetDb,
    chroma_url: str | None = ChromaUrl,
    purge: bool = typer.Option(False, "--purge", help="Also delete its memory, checkpoints and vectors, for good."),
) -> None:
    """Take a persona out of the deployment (it thinks no more). Its memory stays in the database unless --purge."""
    from managers.errors import NotFound

    if purge and not chroma_url:
        err.print("--purge also deletes the persona's vectors: give the Chroma server (--chroma-url)")
        raise typer.Exit(2)
    deployment = open_deployment(db)
    try:
        deployment.remove(name, purge=purge, chroma_url=chroma_url)
    except NotFound as exc:
        raise StartupError("no such persona", str(exc)) from exc
    finally:
        deployment.close()
    console.print(f"removed {escape(name)}" + (" and deleted its memory" if purge else " (its memory is kept)"))
