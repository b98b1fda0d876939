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

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, StringConstraints

from managers.errors import Refused
from managers.processes import scripts_off
from nodes.commands.args import Args, Description, Id, Limit, lowered, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg
from reach import budget

if TYPE_CHECKING:
    from memory.models import ProcessLog, ProcessRun

FAMILY = Family(
    "process",
    "my scripts and the processes they run",
    compact=True,
    abouts={
        "scripts": "scripts I write, kept as data",
        "process": "my scripts running in a sandbox, and their results",
    },
)

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


def _refused(cmd: Command, exc: Refused) -> CommandError:
    return CommandError(f"{cmd.type}: {exc}")


@FAMILY.command("scripts.list", "{}  (the scripts I wrote)", effect="read", aliases=("agent_scripts.list",))
def list_scripts(cmd: Command, ctx: CommandContext) -> CommandResult:
    lines = [
        f"- {s.name} ({s.language}, {len(s.code):,} chars, run {s.runs}×): {s.description or '(no description)'}"
        for s in ctx.managers.processes.scripts()
    ]
    return CommandResult("\n".join(lines) or "no scripts (scripts.add)", show=True)


@FAMILY.command("scripts.read", '{"name": "count_words"}', args=ScriptNameArgs, effect="read")
def read_script(cmd: Command, ctx: CommandContext) -> CommandResult:
    script = ctx.managers.processes.script(arg(cmd, "name"))
    return CommandResult(f"script {script.name} ({script.language}): {script.description}\n{script.code}", show=True)


@FAMILY.command(
    "scripts.add",
    '{"name": "count_words", "language": "python", "code": "print(…)", "description": "…"}  '
    '(stored, not run; {"replace": true} rewrites one)',
    args=ScriptAddArgs,
    effect="write_self",
    aliases=("agent_scripts.add",),
    prompt_tier="scripts",
)
def add_script(cmd: Command, ctx: CommandContext) -> CommandResult:
    name, language = arg(cmd, "name"), arg(cmd, "language", default="python")
    try:
        saved = ctx.managers.processes.save_script(
            name=name,
            language=language,
            code=str(arg(cmd, "code")),
            description=str(arg(cmd, "description", default="")),
            replace=arg(cmd, "replace", default=False, kind=bool),
        )
    except Refused as exc:
        raise _refused(cmd, exc) from None
    off = "" if saved.enabled else f" (note: {language} scripts are not enabled here)"
    return CommandResult(
        f"script {name} {'rewritten' if saved.rewritten else 'stored'}; process.start "
        f'{{"script": "{name}"}} runs it{off}'
    )


@FAMILY.command(
    "scripts.delete",
    '{"name": "count_words"}  (archives it; needs my human\'s approval)',
    args=ScriptNameArgs,
    effect="modify_self",
    aliases=("agent_scripts.delete",),
)
def delete_script(cmd: Command, ctx: CommandContext) -> CommandResult:
    script = ctx.managers.processes.archive_script(arg(cmd, "name"))
    return CommandResult(
        f'script {script.name} archived; memory.restore {{"tier": "script", "ref": "{script.id}"}} brings it back'
    )


@FAMILY.command(
    "process.start",
    '{"script": "count_words", "args": ["notes.txt"], "timeout_s": 60}  (runs my script '
    "in a sandbox; leaves the process: needs approval)",
    args=StartArgs,
    effect="external",
    unavailable=scripts_off,
)
def start_process(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        started = ctx.managers.processes.start(
            script=arg(cmd, "script"),
            args=list(arg(cmd, "args", default=[])),
            thread_id=ctx.thread_id,
            timeout_s=arg(cmd, "timeout_s", default=None),
            memory_mb=arg(cmd, "memory_mb", default=None),
            llm_id=ctx.llm_id,
            task_id=ctx.task_id,
        )
    except Refused as exc:
        raise _refused(cmd, exc) from None
    background, run_id = ctx.services.background(), started.run.id
    ctx.then(lambda: background.launch(run_id))
    return CommandResult(
        f"process {started.process.id} started: script {started.script.name} (at most "
        f"{started.timeout_s:g} s, {started.memory_mb} MB, "
        f"{'with network' if started.network else 'no network'}); its result will appear under my "
        "open processes"
    )


def _run_line(process: ProcessLog, run: ProcessRun | None) -> str:
    state = run.status if run is not None else process.status
    return f"[process {process.id} {process.name}: {state}] {budget(process.value, 300)}"


@FAMILY.command(
    "process.list",
    '{"all": false, "limit": 10}  (my processes: the open ones, or every recent one)',
    args=ProcessListArgs,
    effect="read",
)
def list_processes(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.managers.processes.listing(
        ctx.thread_id,
        open_only=not arg(cmd, "all", default=False, kind=bool),
        limit=arg(cmd, "limit", default=10, kind=int),
    )
    return CommandResult("\n".join(_run_line(p, run) for p, run in rows) or "no processes", show=True)


@FAMILY.command("process.stop", '{"id": 12}  (stops a running script)', args=ProcessIdArgs, effect="write_self")
def stop_process(cmd: Command, ctx: CommandContext) -> CommandResult:
    process_id = arg(cmd, "id", kind=int)
    try:
        run, running = ctx.managers.processes.stop(process_id)
    except Refused as exc:
        raise _refused(cmd, exc) from None
    if not running:
        return CommandResult(f"process {process_id} is not running ({run.status})")
    background, run_id = ctx.services.background(), run.id
    ctx.then(lambda: background.stop(run_id))
    return CommandResult(f"process {process_id} is being stopped")


@FAMILY.command(
    "process.mark", '{"id": 12, "status": "close"}  (mark a process as dealt with)', args=MarkArgs, effect="write_self"
)
def mark_process(cmd: Command, ctx: CommandContext) -> CommandResult:
    process_id, status = arg(cmd, "id", kind=int), arg(cmd, "status", default="close")
    try:
        ctx.managers.processes.mark(process_id, status)
    except Refused as exc:
        raise _refused(cmd, exc) from None
    return CommandResult(f"process {process_id} marked {status}")


@FAMILY.command(
    "process.cleanup", '{"days": 7}  (forget closed processes older than this)', args=CleanupArgs, effect="write_self"
)
def cleanup_processes(cmd: Command, ctx: CommandContext) -> CommandResult:
    days = float(arg(cmd, "days", default=7.0, kind=float))
    forgotten = ctx.managers.processes.cleanup(days=days)
    return CommandResult(f"{forgotten} closed process(es) older than {days:g} days forgotten")
