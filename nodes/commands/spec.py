"""What a command is: its spec (type, handler, usage, aliases and — required — its effect), the context a handler
runs in, and what it returns.

Effects, weakest first (the privilege model; the gate, managers/consent.py, reads them, never a family name or
alias):
- `read`: looks, and keeps only bookkeeping (read marks, last-used times);
- `write_self`: adds to or edits the persona's own records (notes, diary, tasks, goals, llm_memory…);
- `modify_self`: changes what the persona is or discards what it had — identity, a core-memory rewrite, the
  notepad cleared or rewritten, config, ethics, skills, and every delete (deletes archive; restorable);
- `external`: leaves the process (network, files outside the data dir, processes).
`modify_self` and `external` need the validators' consensus (+2), or, with no validators, the human's approval.
A spec may raise a command's effect for particular arguments (`escalate`), never lower it.

Besides its effect a spec may say what the consent gate must also know (managers/consent.py):
- `prompt_tier`: it writes a tier shown in every prompt (core memory, a notepad, strategies, scripts, config, who is
  trusted): from a tick that read untrusted text it waits for the owner;
- `relay`: it speaks as the persona to someone (messages.send, mesh.send): from a tick that read untrusted text it
  goes at once only to whoever wrote in that tick (a reply), else it waits for the owner;
- `owner_only`: only the owner ever decides it (adopting a mesh consensus into the ethics), never the validators
  or `consent.auto_approve`.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any, NotRequired

from typing_extensions import TypedDict

from managers import ManagerDeps, Managers
from managers.audience import ALONE, Audience
from managers.consent import EFFECTS, PRIVILEGED, Asked, Effect
from memory.provenance import Source
from nodes.commands.args import Args, NoArgs, check_args, describe
from nodes.commands.model import Command


@dataclass
class CommandContext:
    house: Managers  # the unit of work (its transaction) the command's effect and its exactly-once record share
    thread_id: str
    tick: int
    llm_id: str | None
    settings: Any  # persona.settings.Settings
    now: datetime
    events: list[dict[str, Any]] = field(default_factory=list)  # shown live after commit
    services: Any = None  # nodes.context.Services, for handlers that call a model (stelis.end)
    root_thread: str | None = None
    task_id: int | None = None  # set in a task's sub-cycle: what it writes is marked as the task's
    registry: Any = None  # nodes.commands.Registry (help.show lists it)
    after_commit: list[Callable[[], None]] = field(default_factory=list)  # e.g. start a process its row records
    audience: Audience = ALONE  # whom the tick answers: what the managers read is what they may see

    @cached_property
    def managers(self) -> Managers:
        """The domain managers over this command's transaction (managers/), in the audience's scope."""
        services = self.services
        return self.house.with_deps(
            ManagerDeps(
                settings=self.settings,
                clock=lambda: self.now,
                memory=getattr(services, "memory", None),
                llms=getattr(services, "llms", None),
            ),
            actor=self.audience,
        )

    def emit(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def then(self, action: Callable[[], None]) -> None:
        """Run `action` once the command's transaction has committed (never if it rolls back)."""
        self.after_commit.append(action)


@dataclass
class CommandResult:
    output: str = "ok"
    status: str = "executed"  # executed | failed
    show: bool = False  # also put the output in process_log, for the next tick's context
    thread_id: str | None = None  # the thread whose process_log shows it (default: the command's own)
    sources: list[Source] = field(default_factory=list)  # untrusted text in `output` (memory/provenance.py)


class Addressee(TypedDict):
    """Whom a relaying command speaks to, as the gate compares them with who wrote the tick's text."""

    label: str  # for the owner: "Bob (trusted)", "peer ada", "http://…"
    person: NotRequired[int]
    peer: NotRequired[str]


class CommandError(ValueError):
    """Bad arguments: recorded as a failed command with this message; never crashes the tick."""


Handler = Callable[[Command, CommandContext], CommandResult]


