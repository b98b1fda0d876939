"""The human's side of consent: `run.py approvals`, `approve ID`, `deny ID --reason …`; `run.py tainted` and
`trust ID` for the rows written from untrusted text (managers/consent.py).

An approved command runs once, at the persona's next tick; a denial and its reason reach the persona's next prompt.
A trusted row is shown as the persona's own from its next tick.
"""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.markup import escape

from cli.options import DataDir, DbUrl, PersonaName, console, err, owner_unit, preview, print_listing, read_rows


def approvals(
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    as_json: bool = typer.Option(False, "--json"),
    show_all: bool = typer.Option(False, "--all", help="Also the decided ones (newest first)."),
    limit: int = typer.Option(50, "--limit"),
    name: str | None = PersonaName,
) -> None:
    """The commands waiting for your approval (modify_self / external: identity, config, deletes, …)."""
    from graph.reports import approval_row

    rows = read_rows(
        data_dir,
        db,
        lambda house: [approval_row(a) for a in house.consent.listing(None if show_all else "pending", limit)],
        name,
    )
    if print_listing(rows, as_json, "no approvals yet" if show_all else "nothing waits for your approval"):
        return
    for r in rows:
        decided = f" · {r['status']} by {r['decided_by']}" if r["decided_by"] else ""
        console.print(
            f"[bold]{r['id']}[/] {r['status']:<8} {preview(r['type'], 80)} "
            f"{preview(json.dumps(r['args'], ensure_ascii=False), 200)} · {r['effect']} · tick {r['tick']} "
            f"({escape(r['thread_id'])}){decided}",
            soft_wrap=True,
            highlight=False,
        )
        if r["description"]:
            console.print(
                f"    why the persona wants it: {preview(r['description'], 500)}", soft_wrap=True, highlight=False
            )
        _sources(r["untrusted_sources"], "it had read untrusted text")


def _sources(sources: list[dict[str, Any]], said: str) -> None:
    for source in sources:
        via = f" (via {escape(preview(source['via'], 80))})" if source.get("via") else ""
        console.print(
            f"    [yellow]{said}[/] from {escape(source['origin'])} {escape(preview(source['ref'], 120))}"
            f"{via}: {escape(preview(source.get('excerpt', ''), 200))}",
            soft_wrap=True,
            highlight=False,
        )


def tainted(
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    as_json: bool = typer.Option(False, "--json"),
    limit: int = typer.Option(50, "--limit"),
    name: str | None = PersonaName,
) -> None:
    """The rows written from untrusted text (a guest's, a peer's, a feed's words): fenced with their source in every
    prompt, and a tick that shows one asks you before it changes what is in every prompt or writes to a third person."""
    from graph.reports import taint_row

    rows = read_rows(data_dir, db, lambda house: [taint_row(t, text) for t, text in house.consent.tainted(limit)], name)
    if print_listing(rows, as_json, "nothing written from untrusted text"):
        return
    for r in rows:
        console.print(
            f"[bold]{r['id']}[/] {escape(r['tier'])} {escape(r['ref'])} · tick {r['tick']} "
            f"({escape(str(r['thread_id']))}): {escape(preview(r['text'], 300))}",
            soft_wrap=True,
            highlight=False,
        )
        _sources(r["untrusted_sources"], "its words came")


def trust(
    taint_id: int = typer.Argument(..., help="The tainted row's id (run.py tainted)."),
    reason: str = typer.Option("", "--reason", help="A note kept in the audit log."),
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    name: str | None = PersonaName,
) -> None:
    """Trust a row written from untrusted text: from the next tick it is the persona's own (kept in the audit log)."""
    from managers.consent import ApprovalError

    try:
        with owner_unit(data_dir, db, name) as house:
            row = house.consent.trust(taint_id, by="owner (cli)", reason=reason, now=house.deps.clock())
    except ApprovalError as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(1) from None
    console.print(f"trusted {row.tier} {row.ref}; from the next tick it is the persona's own", highlight=False)


def _answer(
    approval_id: int, approve: bool, reason: str, data_dir: str | None, db: str | None, name: str | None = None
) -> None:
    from managers.consent import DOCUMENT_APPROVAL, ApprovalError

    try:
        with owner_unit(data_dir, db, name) as house:
            row = house.consent.answer(
                approval_id, approve=approve, by="owner (cli)", reason=reason, now=house.deps.clock()
            )
    except ApprovalError as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(1) from None
    if name:  # a deployed persona: its next tick (which runs what was approved, or reads why not) now
        from cli.fleet import open_deployment

        deployment = open_deployment(db)
        try:
            deployment.wake(name)
        finally:
            deployment.close()
    if row.type == DOCUMENT_APPROVAL:  # settled at once (managers/consent.py)
        console.print(
            f"{'approved' if approve else 'denied'} {approval_id} ({row.type}): "
            f"{escape(row.result or 'the document stays a reference; its kept copy is deleted')}",
            soft_wrap=True,
            highlight=False,
        )
    elif approve:
        console.print(f"approved {approval_id} ({row.type}); it runs once, at the persona's next tick")
    else:
        console.print(f"denied {approval_id} ({row.type}); the persona sees the denial in its next prompt")


def approve(
    approval_id: int = typer.Argument(..., help="The approval's id (run.py approvals)."),
    reason: str = typer.Option("", "--reason", help="A note kept in the audit log."),
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    name: str | None = PersonaName,
) -> None:
    """Approve a waiting command: it runs exactly once, at the next tick."""
    _answer(approval_id, True, reason, data_dir, db, name)


def deny(
    approval_id: int = typer.Argument(..., help="The approval's id (run.py approvals)."),
    reason: str = typer.Option("", "--reason", help="Why — the persona reads it in its next prompt."),
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    name: str | None = PersonaName,
) -> None:
    """Deny a waiting command: it never runs, and the persona is told why."""
    _answer(approval_id, False, reason, data_dir, db, name)
