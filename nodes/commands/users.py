"""users: the persona's humans (HMP `users`) — who they are, their role, where to reach them. Adding a person or
an identity, or changing one, is modify_self: it runs only after the owner's approval (the persona never lets
someone in by itself)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from managers.people import PeopleError, PersonView
from managers.errors import NotFound
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
    details = [f"language {view.language or '?'}", f"quiet hours {view.quiet_hours or 'none'}",
               f"preferred channel {view.preferred_channel or 'where they last wrote'}"]
    return CommandResult(_line(view) + "\n  " + "; ".join(details) + (f"\n  {view.about}" if view.about else ""),
                         show=True)


@FAMILY.command("users.add", '{"name": "Ann", "role": "guest", "channel": "matrix", "address": "@ann:example.org"}  '
                "(needs my owner's approval)", args=AddPersonArgs, effect="modify_self",
                prompt_tier="people I know and how far I trust them")
def add_person(cmd: Command, ctx: CommandContext) -> CommandResult:
    people = ctx.managers.people
    try:
        person = people.add(str(arg(cmd, "name")), role=str(arg(cmd, "role", default="guest")),
                            language=arg(cmd, "language", default=None),
                            quiet_hours=arg(cmd, "quiet_hours", default=None),
                            about=str(arg(cmd, "about", default="")), by="persona (approved)")
        channel, address = arg(cmd, "channel", default=None), arg(cmd, "address", default=None)
        if channel and address:
            people.add_identity(person.id, str(channel), str(address))
    except PeopleError as exc:
        raise CommandError(f"users.add: {exc}") from None
    return CommandResult(f"person {person.id} added: {person.name} ({person.role})")


@FAMILY.command("users.update", '{"person": "Ann", "quiet_hours": "22:00-08:00", "language": "ru"}  '
                "(needs my owner's approval)", args=UpdatePersonArgs, effect="modify_self",
                prompt_tier="people I know and how far I trust them")
def update_person(cmd: Command, ctx: CommandContext) -> CommandResult:
    people = ctx.managers.people
    changes = {key: arg(cmd, key, default=None) for key in ("role", "preferred_channel", "language", "quiet_hours",
                                                           "about")}
    try:
        person = people.update(arg(cmd, "person"), by="persona (approved)", **changes)
        channel, address = arg(cmd, "channel", default=None), arg(cmd, "address", default=None)
        if channel and address:
            people.add_identity(person.id, str(channel), str(address))
    except (PeopleError, NotFound) as exc:
        raise CommandError(f"users.update: {exc}") from None
    return CommandResult(f"person {person.id} ({person.name}) updated")
