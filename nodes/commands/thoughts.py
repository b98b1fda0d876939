"""thoughts: my own thoughts (HMP `llm_recent_responses`) — flagging one as a reasoning error (`self_error`), and
the cleanup of outdated ones. The rules are managers/thoughts.py's."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from managers.errors import NotFound
from nodes.commands.args import Args, Description, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg

FAMILY = Family("thoughts", "my own thoughts")

SELF_ERROR = "thoughts.self_error"


class SelfErrorArgs(Args):
    reason: Description = Field(min_length=1, validation_alias=names("reason", "why", "error", "text"))
    tick: int | None = Field(None, ge=0, description="an earlier thought's tick (none: this thought)")


class CleanupArgs(Args):
    days: float = Field(30.0, ge=0, le=36_500)
    keep: int = Field(100, ge=10, le=10_000)


def flags_this_thought(args: dict[str, Any], tick: int) -> bool:
    """Whether a self_error command flags the thought of the tick it is in."""
    return args.get("tick") in (None, tick)


@FAMILY.command(
    SELF_ERROR,
    '{"reason": "what was wrong in my reasoning", "tick": 12}  (no tick: this thought — its '
    "other commands then do not run)",
    args=SelfErrorArgs,
    effect="write_self",
    aliases=("self_error",),
)
def self_error(cmd: Command, ctx: CommandContext) -> CommandResult:
    tick = arg(cmd, "tick", default=None, kind=int)
    reason = str(arg(cmd, "reason"))
    try:
        flagged = ctx.managers.thoughts.flag_error(
            ctx.thread_id, ctx.tick if tick is None else tick, reason, task_id=ctx.task_id, flagged_at=ctx.tick
        )
    except NotFound as exc:
        raise CommandError(f"{SELF_ERROR}: {exc}") from None
    left = " and left my recall" if flagged.archived else ""
    return CommandResult(f"my thought at tick {flagged.tick} is marked as a reasoning error{left}: {reason}")


@FAMILY.command(
    "thoughts.cleanup",
    '{"days": 30, "keep": 100}  (my thoughts older than this leave recall, but each '
    "thread's newest `keep` and what I pinned; restorable; needs my human's approval)",
    args=CleanupArgs,
    effect="modify_self",
)
def cleanup(cmd: Command, ctx: CommandContext) -> CommandResult:
    days = float(arg(cmd, "days", default=30.0, kind=float))
    keep = int(arg(cmd, "keep", default=100, kind=int))
    archived = ctx.managers.thoughts.cleanup(days=days, keep=keep)
    return CommandResult(
        f"{archived} thought(s) older than {days:g} days left my recall (each thread keeps its newest "
        f"{keep}; memory.restore brings one back)"
    )
