"""agent_tables, ratings, external_services, external_accounts (HMP "Утилиты и расширения"): the persona's own
catalogues, as data. A table it makes holds rows (JSON objects over its named columns); a rating scores a subject
from −5 to +5 (`strategy:<name>` ratings also order the loop-breaking strategies, escalation.py); a service is
somewhere it knows of; an account names a service, a handle and — at most — the environment variable its secret
lives in (the secret itself is never stored or shown). Deleting archives (restorable) and needs the human's
approval."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field, StringConstraints, field_validator

from managers.errors import Refused
from nodes.commands.args import Args, Description, Limit, Ref, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg

FAMILY = Family(
    "catalogues",
    "my own tables and catalogues",
    compact=True,
    abouts={
        "agent_tables": "tables I make for my own data",
        "ratings": "my ratings of things (strategy:<name> ratings order my loop-breakers)",
        "external_services": "services outside I know of",
        "external_accounts": "my accounts at those services (never their secrets)",
    },
)

Name = Annotated[str, StringConstraints(strip_whitespace=True, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")]
Column = Annotated[str, StringConstraints(strip_whitespace=True, pattern=r"^[a-z][a-z0-9_]{0,31}$")]
Subject = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
Url = Annotated[str, StringConstraints(strip_whitespace=True, max_length=1000)]


class TableAddArgs(Args):
    name: Name
    columns: list[Column] = Field(min_length=1, max_length=32)
    description: Description = ""


class NameArgs(Args):
    name: Ref = Field(validation_alias=names("name", "id", "table", "subject"))


class InsertArgs(Args):
    table: Name
    row: dict[str, Any] = Field(validation_alias=names("row", "data", "values"))


class TableReadArgs(Args):
    table: Name
    where: dict[str, Any] = Field(default_factory=dict)
    limit: Limit = 20


class RateArgs(Args):
    subject: Subject = Field(validation_alias=names("subject", "name", "what"))
    score: int = Field(ge=-5, le=5)
    comment: Description = ""


class RatingsListArgs(Args):
    prefix: Subject | None = None


class ServiceArgs(Args):
    name: Name
    url: Url = ""
    kind: Annotated[str, StringConstraints(strip_whitespace=True, max_length=64)] = ""
    description: Description = ""


class AccountArgs(Args):
    name: Name
    service: Name
    handle: Annotated[str, StringConstraints(strip_whitespace=True, max_length=200)] = ""
    credential_env: str | None = Field(None, description="the environment variable holding its secret")
    description: Description = ""

    @field_validator("credential_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Z_][A-Z0-9_]{0,63}", value):
            raise ValueError("the name of an environment variable (A-Z, 0-9, _), never a secret itself")
        return value


def _archived(cmd: Command, archive: Callable[[], Any], tier: str, label: Callable[[Any], str]) -> CommandResult:
    try:
        row = archive()
    except Refused as exc:
        raise CommandError(f"{cmd.type}: {exc}") from None
    return CommandResult(
        f'{label(row)} archived; memory.restore {{"tier": "{tier}", "ref": "{row.id}"}} brings it back'
    )


# -- agent_tables ---------------------------------------------------------------------------------------------------


@FAMILY.command("agent_tables.list", "{}  (my tables, their columns and sizes)", effect="read")
def list_tables(cmd: Command, ctx: CommandContext) -> CommandResult:
    return CommandResult(
        "\n".join(
            f"- {t.name}({', '.join(t.columns)}): {count} row(s){' — ' + t.description if t.description else ''}"
            for t, count in ctx.managers.catalogues.tables()
        )
        or "no tables (agent_tables.add)",
        show=True,
    )


@FAMILY.command(
    "agent_tables.add",
    '{"name": "tides", "columns": ["date", "height_m"], "description": "…"}',
    args=TableAddArgs,
    effect="write_self",
)
def add_table(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        table = ctx.managers.catalogues.add_table(
            name=arg(cmd, "name"),
            columns=list(arg(cmd, "columns")),
            description=str(arg(cmd, "description", default="")),
        )
    except Refused as exc:
        raise CommandError(f"agent_tables.add: {exc}") from None
    return CommandResult(f"table {table.name}({', '.join(table.columns)}) made")


@FAMILY.command(
    "agent_tables.insert",
    '{"table": "tides", "row": {"date": "2026-11-24", "height_m": 4.2}}',
    args=InsertArgs,
    effect="write_self",
)
def insert_row(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        table, row = ctx.managers.catalogues.insert_row(table=arg(cmd, "table"), row=dict(arg(cmd, "row")))
    except Refused as exc:
        raise CommandError(f"agent_tables.insert: {exc}") from None
    return CommandResult(f"row {row.id} added to {table.name}")


@FAMILY.command(
    "agent_tables.read",
    '{"table": "tides", "where": {"date": "2026-11-24"}, "limit": 20}',
    args=TableReadArgs,
    effect="read",
)
def read_table(cmd: Command, ctx: CommandContext) -> CommandResult:
    table, rows = ctx.managers.catalogues.read_table(
        table=arg(cmd, "table"), where=arg(cmd, "where", default={}), limit=arg(cmd, "limit", default=20)
    )
    lines = [f"[{r.id}] " + ", ".join(f"{c}={r.data.get(c)!r}" for c in table.columns if c in r.data) for r in rows]
    return CommandResult("\n".join(lines) or f"no rows in {table.name}", show=True)


@FAMILY.command(
    "agent_tables.delete",
    '{"name": "tides"}  (archives it; needs my human\'s approval)',
    args=NameArgs,
    effect="modify_self",
)
def delete_table(cmd: Command, ctx: CommandContext) -> CommandResult:
    return _archived(
        cmd,
        lambda: ctx.managers.catalogues.archive_table(str(arg(cmd, "name"))),
        "table",
        lambda table: f"table {table.name}",
    )


# -- ratings, services, accounts ------------------------------------------------------------------------------------


@FAMILY.command("ratings.list", '{"prefix": "strategy:"}', args=RatingsListArgs, effect="read")
def list_ratings(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.managers.catalogues.ratings(prefix=arg(cmd, "prefix", default=None))
    return CommandResult(
        "\n".join(
            f"- [{r.id}] {r.name}: {r.data.get('score'):+d}{' — ' + r.data['comment'] if r.data.get('comment') else ''}"
            for r in rows
        )
        or "no ratings",
        show=True,
    )


@FAMILY.command(
    "ratings.add",
    '{"subject": "strategy:flashback", "score": 3, "comment": "…"}  (−5..+5; rating it again replaces the score)',
    args=RateArgs,
    effect="write_self",
)
def add_rating(cmd: Command, ctx: CommandContext) -> CommandResult:
    row, replaced = ctx.managers.catalogues.rate(
        subject=arg(cmd, "subject"), score=arg(cmd, "score", kind=int), comment=str(arg(cmd, "comment", default=""))
    )
    return CommandResult(f"rating {row.id} {'changed' if replaced else 'added'}: {row.name} {row.data['score']:+d}")


@FAMILY.command(
    "ratings.delete", '{"name": 3}  (archives it; needs my human\'s approval)', args=NameArgs, effect="modify_self"
)
def delete_rating(cmd: Command, ctx: CommandContext) -> CommandResult:
    return _archived(
        cmd,
        lambda: ctx.managers.catalogues.archive_rating(arg(cmd, "name")),
        "rating",
        lambda row: f"rating of {row.name}",
    )


@FAMILY.command("external_services.list", "{}", effect="read")
def list_services(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.managers.catalogues.services()
    return CommandResult(
        "\n".join(
            f"- [{r.id}] {r.name}{' (' + r.data['kind'] + ')' if r.data.get('kind') else ''}"
            f"{' <' + r.data['url'] + '>' if r.data.get('url') else ''}"
            f"{': ' + r.data['description'] if r.data.get('description') else ''}"
            for r in rows
        )
        or "no external services",
        show=True,
    )


@FAMILY.command(
    "external_services.add",
    '{"name": "tide-api", "url": "https://…", "kind": "api", "description": "…"}',
    args=ServiceArgs,
    effect="write_self",
)
def add_service(cmd: Command, ctx: CommandContext) -> CommandResult:
    row, replaced = ctx.managers.catalogues.put_service(
        name=arg(cmd, "name"),
        url=str(arg(cmd, "url", default="")),
        kind=str(arg(cmd, "kind", default="")),
        description=str(arg(cmd, "description", default="")),
    )
    return CommandResult(f"service {row.name} {'updated' if replaced else 'added'}")


@FAMILY.command(
    "external_services.delete",
    '{"name": "tide-api"}  (archives it; needs my human\'s approval)',
    args=NameArgs,
    effect="modify_self",
)
def delete_service(cmd: Command, ctx: CommandContext) -> CommandResult:
    return _archived(
        cmd,
        lambda: ctx.managers.catalogues.archive_service(arg(cmd, "name")),
        "external_service",
        lambda row: f"service {row.name}",
    )


@FAMILY.command("external_accounts.list", "{}", effect="read")
def list_accounts(cmd: Command, ctx: CommandContext) -> CommandResult:
    rows = ctx.managers.catalogues.accounts()
    return CommandResult(
        "\n".join(
            f"- [{r.id}] {r.name} at {r.data.get('service')}"
            f"{' as ' + r.data['handle'] if r.data.get('handle') else ''}"
            f"{' (secret in $' + r.data['credential_env'] + ')' if r.data.get('credential_env') else ''}"
            for r in rows
        )
        or "no external accounts",
        show=True,
    )


@FAMILY.command(
    "external_accounts.add",
    '{"name": "my-tides", "service": "tide-api", "handle": "lumen", '
    '"credential_env": "TIDE_API_KEY"}  (never a secret itself)',
    args=AccountArgs,
    effect="write_self",
)
def add_account(cmd: Command, ctx: CommandContext) -> CommandResult:
    service = arg(cmd, "service")
    row, replaced = ctx.managers.catalogues.put_account(
        name=arg(cmd, "name"),
        service=service,
        handle=str(arg(cmd, "handle", default="")),
        credential_env=arg(cmd, "credential_env", default=None),
        description=str(arg(cmd, "description", default="")),
    )
    return CommandResult(f"account {row.name} at {service} {'updated' if replaced else 'added'}")


@FAMILY.command(
    "external_accounts.delete",
    '{"name": "my-tides"}  (archives it; needs my human\'s approval)',
    args=NameArgs,
    effect="modify_self",
)
def delete_account(cmd: Command, ctx: CommandContext) -> CommandResult:
    return _archived(
        cmd,
        lambda: ctx.managers.catalogues.archive_account(arg(cmd, "name")),
        "external_account",
        lambda row: f"account {row.name}",
    )
