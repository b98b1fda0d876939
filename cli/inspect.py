"""`run.py inspect`: what the persona did and is (graph/reports.py builds it), as text or JSON."""

from __future__ import annotations

import json

import typer
from rich.markup import escape

from cli.options import DataDir, DbUrl, PersonaDir, console, managers_of, open_data, preview


def inspect(
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    persona: str | None = PersonaDir,
    as_json: bool = typer.Option(False, "--json"),
    limit: int = typer.Option(10, "--limit", help="How many recent rows of each kind."),
) -> None:
    """What the persona did: ticks, threads, notes in/out, responses with reflex fields, LLM calls and tokens, drives,
    dreams, goals, tasks, sessions, approvals and the audit log of every consent decision."""
    from graph.reports import inspect_report
    from managers.audience import OWNER

    database, settings = open_data(data_dir, db, persona)
    try:
        with managers_of(database, data_dir, db, settings).reading(OWNER) as house:
            report = inspect_report(house, house.deps.clock(), limit, database.url)
    finally:
        database.close()
    if as_json:
        print(json.dumps(report, indent=2, ensure_ascii=False, default=str))
        return
    console.print(
        f"[bold]{report['database']}[/]: {report['ticks']['count']} ticks, "
        f"{report['llm']['totals']['calls']} LLM calls, "
        f"{report['llm']['totals']['prompt_tokens']}+{report['llm']['totals']['completion_tokens']} tokens"
    )
    spend = report["spend"]
    for label, row in (("today", spend["today"]), ("this hour", spend["hour"])):
        cost = f" · {row['cost']:.4f} {spend['currency']}" if row["cost"] is not None else ""
        console.print(
            f"spend {label}: {row['calls']} calls, {row['new_prompt_tokens']} new + {row['cached_tokens']} "
            f"cached prompt tokens, {row['completion_tokens']} completion tokens{cost}",
            highlight=False,
        )
    budget = spend["budget"]
    console.print(
        f"budget {budget['state']} (per day {budget['tokens_per_day']}, per hour {budget['tokens_per_hour']}); "
        f"{spend['quiet_ticks_today']} quiet ticks today (no model call)",
        highlight=False,
    )
    for t in report["threads"]:
        if t["parent_id"]:
            console.print(
                f"[magenta]{'  ' * t['depth']}⤷ {escape(t['label'])}[/] ({escape(t['id'])}) {t['status']} · "
                f"{t['messages']} messages · ratio {t['window_ratio']:g}"
                + (f" · {escape(t['error'])}" if t["error"] else "")
            )
    for r in report["responses"]:
        console.print(
            f"[cyan]tick {r['tick']}[/] novelty {r['novelty_score']} {r['emotions']} "
            f"{'STAGNANT ' if r['stagnation_flag'] else ''}{preview(r['content'], 200)}",
            highlight=False,
        )
    for n in report["notes"]["outgoing"]:
        console.print(f"[green]→ you:[/] {preview(n['text'], 2_000)}", highlight=False)
    for a in report["approvals"]["pending"]:
        console.print(
            f"[yellow]waiting for your approval {a['id']}:[/] {preview(a['type'], 80)} "
            f"{preview(json.dumps(a['args'], ensure_ascii=False), 160)}",
            highlight=False,
        )
    for e in report["audit"]:
        console.print(
            f"[dim]{e['at'][:19]} {e['decision']} by {e['actor']}: {escape(e['type'])} "
            f"({e['effect']}) {escape(e['reason'] or '')[:120]}[/]"
        )
