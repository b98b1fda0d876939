"""`run.py users …`: the persona's humans (managers/people.py) — list, info, add, update, identities, and the contact
requests from unknown senders (accept / refuse). This is the operator's door: what is added here the owner added."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from cli.options import (
    DataDir,
    DbUrl,
    PersonaName,
    console,
    err,
    open_database,
    owner_unit_of,
    print_listing,
    read_rows,
)

if TYPE_CHECKING:
    from managers import Managers

app = typer.Typer(
    help="The persona's people: owner, trusted, guests; their channels; contact requests.", no_args_is_help=True
)
BY = "operator (cli)"


def _rows(house: Managers) -> list[dict[str, Any]]:
    return [v.as_dict() for v in house.people.list()]


@app.command("list")
def list_people(
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    name: str | None = PersonaName,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Everyone the persona knows, and the pending contact requests."""
    rows = read_rows(data_dir, db, _rows, name)
    requests = read_rows(
        data_dir,
        db,
        lambda house: [
            {
                "id": v.request.id,
                "channel": v.request.channel,
                "address": v.request.address,
                "name": v.request.sender_name,
                "messages": v.request.messages,
                "warning": v.request.warning or "",
                "claims": v.claims.name if v.claims else None,
                "claims_role": v.claims.role if v.claims else None,
                "unverified": v.unverified,
                "lookalike": v.lookalike,
                "dropped": v.dropped,
                "can_vouch": v.can_vouch,
            }
            for v in house.people.request_views()
        ],
        name,
    )
    if as_json:
        print(json.dumps({"people": rows, "contact_requests": requests}, indent=2, ensure_ascii=False))
        return
    for r in rows:
        where = ", ".join(f"{i['channel']}:{i['address']}" for i in r["identities"]) or "the web page"
        console.print(f"[bold]{r['id']}[/] {escape(r['name'])} ({r['role']}) · {escape(where)}", highlight=False)
    for q in requests:
        answers = (
            f"run.py users vouch {q['id']} / refuse {q['id']}"
            if q["can_vouch"]
            else f"run.py users refuse {q['id']}"
            if q["claims"]
            else f"run.py users accept {q['id']} / refuse {q['id']}"
        )
        console.print(
            f"[yellow]contact request {q['id']}[/] {escape(q['name'] or q['address'])} on "
            f"{escape(q['channel'])}:{escape(q['address'])} · {q['messages']} message(s) held "
            f"({answers})",
            highlight=False,
        )
        if q["claims"]:
            console.print(
                f"  [red]claims to be {escape(q['claims'])} ({q['claims_role']}), not verified:[/] "
                f"{escape(q['unverified'])}",
                highlight=False,
            )
        elif q["warning"]:
            console.print(f"  [red]unverified:[/] {escape(q['warning'])}", highlight=False)
        if q["lookalike"]:
            console.print(f"  [red]impostor risk:[/] {escape(q['lookalike'])}", highlight=False)
        if q["dropped"]:
            console.print(f"  {q['dropped']} more message(s) dropped over the hold cap", highlight=False)


@app.command("info")
def info(person: str, data_dir: str | None = DataDir, db: str | None = DbUrl, name: str | None = PersonaName) -> None:
    """One person, by id or name."""
    from managers.errors import NotFound

    try:
        rows = read_rows(data_dir, db, lambda house: [house.people.view(house.people.find(person)).as_dict()], name)
    except NotFound as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(1) from None
    print_listing(rows, True, "")


def _change(action: Callable[[Managers], str], data_dir: str | None, db: str | None, name: str | None) -> None:
    from managers.errors import NotFound
    from managers.people import PeopleError

    database = open_database(data_dir, db, name)
    try:
        with owner_unit_of(database, data_dir, db) as house:
            message = action(house)
    except (PeopleError, NotFound) as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(1) from None
    finally:
        database.close()
    console.print(message, highlight=False)


@app.command("add")
def add(
    person: str,
    role: str = typer.Option("guest", "--role", help="owner, trusted or guest"),
    channel: str | None = typer.Option(None, "--channel"),
    address: str | None = typer.Option(None, "--address", help="their identity on --channel"),
    language: str | None = typer.Option(None, "--language"),
    quiet_hours: str | None = typer.Option(None, "--quiet-hours", help="e.g. 22:00-08:00"),
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    name: str | None = PersonaName,
) -> None:
    """Add a person (optionally with their identity on a channel)."""

    def action(house: Managers) -> str:
        row = house.people.add(person, role=role, language=language, quiet_hours=quiet_hours, by=BY)
        if channel and address:
            house.people.add_identity(row.id, channel, address)
        return f"person {row.id} added: {row.name} ({row.role})"

    _change(action, data_dir, db, name)


@app.command("update")
def update(
    person: str,
    role: str | None = typer.Option(None, "--role"),
    channel: str | None = typer.Option(None, "--channel"),
    address: str | None = typer.Option(None, "--address"),
    preferred_channel: str | None = typer.Option(None, "--preferred-channel"),
    language: str | None = typer.Option(None, "--language"),
    quiet_hours: str | None = typer.Option(None, "--quiet-hours"),
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    name: str | None = PersonaName,
) -> None:
    """Change a person (by id or name); --channel with --address adds an identity."""

    def action(house: Managers) -> str:
        row = house.people.update(
            person, by=BY, role=role, preferred_channel=preferred_channel, language=language, quiet_hours=quiet_hours
        )
        if channel and address:
            house.people.add_identity(row.id, channel, address)
        return f"person {row.id} ({row.name}) updated"

    _change(action, data_dir, db, name)


