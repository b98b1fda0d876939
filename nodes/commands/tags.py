"""tags stats (HMP): how often each tag is used, per source or over all of them."""

from __future__ import annotations

from typing import Annotated, Literal

from nodes.commands.args import Args, lowered
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandResult, Family, arg

FAMILY = Family("tags", "tag statistics")


class TagStatsArgs(Args):
    source: Annotated[Literal["all", "diary", "concepts", "links", "goals", "tasks"], lowered] = "all"


@FAMILY.command("tags.stats", '{"source": "all|diary|concepts|links|goals|tasks"}', args=TagStatsArgs, effect="read")
def stats(cmd: Command, ctx: CommandContext) -> CommandResult:
    counts = ctx.managers.tags.stats(str(arg(cmd, "source", default="all")))
    return CommandResult(", ".join(f"{tag}: {n}" for tag, n in counts.items()) or "no tags yet", show=True)
