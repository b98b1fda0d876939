"""`run.py playbook check|schema|draw`: the playbook language's tools (graph/playbook/)."""

from __future__ import annotations

from pathlib import Path

import typer

from cli.options import console, err

app = typer.Typer(help="Check, draw and describe playbooks.")


@app.command("check")
def playbook_check(files: list[Path] = typer.Argument(..., help="Playbook YAML files.")) -> None:
    """Validate playbooks; errors name the file, the line and the field."""
    from graph.playbook import PlaybookError, load_playbook

    failed = False
    for path in files:
        try:
            load_playbook(path)
            console.print(f"{path}: ok")
        except PlaybookError as exc:
            failed = True
            for issue in exc.issues:
                err.print(issue)
    raise typer.Exit(1 if failed else 0)


@app.command("schema")
def playbook_schema() -> None:
    """Print the playbook JSON Schema (for editors)."""
    from graph.playbook import playbook_json_schema

    print(playbook_json_schema())


@app.command("draw")
def playbook_draw(file: str = typer.Argument(..., help="Playbook file or shipped name.")) -> None:
    """Print the compiled graph as Mermaid (Stelis regions and subplaybooks as subgraphs)."""
    from graph.compiler import build_graph
    from graph.playbook import PlaybookError, load_playbook, resolve_playbook_path

    try:
        print(build_graph(load_playbook(resolve_playbook_path(file))).compile().get_graph(xray=True).draw_mermaid())
    except PlaybookError as exc:
        err.print(str(exc))
        raise typer.Exit(1) from None
