"""persona.spawn (HMP "Создание потомков", the `Spawn` command): a child persona from me — `clone` (my files, all
my memory and its vectors), `trained` (my files; goals, concepts, llm_memory and insights, no episodes or diary)
or `newborn` (my files with a fresh identity, no memory). It creates a persona directory and a database outside
my own, so it is `external`: my human approves it. The child records me as its parent (persona/spawn.py; the spawn
manager makes it: managers/spawn.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from managers.spawn import SpawnError
from nodes.commands.args import Args, lowered, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg

FAMILY = Family("persona", "my descendants")

ChildName = Annotated[str, StringConstraints(strip_whitespace=True, pattern=r"^[\w][\w .-]{0,63}$")]


class SpawnArgs(Args):
    name: ChildName
    mode: Annotated[Literal["clone", "trained", "newborn"], lowered] = Field(
        "trained", validation_alias=names("mode", "kind", "type_of_child")
    )


@FAMILY.command(
    "persona.spawn",
    '{"name": "Mira", "mode": "clone|trained|newborn"}  (a descendant of mine; needs my human\'s approval)',
    args=SpawnArgs,
    effect="external",
)
def spawn_child(cmd: Command, ctx: CommandContext) -> CommandResult:
    services = ctx.services
    name, mode = str(arg(cmd, "name")), arg(cmd, "mode", default="trained")
    try:
        text = ctx.managers.spawn.spawn(
            name,
            mode,
            parent_dir=services.persona.directory,
            parent_db=services.db,
            data_dir=Path(ctx.settings.data_dir),
            thread_id=ctx.thread_id,
            now=ctx.now,
        )
    except (SpawnError, ValueError) as exc:
        raise CommandError(f"persona.spawn: {exc}") from None
    return CommandResult(text)
