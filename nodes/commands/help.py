"""help: the list of commands with their arguments, or one command's usage."""

from __future__ import annotations

from nodes.commands.model import Command
from nodes.commands.registry import CommandContext, CommandResult, command, handlers


def command_guide(only: str | None = None) -> str:
    specs = handlers()
    lines = [f"- {t} {spec.usage}" for t, spec in sorted(specs.items()) if only is None or t.startswith(only)]
    return "\n".join(lines) or f"no command matches {only!r}"


@command("help.show", '{"command": "notes"}  (usage of a command or family)')
def show_help(cmd: Command, ctx: CommandContext) -> CommandResult:
    return CommandResult(command_guide(cmd.args.get("command") or None), show=True)
