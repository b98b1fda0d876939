"""Commands imported when they run: `run.py say …` imports cli/talk.py and what `say` uses, not the twenty modules
(and the LangGraph, Chroma and model stacks) behind the other commands.

Click's lazy-group pattern (`list_commands` / `get_command` over a table of name → "module:attribute"), for typer: a
command's module is imported, and its click command built by typer exactly as `app.command()` / `app.add_typer()`
would, the first time the group is asked for it. The group's own help lists every command with its help line read
from its module's source (the function's docstring, or the `typer.Typer(help=…)` of a command family) — so
`run.py --help` imports none of them either.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
from collections.abc import Mapping
from difflib import get_close_matches
from pathlib import Path
from typing import Any, ClassVar

import typer
from typer._click import Command, Context, HelpFormatter  # typer vendors click: its groups take these
from typer._click.exceptions import UsageError
from typer.core import TyperCommand, TyperGroup


def _attribute(where: str) -> tuple[str, str]:
    module, _, attribute = where.partition(":")
    return module, attribute


def help_in_source(where: str) -> str | None:
    """The help of the command `where` names ("module:attribute"), read from its module's source without importing
    it: a function's docstring, or the literal `help=` of `attribute = typer.Typer(…)`; None when it is not there."""
    module, attribute = _attribute(where)
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == attribute:
            return ast.get_docstring(node)  # cleaned as inspect.getdoc cleans what typer reads
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == attribute for t in node.targets)
            and isinstance(node.value, ast.Call)
        ):
            for keyword in node.value.keywords:
                if keyword.arg == "help":
                    try:
                        value = ast.literal_eval(keyword.value)
                    except ValueError:
                        return None
                    return inspect.cleandoc(value) if isinstance(value, str) else None
    return None


def first_paragraph(text: str) -> str:
    """What a group's command listing shows of a help text (typer's and click's listings cut it here)."""
    return inspect.cleandoc(text).split("\n\n")[0]


class LazyGroup(TyperGroup):
    """A typer group whose commands (`lazy_commands`: name → "module:attribute", a command function or a
    `typer.Typer` family) are imported the first time they are asked for; listed in that order, before any command
    added the ordinary way."""

    lazy_commands: ClassVar[Mapping[str, str]] = {}

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self._listing = False

    def list_commands(self, ctx: Context) -> list[str]:
        return [*self.lazy_commands, *(name for name in self.commands if name not in self.lazy_commands)]

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name in self.commands or cmd_name not in self.lazy_commands:
            return self.commands.get(cmd_name)
        if self._listing:
            summary = self._summary(cmd_name)
            if summary is not None:
                return summary
        command = self.commands[cmd_name] = self.load(cmd_name)
        return command

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        """The group's help: its commands listed from their help lines, none of them imported."""
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        """typer's, whose "Did you mean …?" knows only the commands loaded so far: here it knows them all."""
        try:
            return super().resolve_command(ctx, args)
        except UsageError as exc:
            if self.suggest_commands and args and "Did you mean" not in exc.message:
                matches = get_close_matches(args[0], self.list_commands(ctx))
                if matches:
                    exc.message = f"{exc.message.rstrip('.')}. Did you mean {', '.join(repr(m) for m in matches)}?"
            raise

    def _summary(self, name: str) -> Command | None:
        """A stand-in that only shows `name`'s help line in a listing (None: the help is not in the source)."""
        text = help_in_source(self.lazy_commands[name])
        if text is None:
            return None
        return TyperCommand(name=name, help=first_paragraph(text), rich_markup_mode=self.rich_markup_mode)

    def load(self, name: str) -> Command:
        """The click command of `name`, built by typer as `app.command()` / `app.add_typer(…, name=name)` builds it
        on a typer app of default settings (the app's: cli/__init__.py)."""
        module, attribute = _attribute(self.lazy_commands[name])
        target = getattr(importlib.import_module(module), attribute)
        shell = typer.Typer(rich_markup_mode=self.rich_markup_mode, suggest_commands=self.suggest_commands)
        if isinstance(target, typer.Typer):
            shell.add_typer(target, name=name)
        else:
            shell.command(name=name)(target)
        return typer.main.get_group(shell).commands[name]
