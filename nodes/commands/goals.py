"""goals & tasks (HMP): goals say why (status active|paused|completed|failed, sub-goals); tasks say what."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from memory.upkeep.abstracts import request_abstract
from nodes.commands.args import Args, Description, Id, Priority, Seconds, Title, Words, lowered, names
from nodes.commands.memory import archive_one
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg
from nodes.stelis.threads import StelisRefused, open_thread

FAMILY = Family("goals", "goals and tasks")


Horizon = Annotated[Literal["short", "long"], lowered]
GoalStatus = Annotated[Literal["active", "paused", "completed", "failed"], lowered]
TaskStatus = Annotated[Literal["open", "in_progress", "done", "failed", "cancelled", "frozen"], lowered]
Criteria = Annotated[list[Description], Field(max_length=20)]


class GoalAddArgs(Args):
    title: Title = Field(validation_alias=names("title", "goal", "text"))
    description: Description = ""
    horizon: Horizon = "short"
    priority: Priority = 1
    constraints: Criteria = []
    success_criteria: Criteria = []
    tags: Words = []
    parent: Id | None = Field(None, validation_alias=names("parent", "parent_id"))


class GoalsListArgs(Args):
    status: GoalStatus | None = None
    horizon: Horizon | None = None


class GoalIdArgs(Args):
    id: Id


class GoalUpdateArgs(GoalIdArgs):
    status: GoalStatus | None = None
    reason: Description | None = None
    progress: Description | None = None
    priority: Priority | None = None
    title: Title | None = None
    description: Description | None = None
    horizon: Horizon | None = None


class TaskAddArgs(Args):
    title: Title = Field(validation_alias=names("title", "task", "text"))
    goal_id: Id | None = Field(None, validation_alias=names("goal_id", "goal"))
    description: Description = ""
    priority: Priority = 1
    pinned: bool = False
    tags: Words = []


class TasksListArgs(Args):
    status: TaskStatus | None = None
    goal_id: Id | None = None


class TaskIdArgs(Args):
    id: Id = Field(validation_alias=names("id", "task_id"))


class TaskUpdateArgs(TaskIdArgs):
    status: TaskStatus | None = None
    priority: Priority | None = None
    title: Title | None = None
    description: Description | None = None
    goal_id: Id | None = None


class TaskRunArgs(TaskIdArgs):
    mode: Annotated[Literal["read_only", "full"], lowered] = Field(
        "read_only", validation_alias=names("mode", "repl_mode"))
    token_budget: int = Field(50_000, ge=1_000, le=10_000_000)
    max_ticks: int = Field(20, ge=1, le=1_000)
    deadline_s: Seconds = 3600.0
    max_restarts: int = Field(1, ge=0, le=10)
    window_ratio: float = Field(0.5, gt=0, le=1)
    pause_s: float = Field(0.0, ge=0, le=3600)
    retries: int = Field(0, ge=0, le=10)
    backoff_s: float = Field(30.0, ge=0, le=3600)
    backoff_factor: float = Field(2.0, ge=1, le=10)


def goal_line(g) -> str:
    return f"[goal {g.id} {g.horizon} {g.status} priority {g.priority}] {g.title}" + (f" — {g.description}" if g.description else "")


def task_line(t) -> str:
    flags = " pinned" if t.pinned else ""
    goal = f" goal {t.goal_id}" if t.goal_id else ""
    return f"[task {t.id} {t.status}{flags} priority {t.priority}{goal}] {t.title}"


def _closed(ctx: CommandContext, what: str) -> None:
    """Closing a goal or task triggers an abstract (built by the manage_memory step, see memory/abstracts.py)."""
    request_abstract(ctx.repos, ctx.root_thread or ctx.thread_id, "goal_closed", what)


@FAMILY.command("goals.add", '{"title": "…", "horizon": "short|long", "priority": 2, "parent": 1, '
                      '"constraints": […], "success_criteria": […]}', args=GoalAddArgs, effect="write_self")
def add_goal(cmd: Command, ctx: CommandContext) -> CommandResult:
    g = ctx.repos.goals.add(str(arg(cmd, "title")), description=str(arg(cmd, "description", default="")),
                            horizon=str(arg(cmd, "horizon", default="short")), priority=arg(cmd, "priority", default=1, kind=int),
                            constraints=arg(cmd, "constraints", default=[], kind=list),
                            success_criteria=arg(cmd, "success_criteria", default=[], kind=list),
                            tags=arg(cmd, "tags", default=[], kind=list), parent_id=arg(cmd, "parent", default=None, kind=int))
    return CommandResult(f"goal {g.id} added")


@FAMILY.command("goals.list", '{"status": "active", "horizon": "short"}', args=GoalsListArgs, effect="read")
def list_goals(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.repos.goals.list(status=arg(cmd, "status", default=None), horizon=arg(cmd, "horizon", default=None))
    return CommandResult("\n".join(goal_line(g) for g in rows) or "no goals", show=True)


@FAMILY.command("goals.read", '{"id": 1}  (with sub-goals, tasks and progress)', args=GoalIdArgs, effect="read")
def read_goal(cmd: Command, ctx: CommandContext) -> CommandResult:
    g = ctx.repos.goals.get(arg(cmd, "id", kind=int))
    lines = [goal_line(g)]
    if g.constraints:
        lines.append("constraints: " + "; ".join(map(str, g.constraints)))
    if g.success_criteria:
        lines.append("success criteria: " + "; ".join(map(str, g.success_criteria)))
    lines += [f"  sub-goal: {goal_line(s)}" for s in ctx.repos.goals.subgoals(g.id)]
    lines += [f"  {task_line(t)}" for t in ctx.repos.tasks.list(goal_id=g.id)]
    lines += [f"  progress: {n}" for n in g.progress_notes or []]
    p = ctx.repos.goals.progress(g.id)
    lines.append(f"tasks done: {p['done']}/{p['tasks']} ({p['completion_rate']}%)")
    return CommandResult("\n".join(lines), show=True)


@FAMILY.command("goals.update", '{"id": 1, "status": "completed|failed|paused|active", "reason": "…", "progress": "…", "priority": 3}', args=GoalUpdateArgs, effect="write_self")
def update_goal(cmd: Command, ctx: CommandContext) -> CommandResult:
    goal_id = arg(cmd, "id", kind=int)
    status = arg(cmd, "status", default=None)
    g = ctx.repos.goals.update(goal_id, status=status, reason=arg(cmd, "reason", default=None),
                               progress=arg(cmd, "progress", default=None), priority=arg(cmd, "priority", default=None, kind=int),
                               title=arg(cmd, "title", default=None), description=arg(cmd, "description", default=None),
                               horizon=arg(cmd, "horizon", default=None))
    if status == "failed":
        ctx.repos.processes.add("goals.failed", f"goal {g.id} failed: {g.reason or 'no reason given'}", status="warning",
                                thread_id=ctx.thread_id)
    if status in ("completed", "failed"):
        _closed(ctx, f"goal {g.id}")
    return CommandResult(f"goal {goal_id} updated")


@FAMILY.command("goals.delete", '{"id": 1}  (archives it; needs my human\'s approval)', args=GoalIdArgs, effect="modify_self")
def delete_goal(cmd: Command, ctx: CommandContext) -> CommandResult:
    return archive_one(ctx, cmd.type, "goal", arg(cmd, "id", kind=int))


@FAMILY.command("tasks.add", '{"title": "…", "goal_id": 1, "priority": 2, "pinned": false}', args=TaskAddArgs, effect="write_self")
def add_task(cmd: Command, ctx: CommandContext) -> CommandResult:
    t = ctx.repos.tasks.add(str(arg(cmd, "title")), goal_id=arg(cmd, "goal_id", default=None, kind=int),
                            description=str(arg(cmd, "description", default="")), priority=arg(cmd, "priority", default=1, kind=int),
                            pinned=arg(cmd, "pinned", default=False, kind=bool), tags=arg(cmd, "tags", default=[], kind=list))
    return CommandResult(f"task {t.id} added")


@FAMILY.command("tasks.list", '{"status": "open", "goal_id": 1}', args=TasksListArgs, effect="read")
def list_tasks(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.repos.tasks.list(status=arg(cmd, "status", default=None), goal_id=arg(cmd, "goal_id", default=None, kind=int))
    return CommandResult("\n".join(task_line(t) for t in rows) or "no tasks", show=True)


@FAMILY.command("tasks.read", '{"id": 4}', args=TaskIdArgs, effect="read")
def read_task(cmd: Command, ctx: CommandContext) -> CommandResult:
    t = ctx.repos.tasks.get(arg(cmd, "id", kind=int))
    return CommandResult(task_line(t) + (f"\n{t.description}" if t.description else ""), show=True)


@FAMILY.command("tasks.update", '{"id": 4, "status": "done|failed|in_progress|cancelled|open", "priority": 3}', args=TaskUpdateArgs, effect="write_self")
def update_task(cmd: Command, ctx: CommandContext) -> CommandResult:
    task_id = arg(cmd, "id", kind=int)
    status = arg(cmd, "status", default=None)
    ctx.repos.tasks.update(task_id, status=status, priority=arg(cmd, "priority", default=None, kind=int),
                           title=arg(cmd, "title", default=None), description=arg(cmd, "description", default=None),
                           goal_id=arg(cmd, "goal_id", default=None, kind=int))
    if status in ("done", "failed", "cancelled"):
        _closed(ctx, f"task {task_id}")
    return CommandResult(f"task {task_id} updated")


@FAMILY.command("tasks.delete", '{"id": 4}  (archives it; needs my human\'s approval)', args=TaskIdArgs, effect="modify_self")
def delete_task(cmd: Command, ctx: CommandContext) -> CommandResult:
    return archive_one(ctx, cmd.type, "task", arg(cmd, "id", kind=int))


@FAMILY.command("tasks.pin", '{"id": 4}', args=TaskIdArgs, effect="write_self")
@FAMILY.command("tasks.unpin", '{"id": 4}', args=TaskIdArgs, effect="write_self")
def pin_task(cmd: Command, ctx: CommandContext) -> CommandResult:
    task = ctx.repos.tasks.update(arg(cmd, "id", kind=int), pinned=cmd.type.endswith(".pin"))
    return CommandResult(f"task {task.id} {'pinned' if task.pinned else 'unpinned'}")


# HMP tasks.repl_config: limits, its own pause between ticks, and the backoff on repeated errors
DEFAULT_CYCLE = {"max_ticks": 20, "deadline_s": 3600.0, "max_restarts": 1, "window_ratio": 0.5, "pause_s": 0.0,
                 "retries": 0, "backoff_s": 30.0, "backoff_factor": 2.0, "token_budget": 50_000}
CYCLE_KINDS = {"max_ticks": int, "deadline_s": float, "max_restarts": int, "window_ratio": float, "pause_s": float,
               "retries": int, "backoff_s": float, "backoff_factor": float, "token_budget": int}


@FAMILY.command("tasks.run", '{"id": 4, "mode": "read_only|full", "max_ticks": 20, "token_budget": 50000}  (a sub-cycle '
                      'works on the task: read_only may only read, add notes/tasks/llm_memory and edit the task; full acts '
                      'like me, under the same consent rules; its findings arrive as notes)', args=TaskRunArgs,
                effect="write_self")
def run_task(cmd: Command, ctx: CommandContext) -> CommandResult:
    task = ctx.repos.tasks.get(arg(cmd, "id", kind=int))
    if ctx.repos.tasks.by_repl_thread(ctx.thread_id) is not None:
        raise CommandError("tasks.run: a task sub-cycle cannot start another one; propose it to the main loop in a note")
    if task.repl_status == "running":
        return CommandResult(f"task {task.id}'s sub-cycle is already running ({task.repl_thread})")
    if task.status in ("done", "failed", "cancelled"):
        raise CommandError(f"tasks.run: task {task.id} is {task.status}")
    config = {**DEFAULT_CYCLE, **(task.repl_config or {})}
    for name, kind in CYCLE_KINDS.items():
        config[name] = arg(cmd, name, default=config[name], kind=kind)  # bounds: TaskRunArgs
    config.update(restarts=0, errors=0, next_at=None, started_at=ctx.now.isoformat())
    root = ctx.root_thread or ctx.thread_id
    try:
        child, window, _ = open_thread(ctx.services, ctx.repos, parent_id=root, child_id=f"{root[:60]}/task-{task.id}-t{ctx.tick}",
                                       label=f"task {task.id}: {task.title}"[:200], window_ratio=config["window_ratio"],
                                       max_depth=ctx.settings.stelis.max_depth, origin="task", tick=ctx.tick)
    except StelisRefused as exc:
        raise CommandError(f"tasks.run: {exc}") from exc
    mode = arg(cmd, "mode", default="read_only")
    ctx.repos.tasks.set_repl(task.id, repl_mode=mode, repl_status="running", repl_config=config,
                             repl_thread=child.id, repl_error=None)
    ctx.repos.tasks.update(task.id, status="in_progress")
    ctx.emit({"event": "task_cycle", "task_id": task.id, "status": "running", "thread_id": child.id})
    return CommandResult(f"task {task.id}'s {mode} sub-cycle started in {child.id} (window {window} tokens, at most "
                         f"{config['max_ticks']} ticks and {config['token_budget']:,} tokens); its notes will reach you",
                         show=True)


@FAMILY.command("tasks.stop", '{"id": 4}  (stop the task\'s sub-cycle)', args=TaskIdArgs, effect="write_self")
def stop_task(cmd: Command, ctx: CommandContext) -> CommandResult:
    task = ctx.repos.tasks.get(arg(cmd, "id", kind=int))
    if task.repl_status != "running":
        return CommandResult(f"task {task.id} has no running sub-cycle ({task.repl_status or 'never started'})")
    ctx.repos.tasks.set_repl(task.id, repl_status="stopped", repl_error="stopped by the main loop")
    return CommandResult(f"task {task.id}'s sub-cycle stopped; its chronicle will follow as a note")
