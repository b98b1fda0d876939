"""goals & tasks (HMP): goals say why (status active|paused|completed|failed, sub-goals); tasks say what."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from managers.goals import CYCLE_KINDS
from managers.owners import process_token
from managers.threads import StelisRefused
from memory.models import Goal, Task
from memory.tiers import TierError
from nodes.commands.args import Args, Description, Id, Priority, Seconds, Title, Words, lowered, names
from nodes.commands.memory import archive_one
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg

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
    related_values: Words = Field([], validation_alias=names("related_values", "values"))
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
    related_values: Words | None = Field(None, validation_alias=names("related_values", "values"))


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
        "read_only", validation_alias=names("mode", "repl_mode")
    )
    token_budget: int = Field(50_000, ge=1_000, le=10_000_000)
    max_ticks: int = Field(20, ge=1, le=1_000)
    deadline_s: Seconds = 3600.0
    max_restarts: int = Field(1, ge=0, le=10)
    window_ratio: float = Field(0.5, gt=0, le=1)
    pause_s: float = Field(0.0, ge=0, le=3600)
    retries: int = Field(0, ge=0, le=10)
    backoff_s: float = Field(30.0, ge=0, le=3600)
    backoff_factor: float = Field(2.0, ge=1, le=10)


def goal_line(g: Goal) -> str:
    values = f"; values: {', '.join(map(str, g.related_values))}" if g.related_values else ""
    return f"[goal {g.id} {g.horizon} {g.status} priority {g.priority}{values}] {g.title}" + (
        f" — {g.description}" if g.description else ""
    )


def task_line(t: Task) -> str:
    flags = " pinned" if t.pinned else ""
    goal = f" goal {t.goal_id}" if t.goal_id else ""
    return f"[task {t.id} {t.status}{flags} priority {t.priority}{goal}] {t.title}"


def _root(ctx: CommandContext) -> str:
    return ctx.root_thread or ctx.thread_id


@FAMILY.command(
    "goals.add",
    '{"title": "…", "horizon": "short|long", "priority": 2, "parent": 1, '
    '"constraints": […], "success_criteria": […], "related_values": ["care"]}',
    args=GoalAddArgs,
    effect="write_self",
)
def add_goal(cmd: Command, ctx: CommandContext) -> CommandResult:
    g = ctx.managers.goals.add(
        str(arg(cmd, "title")),
        description=str(arg(cmd, "description", default="")),
        horizon=str(arg(cmd, "horizon", default="short")),
        priority=arg(cmd, "priority", default=1, kind=int),
        constraints=arg(cmd, "constraints", default=[], kind=list),
        success_criteria=arg(cmd, "success_criteria", default=[], kind=list),
        tags=arg(cmd, "tags", default=[], kind=list),
        parent_id=arg(cmd, "parent", default=None, kind=int),
        related_values=arg(cmd, "related_values", default=[], kind=list),
    )
    return CommandResult(f"goal {g.id} added")


@FAMILY.command("goals.list", '{"status": "active", "horizon": "short"}', args=GoalsListArgs, effect="read")
def list_goals(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.managers.goals.list(status=arg(cmd, "status", default=None), horizon=arg(cmd, "horizon", default=None))
    return CommandResult("\n".join(goal_line(g) for g in rows) or "no goals", show=True)


@FAMILY.command("goals.read", '{"id": 1}  (with sub-goals, tasks and progress)', args=GoalIdArgs, effect="read")
def read_goal(cmd: Command, ctx: CommandContext) -> CommandResult:
    seen = ctx.managers.goals.overview(arg(cmd, "id", kind=int))
    g = seen.goal
    lines = [goal_line(g)]
    if g.constraints:
        lines.append("constraints: " + "; ".join(map(str, g.constraints)))
    if g.success_criteria:
        lines.append("success criteria: " + "; ".join(map(str, g.success_criteria)))
    lines += [f"  sub-goal: {goal_line(s)}" for s in seen.subgoals]
    lines += [f"  {task_line(t)}" for t in seen.tasks]
    lines += [f"  progress: {n}" for n in g.progress_notes or []]
    p = seen.progress
    lines.append(f"tasks done: {p['done']}/{p['tasks']} ({p['completion_rate']}%)")
    return CommandResult("\n".join(lines), show=True)


@FAMILY.command(
    "goals.update",
    '{"id": 1, "status": "completed|failed|paused|active", "reason": "…", "progress": "…", "priority": 3}',
    args=GoalUpdateArgs,
    effect="write_self",
)
def update_goal(cmd: Command, ctx: CommandContext) -> CommandResult:
    goal_id = arg(cmd, "id", kind=int)
    ctx.managers.goals.update(
        goal_id,
        thread_id=ctx.thread_id,
        root_thread=_root(ctx),
        status=arg(cmd, "status", default=None),
        reason=arg(cmd, "reason", default=None),
        progress=arg(cmd, "progress", default=None),
        priority=arg(cmd, "priority", default=None, kind=int),
        title=arg(cmd, "title", default=None),
        description=arg(cmd, "description", default=None),
        horizon=arg(cmd, "horizon", default=None),
        related_values=arg(cmd, "related_values", default=None, kind=list),
    )
    return CommandResult(f"goal {goal_id} updated")


@FAMILY.command(
    "goals.delete", '{"id": 1}  (archives it; needs my human\'s approval)', args=GoalIdArgs, effect="modify_self"
)
def delete_goal(cmd: Command, ctx: CommandContext) -> CommandResult:
    return archive_one(ctx, cmd.type, "goal", arg(cmd, "id", kind=int))


@FAMILY.command(
    "tasks.add", '{"title": "…", "goal_id": 1, "priority": 2, "pinned": false}', args=TaskAddArgs, effect="write_self"
)
def add_task(cmd: Command, ctx: CommandContext) -> CommandResult:
    t = ctx.managers.tasks.add(
        str(arg(cmd, "title")),
        goal_id=arg(cmd, "goal_id", default=None, kind=int),
        description=str(arg(cmd, "description", default="")),
        priority=arg(cmd, "priority", default=1, kind=int),
        pinned=arg(cmd, "pinned", default=False, kind=bool),
        tags=arg(cmd, "tags", default=[], kind=list),
    )
    return CommandResult(f"task {t.id} added")


@FAMILY.command("tasks.list", '{"status": "open", "goal_id": 1}', args=TasksListArgs, effect="read")
def list_tasks(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.managers.tasks.list(
        status=arg(cmd, "status", default=None), goal_id=arg(cmd, "goal_id", default=None, kind=int)
    )
    return CommandResult("\n".join(task_line(t) for t in rows) or "no tasks", show=True)


@FAMILY.command("tasks.read", '{"id": 4}', args=TaskIdArgs, effect="read")
def read_task(cmd: Command, ctx: CommandContext) -> CommandResult:
    t = ctx.managers.tasks.get(arg(cmd, "id", kind=int))
    return CommandResult(task_line(t) + (f"\n{t.description}" if t.description else ""), show=True)


@FAMILY.command(
    "tasks.update",
    '{"id": 4, "status": "done|failed|in_progress|cancelled|open", "priority": 3}',
    args=TaskUpdateArgs,
    effect="write_self",
)
def update_task(cmd: Command, ctx: CommandContext) -> CommandResult:
    task_id = arg(cmd, "id", kind=int)
    ctx.managers.tasks.update(
        task_id,
        root_thread=_root(ctx),
        status=arg(cmd, "status", default=None),
        priority=arg(cmd, "priority", default=None, kind=int),
        title=arg(cmd, "title", default=None),
        description=arg(cmd, "description", default=None),
        goal_id=arg(cmd, "goal_id", default=None, kind=int),
    )
    return CommandResult(f"task {task_id} updated")


@FAMILY.command(
    "tasks.delete", '{"id": 4}  (archives it; needs my human\'s approval)', args=TaskIdArgs, effect="modify_self"
)
def delete_task(cmd: Command, ctx: CommandContext) -> CommandResult:
    return archive_one(ctx, cmd.type, "task", arg(cmd, "id", kind=int))


@FAMILY.command("tasks.pin", '{"id": 4}', args=TaskIdArgs, effect="write_self")
@FAMILY.command("tasks.unpin", '{"id": 4}', args=TaskIdArgs, effect="write_self")
def pin_task(cmd: Command, ctx: CommandContext) -> CommandResult:
    task = ctx.managers.tasks.set_pinned(arg(cmd, "id", kind=int), cmd.type.endswith(".pin"))
    return CommandResult(f"task {task.id} {'pinned' if task.pinned else 'unpinned'}")


@FAMILY.command(
    "tasks.run",
    '{"id": 4, "mode": "read_only|full", "max_ticks": 20, "token_budget": 50000}  (a sub-cycle '
    "works on the task: read_only may only read, add notes/tasks/llm_memory and edit the task; full acts "
    "like me, under the same consent rules; its findings arrive as notes)",
    args=TaskRunArgs,
    effect="write_self",
)
def run_task(cmd: Command, ctx: CommandContext) -> CommandResult:
    tasks = ctx.managers.tasks
    task = tasks.get(arg(cmd, "id", kind=int))
    if tasks.in_cycle(ctx.thread_id) is not None:
        raise CommandError(
            "tasks.run: a task sub-cycle cannot start another one; propose it to the main loop in a note"
        )
    if task.repl_status == "running":
        return CommandResult(f"task {task.id}'s sub-cycle is already running ({task.repl_thread})")
    try:
        tasks.check_runnable(task)
    except TierError as exc:
        raise CommandError(f"tasks.run: {exc}") from exc
    deferred, why = tasks.arbitrate(task, limit=ctx.settings.cycle.task_cycles, thread_id=_root(ctx))
    if deferred is not None and deferred.id == task.id:
        return CommandResult(f"task {task.id}'s sub-cycle is {why}", show=True)
    given = {name: arg(cmd, name, default=None, kind=kind) for name, kind in CYCLE_KINDS.items()}  # bounds: TaskRunArgs
    config = tasks.cycle_config(task, given, started_at=ctx.now.isoformat())
    root = _root(ctx)
    try:
        # the sub-cycle's thread: a Stelis child opened in this command's transaction, owned by this process
        child, window, _ = ctx.managers.threads.open_child(
            parent_id=root,
            child_id=f"{root[:60]}/task-{task.id}-t{ctx.tick}",
            label=f"task {task.id}: {task.title}"[:200],
            window_ratio=config["window_ratio"],
            max_depth=ctx.settings.stelis.max_depth,
            origin="task",
            persona=ctx.services.persona.name,
            owner=process_token(),
            tick=ctx.tick,
        )
    except StelisRefused as exc:
        raise CommandError(f"tasks.run: {exc}") from exc
    mode = arg(cmd, "mode", default="read_only")
    tasks.cycle_started(task.id, mode=mode, config=config, thread_id=child.id)
    ctx.emit({"event": "task_cycle", "task_id": task.id, "status": "running", "thread_id": child.id})
    outranked = f"; task {deferred.id}'s sub-cycle was {why}" if deferred is not None else ""
    return CommandResult(
        f"task {task.id}'s {mode} sub-cycle started in {child.id} (window {window} tokens, at most "
        f"{config['max_ticks']} ticks and {config['token_budget']:,} tokens); its notes will reach you" + outranked,
        show=True,
    )


@FAMILY.command("tasks.stop", '{"id": 4}  (stop the task\'s sub-cycle)', args=TaskIdArgs, effect="write_self")
def stop_task(cmd: Command, ctx: CommandContext) -> CommandResult:
    task = ctx.managers.tasks.get(arg(cmd, "id", kind=int))
    if task.repl_status != "running":
        return CommandResult(f"task {task.id} has no running sub-cycle ({task.repl_status or 'never started'})")
    ctx.managers.tasks.stop_cycle(task.id)
    return CommandResult(f"task {task.id}'s sub-cycle stopped; its chronicle will follow as a note")
