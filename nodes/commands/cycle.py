"""cycle: the persona's control over its own loop (pause, responses=N, notes mode, idle, context mode).

The settings and their rules are the loop manager's (managers/loop.py): written in the same transaction as the
command's exactly-once record; the loop driver and prepare_context read them every tick.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from managers.loop import LoopError
from nodes.commands.args import Args, Id, Priority, Ref, SearchText, Seconds, Word, Words, lowered, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg
from persona.settings import NotesFilter

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
    filter: NotesFilter | None = Field(None, validation_alias=names("filter", "notes_filter"))


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


@FAMILY.command(
    "cycle.pause",
    '{"seconds": 30}  (pause between ticks; 0 = none)',
    args=PauseArgs,
    effect="write_self",
    aliases=("pause",),
)
def pause(cmd: Command, ctx: CommandContext) -> CommandResult:
    seconds = arg(cmd, "seconds", kind=float)
    ctx.managers.loop.set_pause(ctx.thread_id, seconds)
    return CommandResult(f"pause between ticks set to {seconds:g}s")


@FAMILY.command(
    "cycle.set", '{"responses": 5}  (how many recent own responses to see)', args=ResponsesArgs, effect="write_self"
)
def set_cycle(cmd: Command, ctx: CommandContext) -> CommandResult:
    responses = arg(cmd, "responses", kind=int)
    ctx.managers.loop.set_responses(ctx.thread_id, responses)
    return CommandResult(f"recent responses in context: {responses}")


@FAMILY.command(
    "cycle.mode",
    '{"mode": "auto", "filter": {"tags": ["urgent"], "sources": ["user", "peer"], '
    '"mentions": ["me"], "max_age_hours": 24, "min_priority": 1}}  (auto: unread notes shown — those the '
    "filter lets through, my owner's always; {} lifts it; manual: only their ids)",
    args=NotesModeArgs,
    effect="write_self",
)
def notes_mode(cmd: Command, ctx: CommandContext) -> CommandResult:
    mode = arg(cmd, "mode")
    wanted = cmd.args.get("filter")
    ctx.managers.loop.set_notes_mode(
        ctx.thread_id,
        mode,
        arg(cmd, "min_priority", default=None),
        note_filter=wanted if isinstance(wanted, dict) else None,
    )
    shown = {k: v for k, v in (wanted or {}).items() if v not in (None, [], "")} if isinstance(wanted, dict) else {}
    return CommandResult(
        f"notes mode: {mode}"
        + (
            f"; filter {json.dumps(shown, ensure_ascii=False)}"
            if shown
            else "; no filter"
            if isinstance(wanted, dict)
            else ""
        )
    )


@FAMILY.command(
    "cycle.idle",
    '{"on": true, "timeout_s": 600, "note_filter": {"tags": ["urgent"], "source": "user", '
    '"contains": "…", "min_priority": 1}, "process": 12, "task": 4}  (sleep without LLM calls '
    "until a matching note, the process or task sub-cycle finishing, or the timeout)",
    args=IdleArgs,
    effect="write_self",
)
def idle(cmd: Command, ctx: CommandContext) -> CommandResult:
    on = arg(cmd, "on", default=True)
    timeout_s = arg(cmd, "timeout_s", default=None, kind=float)
    if not on:
        ctx.managers.loop.idle_off(ctx.thread_id)
        return CommandResult("idle off")
    note_filter = {k: v for k, v in arg(cmd, "note_filter", default={}).items() if v is not None}
    try:
        wakes = ctx.managers.loop.idle_on(
            ctx.thread_id,
            tick=ctx.tick,
            now=ctx.now,
            timeout_s=timeout_s,
            wake_on_note=arg(cmd, "wake_on_note", default=True, kind=bool),
            note_filter=note_filter,
            process=arg(cmd, "process", default=None),
            task=arg(cmd, "task", default=None, kind=int),
        )
    except LoopError as exc:
        raise CommandError(f"cycle.idle: {exc}") from None
    return CommandResult("idle on until " + " or ".join(wakes))


@FAMILY.command(
    "cycle.concentration",
    '{"on": true, "tags": ["sea"], "emotions": ["joy", "anxiety:>=2"], "mode": "and|or"}  (an emotion with a threshold: name:≥N, >N, ≤N, <N)',  # noqa: E501
    args=ConcentrationArgs,
    effect="write_self",
)
def concentration(cmd: Command, ctx: CommandContext) -> CommandResult:
    if not arg(cmd, "on", default=True, kind=bool):
        ctx.managers.loop.set_context_mode(ctx.thread_id, "standard", root_thread=ctx.root_thread)
        return CommandResult("concentration off")
    logic = arg(cmd, "mode", default="or")
    tags, emotions = arg(cmd, "tags", default=[], kind=list), arg(cmd, "emotions", default=[], kind=list)
    if not tags and not emotions:
        raise CommandError("cycle.concentration: give tags and/or emotions to concentrate on")
    ctx.managers.loop.set_context_mode(
        ctx.thread_id,
        "concentration",
        root_thread=ctx.root_thread,
        focus_tags=tags,
        focus_emotions=emotions,
        focus_logic=logic,
    )
    return CommandResult(f"concentration on: tags {tags}, emotions {emotions} ({logic})")


@FAMILY.command(
    "cycle.meditation",
    '{"on": true}  (the most diverse thoughts and memories instead of the latest)',
    args=SwitchArgs,
    effect="write_self",
)
def meditation(cmd: Command, ctx: CommandContext) -> CommandResult:
    on = arg(cmd, "on", default=True, kind=bool)
    ctx.managers.loop.set_context_mode(ctx.thread_id, "meditation" if on else "standard", root_thread=ctx.root_thread)
    return CommandResult("meditation on" if on else "meditation off")
