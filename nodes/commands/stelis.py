"""stelis: the persona opens and closes a child thread itself, from the REPL.

`stelis.start` opens a child of the current thread (anchor in the parent, window × window_ratio) and
makes it the thread the next ticks run in; `stelis.end` writes the chronicle, marks it completed and
returns to the parent, whose context then shows the anchor with the chronicle and the last messages. The rules
(depth, window, which thread the ticks run in) are the thread manager's (managers/threads.py); the chronicle is
written by nodes/stelis/threads.py.
"""

from __future__ import annotations

from pydantic import Field

from managers.errors import Refused
from managers.threads import DEFAULT_WINDOW_RATIO, StelisRefused
from nodes.commands.args import Args, Description, Title, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg
from nodes.stelis.history import render_anchor
from nodes.stelis.threads import child_thread_id, process_token, write_chronicle

FAMILY = Family("stelis", "child threads")


class StelisStartArgs(Args):
    label: Title = Field(validation_alias=names("label", "name", "title", "text"))
    window_ratio: float = Field(DEFAULT_WINDOW_RATIO, gt=0, le=1, validation_alias=names("window_ratio", "ratio"))
    chronicle_prompt: Description | None = None


class StelisShowArgs(Args):
    id: Title = Field(validation_alias=names("id", "thread"))


@FAMILY.command(
    "stelis.start",
    '{"label": "research tides", "window_ratio": 0.8}  (work in a child thread; end with stelis.end)',
    args=StelisStartArgs,
    effect="write_self",
)
def start(cmd: Command, ctx: CommandContext) -> CommandResult:
    label = str(arg(cmd, "label")).strip()[:200]
    ratio = arg(cmd, "window_ratio", default=DEFAULT_WINDOW_RATIO, kind=float)
    root = ctx.root_thread or ctx.thread_id
    child_id = child_thread_id(ctx.thread_id, label, f"t{ctx.tick}-{cmd.cmd_id}")
    threads = ctx.managers.threads
    try:
        child, window, existed = threads.open_child(
            parent_id=ctx.thread_id,
            child_id=child_id,
            label=label,
            window_ratio=ratio,
            max_depth=ctx.settings.stelis.max_depth,
            origin="command",
            persona=ctx.services.persona.name,
            owner=process_token(),
            tick=ctx.tick,
            chronicle_prompt=arg(cmd, "chronicle_prompt", default=None),
        )
    except StelisRefused as exc:
        raise CommandError(str(exc)) from exc
    threads.set_active(root, child.id)
    ctx.emit(
        {
            "event": "stelis_enter",
            "thread_id": child.id,
            "label": label,
            "depth": child.depth,
            "window_tokens": window,
            "origin": "command",
        }
    )
    return CommandResult(
        f'entered Stelis thread "{label}" ({child.id}), depth {child.depth}, window {window} tokens. '
        "Work here; finish with stelis.end — the parent thread will see its chronicle.",
        show=True,
        thread_id=child.id,
    )


@FAMILY.command(
    "stelis.end", "{}  (close the current Stelis thread: chronicle, then back to the parent)", effect="write_self"
)
def end(cmd: Command, ctx: CommandContext) -> CommandResult:
    threads = ctx.managers.threads
    try:
        thread = threads.opened_by_command(ctx.thread_id)
    except Refused:
        raise CommandError("stelis.end: the current thread is not a Stelis thread opened with stelis.start") from None
    parent_id = thread.parent_id
    assert parent_id is not None  # a Stelis thread has a parent
    if thread.status != "running":
        return CommandResult(f"Stelis thread {thread.id} already {thread.status}")
    chronicle = write_chronicle(ctx.services, thread.id)  # reads the log in its own session; no write lock held
    threads.finish(thread.id, status="completed", chronicle=chronicle)
    threads.set_active(ctx.root_thread or parent_id, parent_id)
    ctx.emit(
        {
            "event": "stelis_leave",
            "thread_id": thread.id,
            "label": thread.label,
            "status": "completed",
            "chronicle_chars": len(chronicle),
            "origin": "command",
        }
    )
    return CommandResult(
        f'left Stelis thread "{thread.label}" ({thread.id}); chronicle of {len(chronicle)} characters '
        f"written. Back in {parent_id}.",
        show=True,
        thread_id=parent_id,
    )


@FAMILY.command(
    "stelis.show",
    '{"id": "main/research-tides-t3-1"}  (a Stelis thread as its anchor shows it)',
    args=StelisShowArgs,
    effect="read",
)
def show(cmd: Command, ctx: CommandContext) -> CommandResult:
    thread_id = str(arg(cmd, "id"))
    try:
        text = ctx.managers.threads.show(thread_id, viewer_id=ctx.thread_id, render=render_anchor)
    except LookupError:  # no such Stelis thread
        raise CommandError(f"stelis.show: no Stelis thread {thread_id!r}") from None
    return CommandResult(text, show=True)
