"""Descendants: a child persona from this one (persona/spawn.py) — `clone` (its files, all its memory and vectors),
`trained` (its files; goals, concepts, llm_memory and insights) or `newborn` (its files with a fresh identity). The
persona asks with `persona.spawn` (its human approves: it creates a persona directory and a database outside its
own), the operator with `run.py spawn`; both open the child's vector index here, with the parent's embedder.
"""

from __future__ import annotations

import logging

from pathlib import Path
from typing import TYPE_CHECKING, cast

from memory import Database
from persona.spawn import SpawnError, default_places, spawn

if TYPE_CHECKING:
    from datetime import datetime

    from managers import Managers
    from memory.retrieval.index import MemoryIndex
    from memory.retrieval.recall_index import RecallIndex

__all__ = ["SpawnError", "SpawnManager", "open_child_index"]


log = logging.getLogger(__name__)

def open_child_index(child_db: Database, data_dir: Path, parent_index: MemoryIndex) -> MemoryIndex:
    """The child's vector index with the parent's embedder (so its vectors fit): embedded in its data dir, or — when
    the parent's vectors are on a Chroma server — its own database on that server."""
    from memory.retrieval.index import MemoryIndex

    if parent_index.chroma_url:
        with child_db.unit() as repos:
            database = repos.config.vector_database()
        return MemoryIndex(child_db, parent_index.embedder, chroma_url=parent_index.chroma_url, chroma_database=database,
                           config=parent_index.config)
    return MemoryIndex(child_db, parent_index.embedder, chroma_path=data_dir / "chroma", config=parent_index.config)


class SpawnManager:
    """A persona's descendants, from one unit of work of the parent (which records the birth)."""

    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos
        self.memory: RecallIndex | None = house.deps.memory

    def spawn(self, name: str, mode: str, *, parent_dir: Path, parent_db: Database, data_dir: Path, thread_id: str,
              now: datetime) -> str:
        """Make the child beside the parent (its default places), recorded in the parent's process log; what to tell.
        ValueError (a SpawnError among them) when it cannot be made."""
        places = default_places(name, parent_dir, data_dir, parent_db)
        child_db = Database.open(places.data_dir, places.db_url)
        child_index = None
        try:
            # a clone takes the parent's vectors: its index is the real one (embedder, Chroma place), not a recall view
            parent_index = cast("MemoryIndex", self.memory) if mode == "clone" and self.memory is not None else None
            if parent_index is not None:
                child_index = open_child_index(child_db, places.data_dir, parent_index)
            report = spawn(name, mode, parent_dir=parent_dir, parent_db=parent_db, child_dir=places.persona_dir,
                           child_db=child_db, now=now, parent_index=parent_index, child_index=child_index)
            self._become_peers(name, mode, parent_dir, child_db)
        finally:
            if child_index is not None:
                child_index.close()
            child_db.close()
        run = f"python run.py --persona {places.persona_dir} --data-dir {places.data_dir}" + \
            (f" --db {report.database}" if places.db_url else "")
        text = (f"{name} ({mode}) is born: {sum(report.rows.values())} memory row(s), {report.vectors} vector(s); "
                f"it starts with: {run}")
        self.repos.processes.add("persona.spawn", text, status="ok", thread_id=thread_id)
        return text

    def _become_peers(self, child_name: str, mode: str, parent_dir: Path, child_db: Database) -> None:
        """Parent and child know each other as peers from the birth (`added_by` "spawn"); their A2A addresses come
        when they are served (agents.add, or the mesh). A name already taken by another peer is left as it is."""
        from managers import Managers
        from managers.peers import valid_name
        from persona.loader import load_persona

        def befriend(house: Managers, name: str, note: str) -> None:
            try:
                if house.peers.find(valid_name(name)) is None:
                    house.peers.add(name, added_by="spawn", note=note)
            except ValueError as unfit:  # the birth stands; the owner adds the peer by hand
                log.info("spawn: %r is not a name a peer can have (%s): add it with agents.add", name, unfit)

        befriend(self.house, child_name, f"my child ({mode})")
        parent_name = load_persona(parent_dir).display_name
        with child_db.unit() as repos:
            befriend(Managers(repos, self.house.deps), parent_name, "my parent")
