"""cycle: the persona's control over its own loop (pause, responses=N, notes mode, idle).

Settings live in the `config` table under `cycle/<thread_id>`, written in the same transaction as the
command's exactly-once record; the loop driver and prepare_context read them every tick.
"""

from __future__ import annotations

from typing import Any

from memory import Repos
from nodes.commands.model import Command
from nodes.commands.registry import CommandContext, CommandError, CommandResult, arg, command

MAX_PAUSE_S = 3600.0
MAX_RESPONSES = 50


def cycle_key(thread_id: str) -> str:
    return f"cycle/{thread_id}"


def load_cycle(repos: Repos, thread_id: str) -> dict[str, Any]:
    return dict(repos.config.get(cycle_key(thread_id), {}) or {})


def update_cycle(repos: Repos, thread_id: str, **changes: Any) -> dict[str, Any]:
    cycle = load_cycle(repos, thread_id)
    cycle.update(changes)
    repos.config.set(cycle_key(thread_id), cycle)
    return cycle


@command("cycle.pause", '{"seconds": 30}  (pause between ticks; 0 = none)')
def pause(cmd: Command, ctx: CommandContext) -> CommandResult:
    seconds = arg(cmd, "seconds", "s", "n", "value", "pause", kind=float)
    if not 0 <= seconds <= MAX_PAUSE_S:
        raise CommandError(f"cycle.pause: seconds must be within 0..{MAX_PAUSE_S:g}, got {seconds:g}")
    update_cycle(ctx.repos, ctx.thread_id, pause_s=seconds)
    return CommandResult(f"pause between ticks set to {seconds:g}s")


@command("cycle.set", '{"responses": 5}  (how many recent own responses to see)')
def set_cycle(cmd: Command, ctx: CommandContext) -> CommandResult:
    responses = arg(cmd, "responses", "n", kind=int)
    if not 0 <= responses <= MAX_RESPONSES:
        raise CommandError(f"cycle.set: responses must be within 0..{MAX_RESPONSES}, got {responses}")
    update_cycle(ctx.repos, ctx.thread_id, responses=responses)
    return CommandResult(f"recent responses in context: {responses}")


@command("cycle.mode", '{"mode": "auto"}  (auto: unread notes shown; manual: only their ids)')
def notes_mode(cmd: Command, ctx: CommandContext) -> CommandResult:
    mode = str(arg(cmd, "mode", "value")).lower()
    if mode not in ("auto", "manual"):
        raise CommandError(f"cycle.mode: mode must be auto or manual, got {mode!r}")
    update_cycle(ctx.repos, ctx.thread_id, notes_mode=mode, notes_min_priority=arg(cmd, "min_priority", default=None))
    return CommandResult(f"notes mode: {mode}")


@command("cycle.idle", '{"on": true, "timeout_s": 600}  (sleep without LLM calls until a note arrives or the timeout)')
def idle(cmd: Command, ctx: CommandContext) -> CommandResult:
    raw = cmd.args.get("on", cmd.args.get("state", cmd.args.get("value", True)))
    on = raw if isinstance(raw, bool) else str(raw).strip().lower() in ("1", "true", "on", "yes")
    timeout_s = arg(cmd, "timeout_s", "timeout", default=None, kind=float)
    if not on:
        update_cycle(ctx.repos, ctx.thread_id, idle=None)
        return CommandResult("idle off")
    update_cycle(ctx.repos, ctx.thread_id, idle={
        "since_tick": ctx.tick,
        "wake_on_note": arg(cmd, "wake_on_note", default=True, kind=bool),
        "timeout_s": timeout_s,
        "since": ctx.now.isoformat(),
    })
    return CommandResult("idle on" + (f" for up to {timeout_s:g}s" if timeout_s else " until a note arrives"))


def _set_context_mode(ctx: CommandContext, mode: str, **focus: Any) -> None:
    old = load_cycle(ctx.repos, ctx.thread_id).get("context_mode") or "standard"
    update_cycle(ctx.repos, ctx.thread_id, context_mode=mode, **focus)
    if old != mode:  # HMP: a change of context mode is an abstract trigger
        from memory.abstracts import request_abstract

        request_abstract(ctx.repos, ctx.root_thread or ctx.thread_id, "mode_change", f"{old} -> {mode}")


@command("cycle.concentration", '{"on": true, "tags": ["sea"], "emotions": ["joy"], "mode": "and|or"}')
def concentration(cmd: Command, ctx: CommandContext) -> CommandResult:
    if not arg(cmd, "on", "value", default=True, kind=bool):
        _set_context_mode(ctx, "standard")
        return CommandResult("concentration off")
    logic = str(arg(cmd, "mode", "logic", default="or")).lower()
    if logic not in ("and", "or"):
        raise CommandError(f"cycle.concentration: mode must be and or or, got {logic!r}")
    tags, emotions = arg(cmd, "tags", default=[], kind=list), arg(cmd, "emotions", default=[], kind=list)
    if not tags and not emotions:
        raise CommandError("cycle.concentration: give tags and/or emotions to concentrate on")
    _set_context_mode(ctx, "concentration", focus_tags=tags, focus_emotions=emotions, focus_logic=logic)
    return CommandResult(f"concentration on: tags {tags}, emotions {emotions} ({logic})")


@command("cycle.meditation", '{"on": true}  (the most diverse thoughts and memories instead of the latest)')
def meditation(cmd: Command, ctx: CommandContext) -> CommandResult:
    on = arg(cmd, "on", "value", default=True, kind=bool)
    _set_context_mode(ctx, "meditation" if on else "standard")
    return CommandResult("meditation on" if on else "meditation off")