@dataclass(frozen=True)
class CommandSpec:
    type: str
    handler: Handler
    effect: Effect
    usage: str
    aliases: tuple[str, ...] = ()
    escalate: Callable[[dict[str, Any]], Effect | None] | None = None  # a stronger effect for these arguments
    args: builtins.type[Args] = NoArgs  # `type` is the command's name in this class
    # why the command cannot run with these settings (None: it can); the guide says so, and it is refused before
    # the consent gate (nothing waits for an approval it could never use)
    unavailable: Callable[[Any], str | None] | None = None
    # the tier shown in every prompt that it writes (core memory, a notepad, strategies, scripts): from a tick
    # whose prompt held untrusted text it waits for the owner (memory/provenance.py)
    prompt_tier: str | None = None
    # whom it speaks to as the persona (None: nobody it can name, e.g. bad arguments; the handler says so)
    relay: Callable[[Command, CommandContext], Addressee | None] | None = None
    owner_only: str | None = None  # why only the owner decides it, whatever the validators or auto_approve say
    # a read command that shows only what the tick's audience may see (its manager reads in their scope,
    # managers/audience.py): it runs while the persona answers a guest or a peer, where any other read does not
    scoped: bool = False

    def __post_init__(self) -> None:
        if self.effect not in EFFECTS:
            raise ValueError(f"command {self.type}: effect must be one of {', '.join(EFFECTS)}, not {self.effect!r}")

    def check(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The arguments validated by the command's model (ArgsError says which one is wrong and why)."""
        return check_args(self.type, self.args, raw)

    def help(self) -> str:
        return f"{self.type} {self.usage}\n    arguments: {describe(self.args)}"

    def off_because(self, settings: Any) -> str | None:
        return self.unavailable(settings) if self.unavailable is not None and settings is not None else None

    def effect_for(self, args: dict[str, Any]) -> Effect:
        """The effect of running it with `args`: the declared one, or a stronger one the spec names."""
        raised = self.escalate(args) if self.escalate is not None else None
        if raised is not None and EFFECTS.index(raised) > EFFECTS.index(self.effect):
            return raised
        return self.effect

    def asked(self, args: dict[str, Any]) -> Asked:
        """What the consent gate is asked when it runs with `args` (managers/consent.py)."""
        return Asked(self.type, self.effect_for(args), prompt_tier=self.prompt_tier, owner_only=self.owner_only)

    @property
    def family(self) -> str:
        return self.type.split(".", 1)[0]


class Family:
    """The commands of one module: `@FAMILY.command(...)` adds a spec to this family (and nowhere else); the
    registry (nodes/commands/__init__.py) lists the families explicitly."""

    def __init__(self, name: str, about: str, *, compact: bool = False, abouts: dict[str, str] | None = None):
        self.name = name
        self.about = about
        self.abouts = dict(abouts or {})  # what each command prefix is for, when the family has several
        self.compact = compact  # the prompt's guide gives it one line per command prefix (help.show has the rest)
        self.specs: list[CommandSpec] = []

    def command(
        self,
        type_: str,
        usage: str,
        *,
        effect: Effect,
        args: type[Args] = NoArgs,
        aliases: tuple[str, ...] = (),
        escalate: Callable[[dict[str, Any]], Effect | None] | None = None,
        unavailable: Callable[[Any], str | None] | None = None,
        prompt_tier: str | None = None,
        relay: Callable[[Command, CommandContext], Addressee | None] | None = None,
        owner_only: str | None = None,
        scoped: bool = False,
    ) -> Callable[[Handler], Handler]:
        def add(handler: Handler) -> Handler:
            self.specs.append(
                CommandSpec(
                    type_,
                    handler,
                    effect,
                    usage,
                    aliases,
                    escalate,
                    args,
                    unavailable,
                    prompt_tier,
                    relay,
                    owner_only,
                    scoped,
                )
            )
            return handler

        return add


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


__all__ = [
    "EFFECTS",
    "PRIVILEGED",
    "Addressee",
    "Asked",
    "CommandContext",
    "CommandError",
    "CommandResult",
    "CommandSpec",
    "Effect",
    "Family",
    "Handler",
    "arg",
]
