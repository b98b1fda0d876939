"""Descendants: a child persona from this one (persona/spawn.py) — `clone` (its files, all its memory and vectors),
`trained` (its files; goals, concepts, llm_memory and insights) or `newborn` (its files with a fresh identity). The
persona asks with `persona.spawn` (its human approves: it creates a persona directory and a database outside its
own), the operator with `run.py spawn`; both open the child's vector index here, with the parent's embedder.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from managers.mesh import KEY_DIR, KEY_NAME
from memory import Database
from memory.secrets import FileSecretStore, SealedSecretStore, SecretStore, deployment_key
from persona.spawn import SpawnError, default_places, spawn
from reach.hmp.identity import Identity

if TYPE_CHECKING:
    from datetime import datetime

    from managers import Managers
    from memory.retrieval.index import MemoryIndex
    from memory.retrieval.recall_index import RecallIndex

__all__ = ["SpawnError", "SpawnManager", "free_port", "open_child_index"]


log = logging.getLogger(__name__)


def open_child_index(child_db: Database, data_dir: Path, parent_index: MemoryIndex) -> MemoryIndex:
    """The child's vector index with the parent's embedder (so its vectors fit): embedded in its data dir, or — when
    the parent's vectors are on a Chroma server — its own database on that server."""
    from memory.retrieval.index import MemoryIndex

    if parent_index.chroma_url:
        with child_db.unit() as repos:
            database = repos.config.vector_database()
        return MemoryIndex(
            child_db,
            parent_index.embedder,
            chroma_url=parent_index.chroma_url,
            chroma_database=database,
            config=parent_index.config,
        )
    return MemoryIndex(child_db, parent_index.embedder, chroma_path=data_dir / "chroma", config=parent_index.config)


