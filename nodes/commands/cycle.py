"""cycle: the persona's control over its own loop (pause, responses=N, notes mode, idle).

Settings live in the `config` table under `cycle/<thread_id>`, written in the same transaction as the
command's exactly-once record; the loop driver and prepare_context read them every tick.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from memory import Repos
from memory.upkeep.abstracts import request_abstract
from nodes.commands.args import Args, Id, Priority, Ref, SearchText, Seconds, Word, Words, lowered, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg

FAMILY = Family("cycle", "my own loop")

MAX_PAUSE_S = 3600.0
MAX_RESPONSES = 50


class PauseArgs(Args):
    seconds: float = Field(ge=0, le=MAX_PAUSE_S, validation_alias=names("seconds", "s", "n", "value", "pause"))


class ResponsesArgs(Args):
    responses: int = Field(ge=0, le=MAX_RESPONSES, validation_alias=names("responses", "n"))


class NotesModeArgs(Args):
    mode: Annotated[Literal["auto", "manual"], lowered] = Field(validation_alias=names("mode", "value"))
    min_priority: Priority | None = None


class NoteFilter(Args):
    model_config = ConfigDict(extra="forbid")
    tags: Words | None = None
    source: Word | None = None
    contains: SearchText | None = None
    min_priority: Priority | None = None


class IdleArgs(Args):
    on: bool = Field(True, validation_alias=names("on", "state", "value"))
    timeout_s: Seconds | None = Field(None, validation_alias=names("timeout_s", "timeout"))
    note_filter: NoteFilter | None = Field(None, validation_alias=names("note_filter", "filter"))
    process: Ref | None = Field(None, validation_alias=names("process", "process_id"))
    task: Id | None = Field(None, validation_alias=names("task", "task_id"))
    wake_on_note: bool = True


class ConcentrationArgs(Args):
    on: bool = Field(True, validation_alias=names("on", "value"))
    mode: Annotated[Literal["and", "or"], lowered] = Field("or", validation_alias=names("mode", "logic"))
    tags: Words = []
    emotions: Words = []


class SwitchArgs(Args):
    on: bool = Field(True, validation_alias=names("on", "value"))


def load_cycle(repos: Repos, thread_id: str) -> dict[str, Any]:
    return repos.config.cycle(thread_id)


def update_cycle(repos: Repos, thread_id: str, **changes: Any) -> dict[str, Any]:
    cycle = load_cycle(repos, thread_id)
    cycle.update(changes)
    repos.config.set_cycle(thread_id, cycle)
    return cycle


def context_mode(cycle: dict[str, Any]) -> str:
    return str(cycle.get("context_mode") or "standard")


def context_cycle(repos: Repos, settings: Any, thread_id: str) -> dict[str, Any]:
    """The thread's cycle settings. Without a context mode of its own (cycle.concentration / cycle.meditation),
    a `memory_manager.mode` of concentration or meditation sets it; `diversity_boost` shapes meditation."""
    cycle = load_cycle(repos, thread_id)
    manager_mode = settings.memory_manager.mode
    if not cycle.get("context_mode") and manager_mode in ("concentration", "meditation"):
        cycle["context_mode"] = manager_mode
    cycle.setdefault("diversity_boost", settings.memory_manager.diversity_boost)
    return cycle


@FAMILY.command("cycle.pause", '{"seconds": 30}  (pause between ticks; 0 = none)', args=PauseArgs, effect="write_self", aliases=('pause',))
def pause(cmd: Command, ctx: CommandContext) -> CommandResult:
    seconds = arg(cmd, "seconds", kind=float)
    update_cycle(ctx.repos, ctx.thread_id, pause_s=seconds)
    return CommandResult(f"pause between ticks set to {seconds:g}s")


@FAMILY.command("cycle.set", '{"responses": 5}  (how many recent own responses to see)', args=ResponsesArgs, effect="write_self")
def set_cycle(cmd: Command, ctx: CommandContext) -> CommandResult:
    responses = arg(cmd, "responses", kind=int)
    update_cycle(ctx.repos, ctx.thread_id, responses=responses)
    return CommandResult(f"recent responses in context: {responses}")


@FAMILY.command("cycle.mode", '{"mode": "auto"}  (auto: unread notes shown; manual: only their ids)', args=NotesModeArgs, effect="write_self")
def notes_mode(cmd: Command, ctx: CommandContext) -> CommandResult:
    mode = arg(cmd, "mode")
    update_cycle(ctx.repos, ctx.thread_id, notes_mode=mode, notes_min_priority=arg(cmd, "min_priority", default=None))
    return CommandResult(f"notes mode: {mode}")


@FAMILY.command("cycle.idle", '{"on": true, "timeout_s": 600, "note_filter": {"tags": ["urgent"], "source": "user", '
                       '"contains": "…", "min_priority": 1}, "process": 12, "task": 4}  (sleep without LLM calls '
                       'until a matching note, the process or task sub-cycle finishing, or the timeout)', args=IdleArgs, effect="write_self")
def idle(cmd: Command, ctx: CommandContext) -> CommandResult:
    on = arg(cmd, "on", default=True)
    timeout_s = arg(cmd, "timeout_s", default=None, kind=float)
    if not on:
        update_cycle(ctx.repos, ctx.thread_id, idle=None)
        return CommandResult("idle off")
    note_filter = {k: v for k, v in arg(cmd, "note_filter", default={}).items() if v is not None}
    process = arg(cmd, "process", default=None)
    task = arg(cmd, "task", default=None, kind=int)
    if process is not None and str(process).isdigit() and ctx.repos.processes.get(int(process)) is None:
        raise CommandError(f"cycle.idle: no process {process}")
    if task is not None:
        ctx.repos.tasks.get(task)
    jobs = [r for r in ctx.repos.runs.with_status("pending", "running") if r.thread_id == ctx.thread_id]
    if timeout_s is None and not arg(cmd, "wake_on_note", default=True, kind=bool) and process is None and task is None \
            and not jobs:
        raise CommandError("cycle.idle: nothing would wake me; give a timeout, a note filter, a process or a task")
    update_cycle(ctx.repos, ctx.thread_id, idle={
        "since_tick": ctx.tick,
        "wake_on_note": arg(cmd, "wake_on_note", default=True, kind=bool),
        "note_filter": note_filter,
        "after_note": ctx.repos.notes.newest_id(),
        "process": process,
        "task": task,
        "timeout_s": timeout_s,
        "since": ctx.now.isoformat(),
        "thread": ctx.thread_id,
    })
    wakes = [w for w in ("a matching note" if note_filter else "a note" if arg(cmd, "wake_on_note", default=True, kind=bool) else "",
                         f"process {process} finishing" if process is not None else "",
                         f"task {task}'s sub-cycle ending" if task is not None else "",
                         f"{len(jobs)} background process(es) finishing" if jobs else "",
                         f"{timeout_s:g}s" if timeout_s else "") if w]
    return CommandResult("idle on until " + " or ".join(wakes))


def idle_wake_reason(repos: Repos, idle: dict[str, Any], now) -> str | None:
    """Why an idle thread wakes now (a matching note, a process or task cycle finished, a background job of the
    thread ended, an approval answered, the timeout), or None."""
    if idle.get("wake_on_note", True):
        wanted = idle.get("note_filter") or {}
        for note in repos.notes.unread_incoming(limit=50, min_priority=wanted.get("min_priority")):
            if note.id <= int(idle.get("after_note") or 0) and wanted:
                continue
            if wanted.get("source") and note.source != wanted["source"]:
                continue
            if wanted.get("tags") and not set(wanted["tags"]) & set(note.tags or []):
                continue
            if wanted.get("contains") and str(wanted["contains"]).lower() not in note.text.lower():
                continue
            return f"note {note.id} from {note.source}"
    process = idle.get("process")
    if process is not None:
        row = repos.processes.get(int(process)) if str(process).isdigit() else repos.processes.latest_named(str(process))
        if row is not None and row.status not in ("in_progress", "pending"):
            return f"process {row.id} {row.name} finished ({row.status})"
    if idle.get("thread") and idle.get("since"):  # a script or a question to another model came back
        done = repos.processes.finished_since(idle["thread"], datetime.fromisoformat(idle["since"]))
        if done:
            return f"process {done[0].id} {done[0].name} finished ({done[0].status})"
    if idle.get("task") is not None:
        task = repos.tasks.get(int(idle["task"]))
        if task.repl_status != "running":
            return f"task {task.id}'s sub-cycle ended ({task.repl_status or 'not started'})"
    timeout, since = idle.get("timeout_s"), idle.get("since")
    answered = repos.approvals.decided_since(datetime.fromisoformat(since)) if since else []
    if answered:
        return f"my human answered approval {answered[0].id} ({answered[0].status})"
    if timeout and since and (now - datetime.fromisoformat(since)).total_seconds() >= float(timeout):
        return f"timeout of {float(timeout):g}s"
    return None


def _set_context_mode(ctx: CommandContext, mode: str, **focus: Any) -> None:
    old = load_cycle(ctx.repos, ctx.thread_id).get("context_mode") or "standard"
    update_cycle(ctx.repos, ctx.thread_id, context_mode=mode, **focus)
    if old != mode:  # HMP: a change of context mode is an abstract trigger
        request_abstract(ctx.repos, ctx.root_thread or ctx.thread_id, "mode_change", f"{old} -> {mode}")


@FAMILY.command("cycle.concentration", '{"on": true, "tags": ["sea"], "emotions": ["joy"], "mode": "and|or"}', args=ConcentrationArgs, effect="write_self")
def concentration(cmd: Command, ctx: CommandContext) -> CommandResult:
    if not arg(cmd, "on", default=True, kind=bool):
        _set_context_mode(ctx, "standard")
        return CommandResult("concentration off")
    logic = arg(cmd, "mode", default="or")
    tags, emotions = arg(cmd, "tags", default=[], kind=list), arg(cmd, "emotions", default=[], kind=list)
    if not tags and not emotions:
        raise CommandError("cycle.concentration: give tags and/or emotions to concentrate on")
    _set_context_mode(ctx, "concentration", focus_tags=tags, focus_emotions=emotions, focus_logic=logic)
    return CommandResult(f"concentration on: tags {tags}, emotions {emotions} ({logic})")


@FAMILY.command("cycle.meditation", '{"on": true}  (the most diverse thoughts and memories instead of the latest)', args=SwitchArgs, effect="write_self")
def meditation(cmd: Command, ctx: CommandContext) -> CommandResult:
    on = arg(cmd, "on", default=True, kind=bool)
    _set_context_mode(ctx, "meditation" if on else "standard")
    return CommandResult("meditation on" if on else "meditation off")
