"""Commands: one model, the parser for the three syntaxes, and one handler module per family."""

from nodes.commands.model import Command
from nodes.commands.parser import ParseResult, parse_commands
from nodes.commands.registry import CommandContext, CommandError, CommandResult, CommandSpec, handlers

__all__ = ["Command", "CommandContext", "CommandError", "CommandResult", "CommandSpec", "ParseResult",
           "handlers", "parse_commands"]