class SpawnManager:
    """A persona's descendants, from one unit of work of the parent (which records the birth)."""

    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos
        self.memory: RecallIndex | None = house.deps.recall()

    def spawn(
        self,
        name: str,
        mode: str,
        *,
        parent_dir: Path,
        parent_db: Database,
        data_dir: Path,
        thread_id: str,
        now: datetime,
    ) -> str:
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
            report = spawn(
                name,
                mode,
                parent_dir=parent_dir,
                parent_db=parent_db,
                child_dir=places.persona_dir,
                child_db=child_db,
                now=now,
                parent_index=parent_index,
                child_index=child_index,
            )
            met = self.meet(
                name,
                mode,
                parent_dir=parent_dir,
                parent_db=parent_db,
                child_db=child_db,
                child_data_dir=places.data_dir,
                child_persona_dir=report.persona_dir,
                postgres=places.db_url is not None,
            )
        finally:
            if child_index is not None:
                child_index.close()
            child_db.close()
        run = f"python run.py --persona {places.persona_dir} --data-dir {places.data_dir} --port {met['port']}" + (
            f" --db {report.database}" if places.db_url else ""
        )
        text = (
            f"{name} ({mode}) is born: {sum(report.rows.values())} memory row(s), {report.vectors} vector(s); "
            f"its DID {met['did']}, its address {met['url']} (we are each other's peers); it starts with: {run}"
            + (
                " — or beside my loop (spawn.autostart)"
                if not self._autostart()
                else " — beside my loop from my next start (spawn.autostart is on)"
            )
        )
        self.repos.processes.add("persona.spawn", text, status="ok", thread_id=thread_id)
        return text

    def meet(
        self,
        name: str,
        mode: str,
        *,
        parent_dir: Path,
        parent_db: Database,
        child_db: Database,
        child_data_dir: Path,
        child_persona_dir: str,
        postgres: bool,
    ) -> dict[str, Any]:
        """Parent and child know each other as peers from the birth (`added_by` "spawn", HMP's "the parent adds the new
        node to its agent_peers, the child adds its parent"): the child gets its own mesh identity (an Ed25519 key
        in its own secret store — its data dir's mesh/, or sealed in its database for a sealed vault — and its DID),
        and a web port of its own (HMP: "the interfaces' ports"); the parent's row for it names its DID and its A2A
        address, the child's row for the parent the parent's DID and — when known — its A2A address (the autostart
        writes it again each time it starts the child: graph/loop/children.py). A name already taken by another peer
        gets the addresses it lacked. The parent's lineage keeps what its autostart needs: the child's DID, port and
        places. Returns them (and the child's address)."""
        from managers import ManagerDeps, Managers
        from managers.peers import valid_name
        from persona.loader import load_persona

        child = Identity.generate()
        self._child_store(child_db, child_data_dir).put(KEY_NAME, child.to_pem())
        port = free_port()
        child_url = f"http://127.0.0.1:{port}"
        settings = self.house.deps.settings
        parent_did = self.house.mesh.my_did()
        parent_url = settings.a2a.public_url or None
        # a PostgreSQL child's database by its name only: its URL holds the password, which never reaches a table
        met: dict[str, Any] = {
            "did": child.did,
            "port": port,
            "data_dir": str(child_data_dir.resolve()),
            **({"db_name": child_db.engine.url.database} if postgres else {}),
        }
        # the lineage first, in a unit of its own as persona/spawn.py wrote it, before this unit writes anything
        with parent_db.unit() as repos:
            children = [dict(entry) for entry in repos.config.lineage_children]  # copies: the config keeps what it read
            for entry in children:
                if entry.get("name") == name and entry.get("persona_dir") == child_persona_dir:
                    entry.update(met)
            repos.config.lineage_children = children

        def befriend(house: Managers, peer_name: str, note: str, did: str | None, url: str | None) -> None:
            try:
                peer = house.peers.find(valid_name(peer_name))
                if peer is None:
                    house.peers.add(peer_name, added_by="spawn", note=note, did=did, a2a_url=url)
                else:
                    house.peers.attach_addresses(peer.id, did=did)
                    if url and not peer.a2a_url:
                        peer.a2a_url = url
            except ValueError as unfit:  # the birth stands; the owner adds the peer by hand
                log.info("spawn: %r is not a name a peer can have (%s): add it with agents.add", peer_name, unfit)

        parent_name = load_persona(parent_dir).display_name
        befriend(self.house, name, f"my child ({mode})", child.did, child_url)
        # each calls the other with a credential the other issued (managers/peers.py): swapped here, as two owners
        # would swap them; the child's kept in its own secret store
        for_child = self._credential(self.house, name)
        child_deps = ManagerDeps(
            settings=settings.model_copy(update={"data_dir": str(child_data_dir)}), clock=self.house.deps.clock
        )
        with child_db.unit() as repos:
            child_house = Managers(repos, child_deps)
            befriend(child_house, parent_name, "my parent", parent_did, parent_url)
            lineage = dict(repos.config.lineage_parent or {})
            repos.config.lineage_parent = {**lineage, "did": parent_did, "a2a_url": parent_url}
            for_parent = self._credential(child_house, parent_name)
            if for_child and child_house.peers.find(parent_name) is not None:
                child_house.peers.set_outgoing_token(parent_name, for_child)
        if for_parent and self.house.peers.find(name) is not None:
            self.house.peers.set_outgoing_token(name, for_parent)
        return {**met, "url": child_url}

    @staticmethod
    def _credential(house: Managers, peer_name: str) -> str | None:
        """A credential this side issues to the peer (its token, handed to the other side once), or None when the
        peer is not there (an unfit name)."""
        peer = house.peers.find(peer_name)
        if peer is None:
            return None
        return house.peers.issue_credential(peer.id, by="spawn")[1]

    def _autostart(self) -> bool:
        return bool(self.house.deps.settings.spawn.autostart)

    def _child_store(self, child_db: Database, child_data_dir: Path) -> SecretStore:
        """Where the child keeps its key: as this persona keeps its own (memory/secrets.py)."""
        settings = self.house.deps.settings
        if settings.vault == "sealed":
            from memory.repositories.secrets import SealedSecretRepo

            key = deployment_key(settings.secrets_key.get_secret_value() if settings.secrets_key else None)
            session = child_db.sessions()
            return _CommittingStore(
                SealedSecretStore(SealedSecretRepo(session), key, clock=self.house.deps.clock), session
            )
        return FileSecretStore(child_data_dir / KEY_DIR)


class _CommittingStore:
    """A sealed store over a session of the child's database, committed on each put (the child's own unit)."""

    def __init__(self, store: SealedSecretStore, session: Any) -> None:
        self.store, self.session, self.where = store, session, store.where

    def get(self, name: str) -> bytes | None:
        return self.store.get(name)

    def put(self, name: str, value: bytes) -> None:
        try:
            self.store.put(name, value)
            self.session.commit()
        finally:
            self.session.close()

    def delete(self, name: str) -> None:
        try:
            self.store.delete(name)
            self.session.commit()
        finally:
            self.session.close()


def free_port() -> int:
    """A port nothing listens on now (the child's web app takes it when it starts)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
