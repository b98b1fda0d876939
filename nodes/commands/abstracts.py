"""abstracts (HMP): thematic digests with the ids of their sources."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import Field

from managers.abstracts import Delivery
from memory.models import Abstract
from nodes.commands.args import Args, Days, Id, Limit, Refs, Text, Title, Words, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandResult, Family, arg

FAMILY = Family("abstracts", "thematic digests")


class AbstractsListArgs(Args):
    tags: Words | None = None
    days: Days | None = None
    limit: Limit = 5


class AbstractIdArgs(Args):
    id: Id


class AbstractAddArgs(Args):
    title: Title = "untitled"
    summary: Text | None = Field(None, validation_alias=names("summary", "text"))  # none: make one from my thoughts
    tags: Words = []
    sources: Refs = []


class AbstractUpdateArgs(AbstractIdArgs):
    text: Text = Field(validation_alias=names("text", "summary"))
    sources: Refs = []


class AbstractModeArgs(Args):
    mode: Literal["auto", "manual"]


def abstract_line(a: Abstract) -> str:
    tags = f" #{' #'.join(a.tags)}" if a.tags else ""
    return f"[abstract {a.id} {a.created_at:%Y-%m-%d} {a.title}]{tags} {a.summary} (sources: {', '.join(a.sources) or '—'})"  # noqa: E501


@FAMILY.command("abstracts.list", '{"tags": ["sea"], "days": 7, "limit": 5}', args=AbstractsListArgs, effect="read")
def list_abstracts(cmd: Command, ctx: CommandContext) -> CommandResult:
    days = arg(cmd, "days", default=None, kind=int)
    rows = ctx.managers.abstracts.list(
        tags=arg(cmd, "tags", default=None, kind=list),
        limit=arg(cmd, "limit", default=5, kind=int),
        since=ctx.now - timedelta(days=days) if days else None,
    )
    return CommandResult("\n".join(abstract_line(a) for a in rows) or "no abstracts", show=True)


@FAMILY.command("abstracts.read", '{"id": 2}', args=AbstractIdArgs, effect="read")
def read_abstract(cmd: Command, ctx: CommandContext) -> CommandResult:
    return CommandResult(abstract_line(ctx.managers.abstracts.get(arg(cmd, "id", kind=int))), show=True)


@FAMILY.command(
    "abstracts.add",
    '{"title": "…", "summary": "…", "tags": […], "sources": ["message:12"]}  '
    "(or {} to ask for one to be made from my recent thoughts)",
    args=AbstractAddArgs,
    effect="write_self",
)
def add_abstract(cmd: Command, ctx: CommandContext) -> CommandResult:
    if not cmd.args.get("summary"):
        ctx.managers.abstracts.request(ctx.root_thread or ctx.thread_id, "requested", "asked by the persona")
        return CommandResult("an abstract of my recent thoughts will be made after this tick")
    row = ctx.managers.abstracts.add(
        str(arg(cmd, "title", default="untitled")),
        str(arg(cmd, "summary")),
        tags=arg(cmd, "tags", default=[], kind=list),
        sources=arg(cmd, "sources", default=[], kind=list),
        thread_id=ctx.thread_id,
    )
    return CommandResult(f"abstract {row.id} added")


@FAMILY.command(
    "abstracts.update",
    '{"id": 2, "text": "what to add", "sources": ["diary:4"]}',
    args=AbstractUpdateArgs,
    effect="write_self",
)
def update_abstract(cmd: Command, ctx: CommandContext) -> CommandResult:
    abstract_id = arg(cmd, "id", kind=int)
    ctx.managers.abstracts.extend(
        abstract_id, str(arg(cmd, "text")), arg(cmd, "sources", default=[], kind=list), thread_id=ctx.thread_id
    )
    return CommandResult(f"abstract {abstract_id} extended")


@FAMILY.command(
    "abstracts.mode",
    '{"mode": "manual"}  (auto: made on their triggers and the newest shown to me each '
    "tick; manual: made and read only when I ask)",
    args=AbstractModeArgs,
    effect="write_self",
)
def abstracts_mode(cmd: Command, ctx: CommandContext) -> CommandResult:
    mode: Delivery = "manual" if arg(cmd, "mode") == "manual" else "auto"
    ctx.managers.abstracts.set_delivery(ctx.thread_id, mode)
    return CommandResult(f"abstracts: {mode}")
