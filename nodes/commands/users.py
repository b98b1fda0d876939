"""users: the persona's humans (HMP `users`) — who they are, their role, where to reach them. Adding a person or
an identity, or changing one, is modify_self: it runs only after the owner's approval (the persona never lets
someone in by itself)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from managers.errors import NotFound
from managers.people import PeopleError, PersonView
from nodes.commands.args import Args, Description, Ref, Word, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg

FAMILY = Family("users", "the people I know: who they are, their role, where to reach them")
Role = Literal["owner", "trusted", "guest"]


class PersonArgs(Args):
    person: Ref = Field(validation_alias=names("person", "name", "id", "user", "who"))


class AddPersonArgs(Args):
    name: Word = Field(validation_alias=names("name", "person", "user"))
    role: Literal["trusted", "guest"] = "guest"
    channel: Word | None = None
    address: Description | None = None
    language: Word | None = None
    quiet_hours: Word | None = None
    about: Description = ""


class UpdatePersonArgs(Args):
    person: Ref = Field(validation_alias=names("person", "name", "id", "user", "who"))
    role: Literal["trusted", "guest"] | None = None
    preferred_channel: Word | None = None
    language: Word | None = None
    quiet_hours: Word | None = None
    about: Description | None = None
    channel: Word | None = None
    address: Description | None = None


def _line(view: PersonView) -> str:
    where = ", ".join(f"{c}:{a}" for c, a in view.identities) or "the web page only"
    return f"- [{view.id}] {view.name} ({view.role}) reached on {where}"


@FAMILY.command("users.list", "{}", effect="read")
def list_people(cmd: Command, ctx: CommandContext) -> CommandResult:
    return CommandResult("\n".join(_line(v) for v in ctx.managers.people.list()), show=True)


@FAMILY.command("users.info", '{"person": "Ann"}', args=PersonArgs, effect="read")
def person_info(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        view = ctx.managers.people.view(ctx.managers.people.find(arg(cmd, "person")))
    except NotFound as exc:
        raise CommandError(f"users.info: {exc}") from None
    details = [
        f"language {view.language or '?'}",
        f"quiet hours {view.quiet_hours or 'none'}",
        f"preferred channel {view.preferred_channel or 'where they last wrote'}",
    ]
    return CommandResult(
        _line(view) + "\n  " + "; ".join(details) + (f"\n  {view.about}" if view.about else ""), show=True
    )


@FAMILY.command(
    "users.add",
    '{"name": "Ann", "role": "guest", "channel": "matrix", "address": "@ann:example.org"}  '
    "(needs my owner's approval)",
    args=AddPersonArgs,
    effect="modify_self",
    prompt_tier="people I know and how far I trust them",
)
def add_person(cmd: Command, ctx: CommandContext) -> CommandResult:
    people = ctx.managers.people
    try:
        person = people.add(
            str(arg(cmd, "name")),
            role=str(arg(cmd, "role", default="guest")),
            language=arg(cmd, "language", default=None),
            quiet_hours=arg(cmd, "quiet_hours", default=None),
            about=str(arg(cmd, "about", default="")),
            by="persona (approved)",
        )
        channel, address = arg(cmd, "channel", default=None), arg(cmd, "address", default=None)
        if channel and address:
            people.add_identity(person.id, str(channel), str(address))
    except PeopleError as exc:
        raise CommandError(f"users.add: {exc}") from None
    return CommandResult(f"person {person.id} added: {person.name} ({person.role})")


@FAMILY.command(
    "users.update",
    '{"person": "Ann", "quiet_hours": "22:00-08:00", "language": "ru"}  (needs my owner\'s approval)',
    args=UpdatePersonArgs,
    effect="modify_self",
    prompt_tier="people I know and how far I trust them",
)
def update_person(cmd: Command, ctx: CommandContext) -> CommandResult:
    people = ctx.managers.people
    changes = {
        key: arg(cmd, key, default=None) for key in ("role", "preferred_channel", "language", "quiet_hours", "about")
    }
    try:
        person = people.update(arg(cmd, "person"), by="persona (approved)", **changes)
        channel, address = arg(cmd, "channel", default=None), arg(cmd, "address", default=None)
        if channel and address:
            people.add_identity(person.id, str(channel), str(address))
    except (PeopleError, NotFound) as exc:
        raise CommandError(f"users.update: {exc}") from None
    return CommandResult(f"person {person.id} ({person.name}) updated")


class GroupArgs(Args):
    group: Word = Field(validation_alias=names("group", "name", "group_name"))
    description: Description = ""


class MemberArgs(Args):
    person: Ref = Field(validation_alias=names("person", "name", "id", "user", "who"))
    group: Word = Field(validation_alias=names("group", "group_name"))


@FAMILY.command("users.groups", "{}  (the groups of people I know, HMP users_group, and who is in each)", effect="read")
def list_groups(cmd: Command, ctx: CommandContext) -> CommandResult:
    lines = [
        f"- {g.name}: {', '.join(p.name for p in members) or 'nobody yet'}"
        + (f" — {g.description}" if g.description else "")
        for g, members in ctx.managers.people.groups()
    ]
    return CommandResult("\n".join(lines) or "no groups", show=True)


@FAMILY.command(
    "users.group_add",
    '{"group": "family", "description": "…"}  (needs my owner\'s approval)',
    args=GroupArgs,
    effect="modify_self",
)
def add_group(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        group = ctx.managers.people.add_group(str(arg(cmd, "group")), str(arg(cmd, "description", default="")))
    except PeopleError as exc:
        raise CommandError(f"users.group_add: {exc}") from None
    return CommandResult(f"group {group.name} added")


@FAMILY.command(
    "users.join",
    '{"person": "Ann", "group": "family"}  (needs my owner\'s approval)',
    args=MemberArgs,
    effect="modify_self",
)
def join_group(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        joined = ctx.managers.people.join(arg(cmd, "person"), str(arg(cmd, "group")))
    except (PeopleError, NotFound) as exc:
        raise CommandError(f"users.join: {exc}") from None
    return CommandResult(f"{arg(cmd, 'person')} {'joined' if joined else 'was already in'} {arg(cmd, 'group')}")


@FAMILY.command(
    "users.leave",
    '{"person": "Ann", "group": "family"}  (needs my owner\'s approval)',
    args=MemberArgs,
    effect="modify_self",
)
def leave_group(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        left = ctx.managers.people.leave(arg(cmd, "person"), str(arg(cmd, "group")))
    except (PeopleError, NotFound) as exc:
        raise CommandError(f"users.leave: {exc}") from None
    return CommandResult(f"{arg(cmd, 'person')} {'left' if left else 'was not in'} {arg(cmd, 'group')}")


@FAMILY.command(
    "users.delete",
    '{"person": "Ann"}  (forget someone: their words deleted, their name a placeholder '
    "elsewhere; needs my owner's approval)",
    args=PersonArgs,
    effect="modify_self",
    prompt_tier="people I know and how far I trust them",
)
def delete_person(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        done = ctx.managers.people.delete(arg(cmd, "person"), by="persona (approved)")
    except (PeopleError, NotFound) as exc:
        raise CommandError(f"users.delete: {exc}") from None
    # the name never reaches a result, a log or a prompt: only what was forgotten
    placeholder = ", ".join(done.anonymised.placeholders()) if done.anonymised is not None else ""
    return CommandResult(
        f"forgotten: {done.notes} note(s) and {done.memories} conversation memories deleted; "
        f"their name is {placeholder or 'nowhere else'} in my memory now",
        show=True,
    )
