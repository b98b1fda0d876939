"""`run.py memory anonymise|deanonymise`: the human's anonymisation of the persona's memory (managers/anonymise.py).

`anonymise` replaces names and places (the ones given with --name, and those found offline unless --no-auto) by
placeholders in every memory tier and the memory history; `--dry-run` lists what would be replaced, nothing changes.
The mapping is kept encrypted, owner-only, in the data dir's secrets; `deanonymise` — only here, on the owner's
terminal — puts the originals back with that key (or one the owner moved away: --key-file). Each is audited as the
human's decision."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from cli.options import (
    ChromaUrl,
    DataDir,
    DbUrl,
    EmbedModel,
    EmbedUrl,
    PersonaDir,
    console,
    err,
    open_data,
    owner_unit_of,
)
from cli.startup import starting

if TYPE_CHECKING:
    from managers import Managers
    from managers.anonymise import Anonymised

app = typer.Typer(help="The persona's memory as a whole: anonymise it on your request, and undo that.")


def _run(
    kind: str,
    action: Callable[[Managers], Anonymised],
    refused: type[Exception],
    code: int,
    data_dir: str | None,
    db: str | None,
    persona: str | None,
    embed_url: str | None,
    embed_model: str | None,
    chroma_url: str | None,
) -> Anonymised:
    """`action` in one unit of work as the human, audited as the human's decision when it changed memory; then the
    vectors of what it rewrote. What `refused` raises is one red line and exit `code`."""
    from graph.services import open_memory_index

    database, settings = open_data(
        data_dir, db, persona, embed_url=embed_url, embed_model=embed_model, chroma_url=chroma_url
    )
    try:
        with owner_unit_of(database, data_dir, db, settings) as house:
            result = action(house)
            if result.changed:
                now = house.deps.clock()
                house.consent.record(
                    thread_id="main",
                    tick=0,
                    cmd_key=f"human:{kind}:{now.isoformat()}",
                    type=f"memory.{kind}",
                    effect="modify_self",
                    decision="executed",
                    actor="human",
                    reason=f"my human's own request: {len(result.mapping)} name(s), {result.rows} "
                    f"row(s), {result.history} history entries",
                    now=now,
                )
        if result.changed and result.change is not None:
            from graph.forgetting import finish_at

            with starting():
                index = open_memory_index(database, settings)
            try:  # the stores beyond the unit: the checkpoints, the vectors, the files' free pages
                finished = finish_at(result.change, db=database, data_dir=settings.data_dir, memory=index)
            finally:
                index.close()
            result.finished = (finished.checkpoints, finished.vectors)
        return result
    except refused as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(code) from None
    finally:
        database.close()


@app.command("anonymise")
def anonymise(
    name: list[str] | None = typer.Option(None, "--name", help="A name or place to replace (repeat)."),
    keep: list[str] | None = typer.Option(None, "--keep", help="A found name to leave as it is (repeat)."),
    tier: list[str] | None = typer.Option(None, "--tier", help="Only this tier (repeat; default all)."),
    auto: bool = typer.Option(True, "--auto/--no-auto", help="Also replace the names found offline."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be replaced; change nothing."),
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    persona: str | None = PersonaDir,
    embed_url: str | None = EmbedUrl,
    embed_model: str | None = EmbedModel,
    chroma_url: str | None = ChromaUrl,
) -> None:
    """Replace names and places in the persona's memory by placeholders (reversible only with the owner's key)."""
    result = _run(
        "anonymise",
        lambda house: house.anonymise.anonymise(
            names=name or [], keep=keep or [], tiers=tier or None, auto=auto, dry_run=dry_run
        ),
        ValueError,
        2,
        data_dir,
        db,
        persona,
        embed_url,
        embed_model,
        chroma_url,
    )
    if not result.mapping:
        console.print("nothing to anonymise")
        return
    for original, placeholder in result.mapping.items():
        console.print(f"{escape(placeholder)} ← {escape(original)}", highlight=False)
    if dry_run:
        console.print(f"dry run: {len(result.mapping)} name(s) would be replaced; nothing changed")
        return
    console.print(
        f"anonymised: {len(result.mapping)} name(s) in {result.rows} row(s) "
        f"({', '.join(f'{t} {n}' for t, n in sorted(result.tiers.items()))}); {result.history} history "
        f"entries rewritten; {_beyond(result)}; the mapping is encrypted in {result.saved}"
    )


@app.command("deanonymise")
def deanonymise(
    key_file: Path | None = typer.Option(None, "--key-file", help="The key, if you moved it away."),
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    persona: str | None = PersonaDir,
    embed_url: str | None = EmbedUrl,
    embed_model: str | None = EmbedModel,
    chroma_url: str | None = ChromaUrl,
) -> None:
    """Put the originals back (the owner's key opens the saved mappings)."""
    from managers.anonymise import AnonymisationError, AnonymisationManager

    result = _run(
        "deanonymise",
        lambda house: house.anonymise.restore(key_file=key_file),
        AnonymisationError,
        1,
        data_dir,
        db,
        persona,
        embed_url,
        embed_model,
        chroma_url,
    )
    AnonymisationManager.forget(result.consumed)
    console.print(
        f"restored: {len(result.mapping)} name(s) in {result.rows} row(s); {result.history} history "
        f"entries rewritten; {_beyond(result)}"
    )


def _beyond(result: Anonymised) -> str:
    """What changed beyond the tiers: the other tables, the signed rows forgotten, the checkpoints, the vectors."""
    tables = ", ".join(f"{t} {n}" for t, n in sorted(result.swept.items())) or "none"
    signed = sum(result.forgotten.values())
    checkpoints, vectors = result.finished
    return (
        f"other tables: {tables}"
        + (f"; {signed} signed container(s) forgotten" if signed else "")
        + f"; {checkpoints} checkpoint row(s) rewritten; {vectors} memories embedded again"
    )
