"""`run.py persona new|show`: scaffold a persona directory; show the prompt it assembles."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from cli.options import DataDir, DbUrl, PersonaDir, Thread, console, err
from cli.run_playbook import install_model_with_progress
from cli.startup import preflight, starting

app = typer.Typer(help="Persona directories: scaffold one, show the prompt it assembles.")


@app.command("new")
def persona_new(
    name: str = typer.Argument(..., help="The persona's name."),
    directory: Path | None = typer.Option(None, "--dir", help="Where to create it (default personas/NAME)."),
) -> None:
    """Scaffold a persona from the default one, renamed; edit its files, then run with --persona DIR."""
    from persona import PersonaError
    from persona.scaffold import scaffold_persona, slug

    target = directory or Path("personas") / slug(name)
    try:
        persona = scaffold_persona(name, target)
    except PersonaError as exc:
        err.print(f"[red]persona new: {escape(str(exc))}[/]", soft_wrap=True)
        raise typer.Exit(1) from None
    console.print(
        f"created {target} ({len(persona.files)} bootstrap files, {len(persona.skills)} skills)", soft_wrap=True
    )
    console.print(f"edit its files, then: python run.py --persona {target}", soft_wrap=True)


@app.command("show")
def persona_show(
    persona: str | None = PersonaDir,
    layers: bool = typer.Option(False, "--layers", help="Only each layer's size, in assembly order."),
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    thread: str = Thread,
) -> None:
    """The prompt the next tick would send (chat mode), assembled from the persona files and the memory."""
    from langgraph.runtime import Runtime

    from graph.services import open_services
    from nodes.context import AnimaContext
    from nodes.state import TickState
    from nodes.steps.s04_prepare_context import prepare_context
    from persona.settings import Overrides

    given = Overrides.of(data_dir=data_dir, db_url=db, persona_dir=persona)
    settings = preflight(given)
    install_model_with_progress(settings.cache_dir, settings.embedded_model)
    with starting():
        services = open_services(given)
    try:
        with services.managers.reading() as house:
            tick = house.threads.next_tick(thread)
        result = prepare_context(
            TickState(thread_id=thread, root_thread=thread, tick=tick, mode="chat"),
            Runtime(context=AnimaContext(services=services)),
        )
    finally:
        services.db.close()
    report = result["context_report"]
    if layers:
        for layer in report.get("layers", []):
            where = "system" if layer["system"] else "user"
            console.print(f"{layer['layer']:<12} {where:<6} {layer['items']:>3} item(s) {layer['tokens']:>6} tokens")
        console.print(
            f"{'total':<12} {'':<6} {'':>11} {result['prompt_tokens']:>6} tokens of a "
            f"{report['budget_tokens']}-token budget"
        )
        for drop in report.get("dropped", []):
            console.print(f"[yellow]dropped: {escape(drop)}[/]")
        for note in services.persona.truncated:
            console.print(f"[yellow]left out: {escape(note)}[/]")
        return
    for message in result["prompt_messages"]:
        console.print(f"[bold]── {message['role']} ──[/]")
        console.print(escape(message["content"]))
