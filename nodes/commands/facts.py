"""facts (HMP UnverifiedFacts): the claims I marked as unsure, and their fact-checks."""

from __future__ import annotations

from pydantic import Field

from memory.models import UnverifiedFact
from nodes.commands.args import Args, Description, Id, Limit, Word, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandResult, Family, arg

FAMILY = Family("facts", "unverified facts")


class FactsListArgs(Args):
    status: Word | None = None
    limit: Limit = 10


class FactResolveArgs(Args):
    id: Id
    resolution: Description = Field("", validation_alias=names("resolution", "reason"))


def fact_line(f: UnverifiedFact) -> str:
    task = f" task {f.task_id}" if f.task_id else ""
    resolution = f" — {f.resolution}" if f.resolution else ""
    return f"[fact {f.id} {f.status} confidence {f.confidence:.2f}{task}] {f.claim}{resolution}"


@FAMILY.command(
    "facts.list",
    '{"status": "pending", "limit": 10}  (open | pending | verified | rejected)',
    args=FactsListArgs,
    effect="read",
)
def list_facts(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.managers.facts.list(
        status=arg(cmd, "status", default=None), limit=arg(cmd, "limit", default=10, kind=int)
    )
    return CommandResult("\n".join(fact_line(f) for f in rows) or "no unverified facts", show=True)


@FAMILY.command(
    "facts.verify", '{"id": 3, "resolution": "confirmed by the tide tables"}', args=FactResolveArgs, effect="write_self"
)
@FAMILY.command(
    "facts.reject", '{"id": 3, "resolution": "the source said otherwise"}', args=FactResolveArgs, effect="write_self"
)
def resolve_fact(cmd: Command, ctx: CommandContext) -> CommandResult:
    status = "verified" if cmd.type == "facts.verify" else "rejected"
    fact = ctx.managers.facts.resolve(
        arg(cmd, "id", kind=int), status, str(arg(cmd, "resolution", default="")), by=cmd.type, thread_id=ctx.thread_id
    )
    return CommandResult(fact_line(fact))
