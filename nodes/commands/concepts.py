"""concepts & links: the semantic graph (HMP `concepts`, `links`)."""

from __future__ import annotations

from pydantic import Field

from memory.models import Concept, ConceptLink
from nodes.commands.args import Args, Description, Id, Limit, Ref, Title, Weight, Word, Words, names
from nodes.commands.memory import archive_one
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandResult, Family, arg

FAMILY = Family("concepts", "the semantic graph")


class ConceptAddArgs(Args):
    name: Title
    description: Description = Field("", validation_alias=names("description", "text"))
    tags: Words = []
    weight: Weight = 1.0


class ConceptsListArgs(Args):
    limit: Limit = 30
    archived: bool = False


class ConceptRefArgs(Args):
    id: Ref = Field(validation_alias=names("id", "name"))


class ConceptUpdateArgs(ConceptRefArgs):
    new_name: Title | None = None
    description: Description | None = None
    tags: Words | None = None
    weight: Weight | None = None


class LinkAddArgs(Args):
    source: Ref = Field(validation_alias=names("source", "source_id"))
    target: Ref = Field(validation_alias=names("target", "target_id"))
    relation: Word = "related_to"
    weight: Weight = 1.0
    tags: Words = []


class LinksListArgs(Args):
    concept: Ref | None = Field(None, validation_alias=names("concept", "concept_id"))


class LinkIdArgs(Args):
    id: Id


class LinkUpdateArgs(LinkIdArgs):
    relation: Word | None = None
    weight: Weight | None = None
    tags: Words | None = None


def concept_line(c: Concept) -> str:
    flags = " pinned" if c.pinned else ""
    return f"[concept {c.id} {c.name}{flags} weight {c.weight:g}] {c.description}"


def link_line(link: ConceptLink, names: dict[int, str]) -> str:
    return (
        f"[link {link.id}] {names.get(link.source_id, link.source_id)} —{link.relation}→ "
        f"{names.get(link.target_id, link.target_id)} (weight {link.weight:g})"
    )


@FAMILY.command(
    "concepts.add", '{"name": "tide", "description": "…", "tags": ["sea"]}', args=ConceptAddArgs, effect="write_self"
)
def add_concept(cmd: Command, ctx: CommandContext) -> CommandResult:
    c = ctx.managers.concepts.add(
        str(arg(cmd, "name")),
        str(arg(cmd, "description", default="")),
        tags=arg(cmd, "tags", default=[], kind=list),
        weight=arg(cmd, "weight", default=1.0, kind=float),
    )
    return CommandResult(f"concept {c.id} {c.name!r} added")


@FAMILY.command("concepts.list", '{"limit": 30, "archived": false}', args=ConceptsListArgs, effect="read")
def list_concepts(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.managers.concepts.list(
        limit=arg(cmd, "limit", default=30, kind=int), include_archived=arg(cmd, "archived", default=False, kind=bool)
    )
    return CommandResult("\n".join(concept_line(c) for c in rows) or "no concepts", show=True)


@FAMILY.command(
    "concepts.read", '{"id": 2}  or  {"name": "tide"}  (with its links)', args=ConceptRefArgs, effect="read"
)
def read_concept(cmd: Command, ctx: CommandContext) -> CommandResult:
    concepts = ctx.managers.concepts
    c = concepts.use(arg(cmd, "id"), thread_id=ctx.thread_id)  # using a concept brings it back if it was archived
    links = concepts.links(c.id)
    names = concepts.names()
    return CommandResult("\n".join([concept_line(c), *[link_line(link, names) for link in links]]), show=True)


@FAMILY.command(
    "concepts.update",
    '{"id": 2, "description": "…", "weight": 2, "tags": […]}',
    args=ConceptUpdateArgs,
    effect="write_self",
)
def update_concept(cmd: Command, ctx: CommandContext) -> CommandResult:
    c = ctx.managers.concepts.update(
        arg(cmd, "id"),
        name=cmd.args.get("new_name"),
        description=arg(cmd, "description", default=None),
        tags=arg(cmd, "tags", default=None, kind=list),
        weight=arg(cmd, "weight", default=None, kind=float),
    )
    return CommandResult(f"concept {c.id} updated")


@FAMILY.command(
    "concepts.delete",
    '{"id": 2}  (archives it and its links; needs my human\'s approval)',
    args=ConceptRefArgs,
    effect="modify_self",
)
def delete_concept(cmd: Command, ctx: CommandContext) -> CommandResult:
    return archive_one(ctx, cmd.type, "concept", ctx.managers.concepts.resolve(arg(cmd, "id")).id)


@FAMILY.command("concepts.pin", '{"id": 2}', args=ConceptRefArgs, effect="write_self")
@FAMILY.command("concepts.unpin", '{"id": 2}', args=ConceptRefArgs, effect="write_self")
def pin_concept(cmd: Command, ctx: CommandContext) -> CommandResult:
    c = ctx.managers.concepts.update(arg(cmd, "id"), pinned=cmd.type.endswith(".pin"))
    return CommandResult(f"concept {c.id} {'pinned' if c.pinned else 'unpinned'}")


@FAMILY.command(
    "links.add",
    '{"source": "tide", "target": "moon", "relation": "caused_by", "weight": 1}',
    args=LinkAddArgs,
    effect="write_self",
)
def add_link(cmd: Command, ctx: CommandContext) -> CommandResult:
    link, source, target = ctx.managers.concepts.link(
        arg(cmd, "source"),
        arg(cmd, "target"),
        str(arg(cmd, "relation", default="related_to")),
        weight=arg(cmd, "weight", default=1.0, kind=float),
        tags=arg(cmd, "tags", default=[], kind=list),
        thread_id=ctx.thread_id,
    )
    return CommandResult(f"link {link.id} added: {source.name} —{link.relation}→ {target.name}")


@FAMILY.command("links.list", '{"concept": "tide"}', args=LinksListArgs, effect="read")
def list_links(cmd: Command, ctx: CommandContext) -> CommandResult:
    concepts = ctx.managers.concepts
    rows = concepts.links(arg(cmd, "concept", default=None))
    names = concepts.names()
    return CommandResult("\n".join(link_line(link, names) for link in rows) or "no links", show=True)


@FAMILY.command("links.read", '{"id": 4}', args=LinkIdArgs, effect="read")
def read_link(cmd: Command, ctx: CommandContext) -> CommandResult:
    link = ctx.managers.concepts.get_link(arg(cmd, "id", kind=int))
    names = ctx.managers.concepts.names()
    return CommandResult(link_line(link, names), show=True)


@FAMILY.command(
    "links.update", '{"id": 4, "relation": "part_of", "weight": 2}', args=LinkUpdateArgs, effect="write_self"
)
def update_link(cmd: Command, ctx: CommandContext) -> CommandResult:
    link_id = arg(cmd, "id", kind=int)
    ctx.managers.concepts.update_link(
        link_id,
        relation=arg(cmd, "relation", default=None),
        weight=arg(cmd, "weight", default=None, kind=float),
        tags=arg(cmd, "tags", default=None, kind=list),
    )
    return CommandResult(f"link {link_id} updated")


@FAMILY.command(
    "links.delete", '{"id": 4}  (archives it; needs my human\'s approval)', args=LinkIdArgs, effect="modify_self"
)
def delete_link(cmd: Command, ctx: CommandContext) -> CommandResult:
    return archive_one(ctx, cmd.type, "link", arg(cmd, "id", kind=int))
