"""help: the list of commands with their arguments, or one command's usage."""

from __future__ import annotations

from nodes.commands.args import Args, Title
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandResult, Family

FAMILY = Family("help", "the list of commands")


class HelpArgs(Args):
    command: Title | None = None


@FAMILY.command(
    "help.show",
    '{"command": "notes"}  (usage of a command or family)',
    args=HelpArgs,
    effect="read",
    scoped=True,
    aliases=("help",),
)
def show_help(cmd: Command, ctx: CommandContext) -> CommandResult:
    return CommandResult(ctx.registry.guide(cmd.args.get("command") or None), show=True)
