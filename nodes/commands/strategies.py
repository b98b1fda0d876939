"""stagnation_strategies and thinking_methods (HMP "Утилиты и расширения"): the loop-breaking mechanisms my
anti-stagnation escalation chooses from (nodes/reflexes/anti_stagnation/escalation.py) and the ways of thinking
its random iteration draws, as data I can list, extend and prune. My own strategy is an instruction of a class
(external, context, internal, radical) and a cost; the escalation places it among the built-in ones by those, and
prefers whatever more often brought novelty back. Deleting archives (restorable) and needs my human's approval:
it changes how I get out of a loop."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from nodes.commands.args import Args, Ref, lowered, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg
from nodes.reflexes.anti_stagnation.escalation import MECHANISMS, THINKING_METHODS

FAMILY = Family("strategies", "how I break out of loops, and ways of thinking",
                compact=True, abouts={"stagnation_strategies": "how I break out of loops, and how well each worked", "thinking_methods": "ways of thinking my loop-breaking draws from"})

Name = Annotated[str, StringConstraints(strip_whitespace=True, pattern=r"^[a-z0-9][a-z0-9_-]{1,63}$", to_lower=True)]
Instruction = Annotated[str, StringConstraints(strip_whitespace=True, min_length=8, max_length=600)]


class StrategyAddArgs(Args):
    name: Name
    instruction: Instruction = Field(validation_alias=names("instruction", "text", "description"))
    mechanism_class: Annotated[Literal["external", "context", "internal", "radical"], lowered] = Field(
        "internal", validation_alias=names("class", "mechanism_class", "kind"))
    cost: int = Field(2, ge=1, le=5)


class MethodAddArgs(Args):
    name: Name
    instruction: Instruction = Field(validation_alias=names("instruction", "text", "description"))


class RefArgs(Args):
    name: Ref = Field(validation_alias=names("name", "id"))


class ListArgs(Args):
    archived: bool = False


def _added(ctx: CommandContext, cmd: Command, add):
    _ensure(ctx)
    try:
        return add()
    except ValueError as exc:  # the name is taken
        raise CommandError(f"{cmd.type}: {exc}") from None


def _archive(ctx: CommandContext, cmd: Command, repo, tier: str) -> CommandResult:
    _ensure(ctx)
    row = repo.find(arg(cmd, "name"))
    if not repo.archive(row.id):
        raise CommandError(f"{cmd.type}: {row.name} is archived already")
    return CommandResult(f'{repo.what} {row.name} archived; memory.restore {{"tier": "{tier}", "ref": "{row.id}"}} '
                         "brings it back")


def _ensure(ctx: CommandContext) -> None:
    ctx.repos.strategies.ensure(MECHANISMS)
    ctx.repos.methods.ensure(THINKING_METHODS)


@FAMILY.command("stagnation_strategies.list", '{"archived": false}  (how I break out of loops, and how well each worked)',
                args=ListArgs, effect="read")
def list_strategies(cmd: Command, ctx: CommandContext) -> CommandResult:
    _ensure(ctx)
    rows = ctx.repos.strategies.list(include_archived=arg(cmd, "archived", default=False, kind=bool))
    lines = [f"- [{r.id}] {r.name} ({r.mechanism_class}, cost {r.cost}{', built in' if r.builtin else ''}"
             f"{', archived' if r.status != 'active' else ''}): used {r.uses}×, helped {r.helped}×"
             f"{' — ' + r.instruction if r.instruction else ''}" for r in rows]
    return CommandResult("\n".join(lines), show=True)


@FAMILY.command("stagnation_strategies.add", '{"name": "ask_why_five_times", "instruction": "…", "class": "internal", '
                '"cost": 2}', args=StrategyAddArgs, effect="write_self", prompt_tier="loop-breaking strategies")
def add_strategy(cmd: Command, ctx: CommandContext) -> CommandResult:
    row = _added(ctx, cmd, lambda: ctx.repos.strategies.add(
        arg(cmd, "name"), arg(cmd, "mechanism_class", default="internal"), arg(cmd, "cost", default=2, kind=int),
        str(arg(cmd, "instruction"))))
    return CommandResult(f"strategy {row.id} {row.name} added ({row.mechanism_class}, cost {row.cost})")


@FAMILY.command("stagnation_strategies.delete", '{"name": "pause"}  (archives it; needs my human\'s approval)',
                args=RefArgs, effect="modify_self")
def delete_strategy(cmd: Command, ctx: CommandContext) -> CommandResult:
    return _archive(ctx, cmd, ctx.repos.strategies, "strategy")


@FAMILY.command("thinking_methods.list", '{"archived": false}', args=ListArgs, effect="read")
def list_methods(cmd: Command, ctx: CommandContext) -> CommandResult:
    _ensure(ctx)
    rows = ctx.repos.methods.list(include_archived=arg(cmd, "archived", default=False, kind=bool))
    return CommandResult("\n".join(f"- [{r.id}] {r.name}{' (archived)' if r.status != 'active' else ''}, drawn "
                                   f"{r.uses}×: {r.instruction}" for r in rows), show=True)


@FAMILY.command("thinking_methods.add", '{"name": "reverse", "instruction": "Start from the end and work back."}',
                args=MethodAddArgs, effect="write_self", prompt_tier="thinking methods")
def add_method(cmd: Command, ctx: CommandContext) -> CommandResult:
    row = _added(ctx, cmd, lambda: ctx.repos.methods.add(arg(cmd, "name"), str(arg(cmd, "instruction"))))
    return CommandResult(f"thinking method {row.id} {row.name} added")


@FAMILY.command("thinking_methods.delete", '{"name": "analogy"}  (archives it; needs my human\'s approval)',
                args=RefArgs, effect="modify_self")
def delete_method(cmd: Command, ctx: CommandContext) -> CommandResult:
    return _archive(ctx, cmd, ctx.repos.methods, "thinking_method")



