"""`run.py config show [--json]`: every effective setting of a run and where it came from — `…/config.yaml:27`,
`environment ANIMA_X`, `flag --x`, `data dir override` (the persona's own changes, the data dir's recorded persona),
`thread main's cycle` (what the persona set for one thread with its cycle.* and notes.* commands: it wins over the
rest for that thread) or `default`. Secrets (API keys, tokens, a URL's password) are masked."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.markup import escape

from cli.options import (
    ChromaUrl,
    DataDir,
    DbUrl,
    EmbedModel,
    EmbedUrl,
    Lang,
    LlmApi,
    LlmUrl,
    Model,
    PersonaDir,
    Thread,
    console,
    managers_of,
    open_data,
)
from cli.startup import DEBUG

app = typer.Typer(help="The run's settings: every effective value and where it came from.")


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


@app.command("show")
def config_show(
    ctx: typer.Context,
    persona: str | None = PersonaDir,
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    llm_url: str | None = LlmUrl,
    model: str | None = Model,
    llm_api: str | None = LlmApi,
    embed_url: str | None = EmbedUrl,
    embed_model: str | None = EmbedModel,
    chroma_url: str | None = ChromaUrl,
    lang: str | None = Lang,
    thread: str = Thread,
    as_json: bool = typer.Option(False, "--json", help="A JSON list of {name, value, source}."),
) -> None:
    """Every effective setting (defaults → the persona's config.yaml → the data dir's overrides → ANIMA_*
    environment → flags), then the thread's own cycle settings, with where its value came from; secrets masked."""
    database, settings = open_data(
        data_dir,
        db,
        persona,
        llm_url=llm_url,
        model=model,
        llm_api=llm_api,
        embed_url=embed_url,
        embed_model=embed_model,
        chroma_url=chroma_url,
        language=lang,
        debug=True if ctx.meta.get(DEBUG) else None,  # the app's global --debug (cli/startup.py)
    )
    try:
        with managers_of(database, data_dir, db, settings).reading() as house:
            overrides = dict(house.loop.cycle_overrides(thread))
    finally:
        database.close()
    source = f"thread {thread}'s cycle (the persona's cycle.* and notes.* commands)"
    rows = [
        (name, overrides[name], source) if name in overrides else (name, value, was)
        for name, value, was in settings.effective()
    ]
    if as_json:
        print(
            json.dumps(
                [{"name": name, "value": value, "source": source} for name, value, source in rows],
                indent=2,
                ensure_ascii=False,
                default=str,
            )
        )
        return
    width = max(len(name) for name, _, _ in rows)
    for name, value, source in rows:
        console.print(
            f"{name:<{width}}  {escape(_shown(value))}  [dim]({escape(source)})[/]", highlight=False, soft_wrap=True
        )
