"""tags stats (HMP): how often each tag is used, per source or over all of them."""

from __future__ import annotations

from memory.tiers import tag_stats
from nodes.commands.model import Command
from nodes.commands.registry import CommandContext, CommandResult, arg, command


@command("tags.stats", '{"source": "all|diary|concepts|links|goals|tasks"}')
def stats(cmd: Command, ctx: CommandContext) -> CommandResult:
    counts = tag_stats(ctx.repos.session, str(arg(cmd, "source", default="all")))
    return CommandResult(", ".join(f"{tag}: {n}" for tag, n in counts.items()) or "no tags yet", show=True)