@app.command("accept")
def accept(
    request_id: int,
    as_name: str | None = typer.Option(None, "--as", help="an existing person's name"),
    role: str = typer.Option("guest", "--role"),
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    name: str | None = PersonaName,
) -> None:
    """Let an unknown sender in: their held messages become notes from them."""
    from memory.clock import utcnow

    def action(house: Managers) -> str:
        person = house.people.accept(request_id, name=as_name, role=role, now=utcnow())
        return f"contact request {request_id} accepted: person {person.id} ({person.name})"

    _change(action, data_dir, db, name)


@app.command("vouch")
def vouch(
    request_id: int, data_dir: str | None = DataDir, db: str | None = DbUrl, name: str | None = PersonaName
) -> None:
    """It was you: unverified mail that claims your own address becomes your notes."""
    from memory.clock import utcnow

    def action(house: Managers) -> str:
        person = house.people.vouch(request_id, now=utcnow())
        return f"contact request {request_id} taken in as {person.name}'s own"

    _change(action, data_dir, db, name)


@app.command("refuse")
def refuse(
    request_id: int, data_dir: str | None = DataDir, db: str | None = DbUrl, name: str | None = PersonaName
) -> None:
    """Refuse an unknown sender: their held messages are deleted, later ones dropped."""
    from memory.clock import utcnow

    def action(house: Managers) -> str:
        house.people.refuse(request_id, now=utcnow())
        return f"contact request {request_id} refused"

    _change(action, data_dir, db, name)


@app.command("delete")
def delete(
    person: str,
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    persona: str | None = typer.Option(None, "--persona", help="the persona directory"),
) -> None:
    """Forget a person: their notes and conversation deleted for good, their name a placeholder everywhere else
    (undone only by `run.py memory deanonymise`, the name; their words do not come back)."""
    from cli.options import open_data
    from graph.forgetting import finish_at
    from managers.errors import NotFound
    from managers.people import PeopleError

    database, settings = open_data(data_dir, db, persona)
    try:
        with owner_unit_of(database, data_dir, db, settings) as house:
            done = house.people.delete(person, by=BY)
            now = house.deps.clock()
            house.consent.record(
                thread_id="main",
                tick=0,
                cmd_key=f"human:users.delete:{now.isoformat()}",
                type="users.delete",
                effect="modify_self",
                decision="executed",
                actor="human",
                reason=f"my human's own request: {done.notes} note(s), {done.memories} memories",
                now=now,
            )
        change = done.anonymised.change if done.anonymised is not None else None
        if change is not None:
            from graph.services import open_memory_index

            index = open_memory_index(database, settings)
            try:
                finish_at(change, db=database, data_dir=settings.data_dir, memory=index)
            finally:
                index.close()
    except (PeopleError, NotFound) as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(1) from None
    finally:
        database.close()
    console.print(
        f"forgotten: {escape(done.name)} — {done.notes} note(s) and {done.memories} conversation memories "
        f"deleted, {sum(done.directory.values())} directory row(s), {done.sources} quoted excerpt(s) "
        "emptied; their name is a placeholder everywhere else",
        highlight=False,
    )


@app.command("groups")
def groups(data_dir: str | None = DataDir, db: str | None = DbUrl, name: str | None = PersonaName) -> None:
    """The groups of people (HMP users_group) and who is in each."""
    rows = read_rows(
        data_dir,
        db,
        lambda house: [
            {"name": g.name, "description": g.description, "members": [p.name for p in members]}
            for g, members in house.people.groups()
        ],
        name,
    )
    for row in rows:
        console.print(
            f"[bold]{escape(row['name'])}[/]: {escape(', '.join(row['members']) or 'nobody yet')}"
            + (f" — {escape(row['description'])}" if row["description"] else ""),
            highlight=False,
        )
    if not rows:
        console.print("no groups")


@app.command("group-add")
def group_add(
    group: str,
    description: str = typer.Option("", "--description"),
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    name: str | None = PersonaName,
) -> None:
    """Make a group of people."""
    _change(lambda house: f"group {house.people.add_group(group, description).name} added", data_dir, db, name)


@app.command("group-delete")
def group_delete(
    group: str, data_dir: str | None = DataDir, db: str | None = DbUrl, name: str | None = PersonaName
) -> None:
    """Delete a group (its members stay)."""
    _change(lambda house: f"group {house.people.delete_group(group).name} deleted", data_dir, db, name)


@app.command("join")
def join(
    person: str,
    group: str,
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    name: str | None = PersonaName,
) -> None:
    """Put a person into a group."""
    _change(
        lambda house: f"{person} {'joined' if house.people.join(person, group) else 'was already in'} {group}",
        data_dir,
        db,
        name,
    )


@app.command("leave")
def leave(
    person: str,
    group: str,
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    name: str | None = PersonaName,
) -> None:
    """Take a person out of a group."""
    _change(
        lambda house: f"{person} {'left' if house.people.leave(person, group) else 'was not in'} {group}",
        data_dir,
        db,
        name,
    )
