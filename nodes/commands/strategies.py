"""stagnation_strategies and thinking_methods (HMP "Утилиты и расширения"): the loop-breaking mechanisms my
anti-stagnation escalation chooses from (nodes/reflexes/anti_stagnation/escalation.py) and the ways of thinking
its random iteration draws, as data I can list, extend and prune (managers/strategies.py holds the rules and seeds
the built-in ones). My own strategy is an instruction of a class (external, context, internal, radical) and a cost;
the escalation places it among the built-in ones by those, and prefers whatever more often brought novelty back.
Deleting archives (restorable) and needs my human's approval: it changes how I get out of a loop."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, StringConstraints

from managers.errors import Refused
from nodes.commands.args import Args, Ref, lowered, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg

if TYPE_CHECKING:
    from memory.models import StagnationStrategy, ThinkingMethod

FAMILY = Family(
    "strategies",
    "how I break out of loops, and ways of thinking",
    compact=True,
    abouts={
        "stagnation_strategies": "how I break out of loops, and how well each worked",
        "thinking_methods": "ways of thinking my loop-breaking draws from",
    },
)

Name = Annotated[str, StringConstraints(strip_whitespace=True, pattern=r"^[a-z0-9][a-z0-9_-]{1,63}$", to_lower=True)]
Instruction = Annotated[str, StringConstraints(strip_whitespace=True, min_length=8, max_length=600)]


class StrategyAddArgs(Args):
    name: Name
    instruction: Instruction = Field(validation_alias=names("instruction", "text", "description"))
    mechanism_class: Annotated[Literal["external", "context", "internal", "radical"], lowered] = Field(
        "internal", validation_alias=names("class", "mechanism_class", "kind")
    )
    cost: int = Field(2, ge=1, le=5)


class MethodAddArgs(Args):
    name: Name
    instruction: Instruction = Field(validation_alias=names("instruction", "text", "description"))


class RefArgs(Args):
    name: Ref = Field(validation_alias=names("name", "id"))


class ListArgs(Args):
    archived: bool = False


def _refused(cmd: Command, exc: Refused) -> CommandError:
    return CommandError(f"{cmd.type}: {exc}")


def _archived(what: str, row: StagnationStrategy | ThinkingMethod, tier: str) -> CommandResult:
    return CommandResult(
        f'{what} {row.name} archived; memory.restore {{"tier": "{tier}", "ref": "{row.id}"}} brings it back'
    )


@FAMILY.command(
    "stagnation_strategies.list",
    '{"archived": false}  (how I break out of loops, and how well each worked)',
    args=ListArgs,
    effect="read",
)
def list_strategies(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.managers.strategies.strategies(include_archived=arg(cmd, "archived", default=False, kind=bool))
    lines = [
        f"- [{r.id}] {r.name} ({r.mechanism_class}, cost {r.cost}{', built in' if r.builtin else ''}"
        f"{', archived' if r.status != 'active' else ''}): used {r.uses}×, helped {r.helped}×"
        f"{' — ' + r.instruction if r.instruction else ''}"
        for r in rows
    ]
    return CommandResult("\n".join(lines), show=True)


@FAMILY.command(
    "stagnation_strategies.add",
    '{"name": "ask_why_five_times", "instruction": "…", "class": "internal", "cost": 2}',
    args=StrategyAddArgs,
    effect="write_self",
    prompt_tier="loop-breaking strategies",
)
def add_strategy(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        row = ctx.managers.strategies.add_strategy(
            name=arg(cmd, "name"),
            mechanism_class=arg(cmd, "mechanism_class", default="internal"),
            cost=arg(cmd, "cost", default=2, kind=int),
            instruction=str(arg(cmd, "instruction")),
        )
    except Refused as exc:
        raise _refused(cmd, exc) from None
    return CommandResult(f"strategy {row.id} {row.name} added ({row.mechanism_class}, cost {row.cost})")


@FAMILY.command(
    "stagnation_strategies.delete",
    '{"name": "pause"}  (archives it; needs my human\'s approval)',
    args=RefArgs,
    effect="modify_self",
)
def delete_strategy(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        row = ctx.managers.strategies.archive_strategy(arg(cmd, "name"))
    except Refused as exc:
        raise _refused(cmd, exc) from None
    return _archived("stagnation strategy", row, "strategy")


@FAMILY.command("thinking_methods.list", '{"archived": false}', args=ListArgs, effect="read")
def list_methods(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.managers.strategies.methods(include_archived=arg(cmd, "archived", default=False, kind=bool))
    return CommandResult(
        "\n".join(
            f"- [{r.id}] {r.name}{' (archived)' if r.status != 'active' else ''}, drawn {r.uses}×: {r.instruction}"
            for r in rows
        ),
        show=True,
    )


@FAMILY.command(
    "thinking_methods.add",
    '{"name": "reverse", "instruction": "Start from the end and work back."}',
    args=MethodAddArgs,
    effect="write_self",
    prompt_tier="thinking methods",
)
def add_method(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        row = ctx.managers.strategies.add_method(name=arg(cmd, "name"), instruction=str(arg(cmd, "instruction")))
    except Refused as exc:
        raise _refused(cmd, exc) from None
    return CommandResult(f"thinking method {row.id} {row.name} added")


@FAMILY.command(
    "thinking_methods.delete",
    '{"name": "analogy"}  (archives it; needs my human\'s approval)',
    args=RefArgs,
    effect="modify_self",
)
def delete_method(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        row = ctx.managers.strategies.archive_method(arg(cmd, "name"))
    except Refused as exc:
        raise _refused(cmd, exc) from None
    return _archived("thinking method", row, "thinking_method")
