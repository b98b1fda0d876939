"""The command handler registry: `type` -> handler, with the help text every prompt teaches."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable

from memory import Repos
from nodes.commands.model import Command


@dataclass
class CommandContext:
    repos: Repos  # the transaction the command's effect and its exactly-once record share
    thread_id: str
    tick: int
    llm_id: str | None
    settings: Any
    now: datetime
    events: list[dict[str, Any]] = field(default_factory=list)  # shown live after commit
    services: Any = None  # nodes.context.Services, for handlers that call a model (stelis.end)
    root_thread: str | None = None
    task_id: int | None = None  # set in a task's sub-cycle: what it writes is marked as the task's

    def emit(self, event: dict[str, Any]) -> None:
        self.events.append(event)


@dataclass
class CommandResult:
    output: str = "ok"
    status: str = "executed"  # executed | failed
    show: bool = False  # also put the output in process_log, for the next tick's context
    thread_id: str | None = None  # the thread whose process_log shows it (default: the command's own)


class CommandError(ValueError):
    """Bad arguments: recorded as a failed command with this message; never crashes the tick."""


Handler = Callable[[Command, CommandContext], CommandResult]


@dataclass
class CommandSpec:
    type: str
    handler: Handler
    usage: str
    dangerous: bool = False


_HANDLERS: dict[str, CommandSpec] = {}


def command(type_: str, usage: str, *, dangerous: bool = False) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        _HANDLERS[type_] = CommandSpec(type_, handler, usage, dangerous)
        return handler

    return register


def handlers() -> dict[str, CommandSpec]:
    from nodes.commands import (  # noqa: F401  (registers handlers)
        abstracts, concepts, config, cycle, diary, facts, goals, help, identity, llm_memory, memory, messages, notes, stelis,
        tags,
    )

    return _HANDLERS


def arg(cmd: Command, *names: str, default: Any = ..., kind: type | None = None) -> Any:
    """The first of `names` present in the args, converted to `kind`; CommandError if required and missing."""
    for name in names:
        if name in cmd.args and cmd.args[name] not in (None, ""):
            value = cmd.args[name]
            if kind is None:
                return value
            try:
                if kind is bool and isinstance(value, str):
                    return value.strip().lower() in ("1", "true", "yes", "on")
                if kind is list and isinstance(value, str):
                    return [v.strip() for v in value.split(",") if v.strip()]
                return kind(value)
            except (TypeError, ValueError) as exc:
                raise CommandError(f"{cmd.type}: argument {name!r} must be {kind.__name__}, got {value!r}") from exc
    if default is ...:
        raise CommandError(f"{cmd.type}: missing argument {names[0]!r}")
    return default
