"""persona.spawn (HMP "Создание потомков", the `Spawn` command): a child persona from me — `clone` (my files, all
my memory and its vectors), `trained` (my files; goals, concepts, llm_memory and insights, no episodes or diary)
or `newborn` (my files with a fresh identity, no memory). It creates a persona directory and a database outside
my own, so it is `external`: my human approves it. The child records me as its parent (persona/spawn.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from memory import Database
from nodes.commands.args import Args, lowered, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg
from persona.spawn import SpawnError, default_places, spawn

FAMILY = Family("persona", "my descendants")

ChildName = Annotated[str, StringConstraints(strip_whitespace=True, pattern=r"^[\w][\w .-]{0,63}$")]


class SpawnArgs(Args):
    name: ChildName
    mode: Annotated[Literal["clone", "trained", "newborn"], lowered] = Field(
        "trained", validation_alias=names("mode", "kind", "type_of_child"))


def open_child_index(child_db: Database, data_dir: Path, parent_index):
    """The child's vector index with the parent's embedder (so its vectors fit): embedded in its data dir, or — when
    the parent's vectors are on a Chroma server — its own database on that server."""
    from memory.retrieval.index import MemoryIndex

    if parent_index.chroma_url:
        with child_db.unit() as repos:
            database = repos.config.vector_database()
        return MemoryIndex(child_db, parent_index.embedder, chroma_url=parent_index.chroma_url, chroma_database=database,
                           config=parent_index.config)
    return MemoryIndex(child_db, parent_index.embedder, chroma_path=data_dir / "chroma", config=parent_index.config)


@FAMILY.command("persona.spawn", '{"name": "Mira", "mode": "clone|trained|newborn"}  (a descendant of mine; '
                "needs my human's approval)", args=SpawnArgs, effect="external")
def spawn_child(cmd: Command, ctx: CommandContext) -> CommandResult:
    services = ctx.services
    name, mode = str(arg(cmd, "name")), arg(cmd, "mode", default="trained")
    try:
        places = default_places(name, services.persona.directory, Path(ctx.settings.data_dir), services.db)
    except ValueError as exc:
        raise CommandError(f"persona.spawn: {exc}") from None
    child_db = Database.open(places.data_dir, places.db_url)
    child_index = None
    try:
        parent_index = services.memory if mode == "clone" else None
        if parent_index is not None:
            child_index = open_child_index(child_db, places.data_dir, parent_index)
        report = spawn(name, mode, parent_dir=services.persona.directory, parent_db=services.db, child_dir=places.persona_dir,
                       child_db=child_db, now=ctx.now, parent_index=parent_index, child_index=child_index)
    except SpawnError as exc:
        raise CommandError(f"persona.spawn: {exc}") from None
    finally:
        if child_index is not None:
            child_index.close()
        child_db.close()
    run = f"python run.py --persona {places.persona_dir} --data-dir {places.data_dir}" + \
        (f" --db {report.database}" if places.db_url else "")
    text = (f"{name} ({mode}) is born: {sum(report.rows.values())} memory row(s), {report.vectors} vector(s); "
            f"it starts with: {run}")
    ctx.repos.processes.add("persona.spawn", text, status="ok", thread_id=ctx.thread_id)
    return CommandResult(text)
