"""process and scripts (HMP `process list/start/stop/mark/cleanup`, `agent_scripts`): scripts the persona writes
are data until it runs one; running one leaves the process, so `process.start` is `external` (consent every time).

A run goes to a sandbox (reach/sandbox.py: a bubblewrap jail — read-only system, no data dir, home or secrets,
no network unless the operator lists the script in `scripts.network` — its own process group, working directory
`<data dir>/sandbox/run-N` (`/sandbox` inside, the only place it can write), a bare environment with no inherited
secret, address-space, CPU and file limits, a wall-clock timeout) on a
background thread (nodes/background.py) once the command has committed. Its process_log row is `in_progress`
while it runs and then says how it ended, with its output cut to `scripts.output_chars`; the next prompt shows
that (fenced as data) and closes the row, and an idle loop wakes for it. Scripts are off unless the operator turns
them on (config.yaml `scripts.enabled`; `sh` only when listed in `scripts.languages`), and off while the jail cannot
run (no bwrap: "scripts need bubblewrap"), unless the operator chose `scripts.jail: none`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from nodes.commands.args import Args, Description, Id, Limit, lowered, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg
from reach import budget
from reach.sandbox import jail_problem

FAMILY = Family("process", "my scripts and the processes they run",
                compact=True, abouts={"scripts": "scripts I write, kept as data", "process": "my scripts running in a sandbox, and their results"})

ScriptName = Annotated[str, StringConstraints(strip_whitespace=True, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
Code = Annotated[str, StringConstraints(min_length=1, max_length=19_000)]
ScriptArg = Annotated[str, StringConstraints(max_length=500)]


class ScriptNameArgs(Args):
    name: ScriptName = Field(validation_alias=names("name", "script"))


class ScriptAddArgs(ScriptNameArgs):
    code: Code = Field(validation_alias=names("code", "source", "text"))
    language: Annotated[Literal["python", "sh"], lowered] = "python"
    description: Description = ""
    replace: bool = False


class StartArgs(Args):
    script: ScriptName = Field(validation_alias=names("script", "name"))
    args: list[ScriptArg] = Field(default_factory=list, max_length=32, validation_alias=names("args", "argv"))
    timeout_s: float | None = Field(None, gt=0, le=86_400)
    memory_mb: int | None = Field(None, ge=64, le=65_536)


class ProcessIdArgs(Args):
    id: Id = Field(validation_alias=names("id", "process", "process_id"))


class MarkArgs(ProcessIdArgs):
    status: Annotated[Literal["close", "ok", "warning", "error"], lowered] = "close"


class ProcessListArgs(Args):
    all: bool = False
    limit: Limit = 10


class CleanupArgs(Args):
    days: float = Field(7.0, ge=0, le=36_500, validation_alias=names("days", "older_than_days"))


def scripts_off(settings: Any) -> str | None:
    if not settings.scripts.enabled:
        return "scripts are off (the operator turns them on: config.yaml scripts.enabled)"
    if settings.scripts.jail == "bwrap":  # fail closed: no jail, no run (tried once per process)
        return jail_problem()
    return None


@FAMILY.command("scripts.list", "{}  (the scripts I wrote)", effect="read", aliases=("agent_scripts.list",))
def list_scripts(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.repos.scripts.list()
    lines = [f"- {s.name} ({s.language}, {len(s.code):,} chars, run {s.runs}×): {s.description or '(no description)'}"
             for s in rows]
    return CommandResult("\n".join(lines) or "no scripts (scripts.add)", show=True)


@FAMILY.command("scripts.read", '{"name": "count_words"}', args=ScriptNameArgs, effect="read")
def read_script(cmd: Command, ctx: CommandContext) -> CommandResult:
    script = ctx.repos.scripts.get(arg(cmd, "name"))
    return CommandResult(f"script {script.name} ({script.language}): {script.description}\n{script.code}", show=True)


@FAMILY.command("scripts.add", '{"name": "count_words", "language": "python", "code": "print(…)", "description": "…"}  '
                '(stored, not run; {"replace": true} rewrites one)', args=ScriptAddArgs, effect="write_self",
                aliases=("agent_scripts.add",), prompt_tier="scripts")
def add_script(cmd: Command, ctx: CommandContext) -> CommandResult:
    name, language, code = arg(cmd, "name"), arg(cmd, "language", default="python"), str(arg(cmd, "code"))
    limit = ctx.settings.scripts.max_code_chars
    if len(code) > limit:
        raise CommandError(f"scripts.add: the code is {len(code):,} characters; at most {limit:,}")
    try:
        existing = ctx.repos.scripts.get(name)
    except LookupError:
        existing = None
    if existing is not None and not arg(cmd, "replace", default=False, kind=bool):
        raise CommandError(f"scripts.add: I have a script {name!r} already; {{\"replace\": true}} rewrites it")
    ctx.repos.scripts.save(name, language, code, str(arg(cmd, "description", default="")))
    off = "" if language in ctx.settings.scripts.languages else f" (note: {language} scripts are not enabled here)"
    return CommandResult(f"script {name} {'rewritten' if existing else 'stored'}; process.start "
                         f"{{\"script\": \"{name}\"}} runs it{off}")


@FAMILY.command("scripts.delete", '{"name": "count_words"}  (archives it; needs my human\'s approval)', args=ScriptNameArgs,
                effect="modify_self", aliases=("agent_scripts.delete",))
def delete_script(cmd: Command, ctx: CommandContext) -> CommandResult:
    script = ctx.repos.scripts.get(arg(cmd, "name"))
    ctx.repos.scripts.archive(script.id)
    return CommandResult(f"script {script.name} archived; memory.restore {{\"tier\": \"script\", \"ref\": "
                         f"\"{script.id}\"}} brings it back")


@FAMILY.command("process.start", '{"script": "count_words", "args": ["notes.txt"], "timeout_s": 60}  (runs my script '
                'in a sandbox; leaves the process: needs approval)', args=StartArgs, effect="external",
                unavailable=scripts_off)
def start_process(cmd: Command, ctx: CommandContext) -> CommandResult:
    config = ctx.settings.scripts
    script = ctx.repos.scripts.get(arg(cmd, "script"))
    if script.language not in config.languages:
        raise CommandError(f"process.start: {script.language} scripts are not enabled here "
                           f"(config.yaml scripts.languages: {', '.join(config.languages)})")
    running = len(ctx.repos.runs.with_status("pending", "running"))
    if running >= config.max_running:
        raise CommandError(f"process.start: {running} of at most {config.max_running} processes are running already")
    timeout = min(float(arg(cmd, "timeout_s", default=config.timeout_s)), config.max_timeout_s)
    memory = min(int(arg(cmd, "memory_mb", default=config.memory_mb)), config.max_memory_mb)
    row = ctx.repos.processes.add(f"process:{script.name}", f"script {script.name} waits to start", status="pending",
                                  thread_id=ctx.thread_id, tags=["background", "script"], llm_id=ctx.llm_id,
                                  task_id=ctx.task_id)
    run = ctx.repos.runs.add(row.id, "script", thread_id=ctx.thread_id, script_id=script.id,
                             spec={"script": script.name, "args": list(arg(cmd, "args", default=[])), "timeout_s": timeout,
                                   "memory_mb": memory, "output_chars": config.output_chars})
    script.runs = int(script.runs or 0) + 1
    background = ctx.services.background()
    ctx.then(lambda: background.launch(run.id))
    network = "with network" if config.jail == "none" or script.name in config.network else "no network"
    return CommandResult(f"process {row.id} started: script {script.name} (at most {timeout:g} s, {memory} MB, "
                         f"{network}); its result will appear under my open processes")


def _run_line(process, run) -> str:
    state = run.status if run is not None else process.status
    return f"[process {process.id} {process.name}: {state}] {budget(process.value, 300)}"


@FAMILY.command("process.list", '{"all": false, "limit": 10}  (my processes: the open ones, or every recent one)',
                args=ProcessListArgs, effect="read")
def list_processes(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.repos.processes.listing(ctx.thread_id, open_only=not arg(cmd, "all", default=False, kind=bool),
                                       limit=arg(cmd, "limit", default=10, kind=int))
    return CommandResult("\n".join(_run_line(p, ctx.repos.runs.of_process(p.id)) for p in rows) or "no processes",
                         show=True)


@FAMILY.command("process.stop", '{"id": 12}  (stops a running script)', args=ProcessIdArgs, effect="write_self")
def stop_process(cmd: Command, ctx: CommandContext) -> CommandResult:
    process_id = arg(cmd, "id", kind=int)
    run = ctx.repos.runs.of_process(process_id)
    if run is None or run.kind != "script":
        raise CommandError(f"process.stop: process {process_id} is not a script I started")
    if run.status not in ("pending", "running"):
        return CommandResult(f"process {process_id} is not running ({run.status})")
    background = ctx.services.background()
    ctx.then(lambda: background.stop(run.id))
    return CommandResult(f"process {process_id} is being stopped")


@FAMILY.command("process.mark", '{"id": 12, "status": "close"}  (mark a process as dealt with)', args=MarkArgs,
                effect="write_self")
def mark_process(cmd: Command, ctx: CommandContext) -> CommandResult:
    process_id, status = arg(cmd, "id", kind=int), arg(cmd, "status", default="close")
    row = ctx.repos.processes.get(process_id)
    if row is None:
        raise CommandError(f"process.mark: no process {process_id}")
    if row.status in ("in_progress", "pending"):
        raise CommandError(f"process.mark: process {process_id} is still running (process.stop stops it)")
    ctx.repos.processes.set_status(process_id, status, now=ctx.now)
    return CommandResult(f"process {process_id} marked {status}")


@FAMILY.command("process.cleanup", '{"days": 7}  (forget closed processes older than this)', args=CleanupArgs,
                effect="write_self")
def cleanup_processes(cmd: Command, ctx: CommandContext) -> CommandResult:
    days = float(arg(cmd, "days", default=7.0, kind=float))
    ids = ctx.repos.processes.delete_closed(ctx.now - timedelta(days=days))
    ctx.repos.runs.delete_for(ids)
    return CommandResult(f"{len(ids)} closed process(es) older than {days:g} days forgotten")
