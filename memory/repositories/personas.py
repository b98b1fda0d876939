"""The registry of a deployment's personas (`anima_personas`, memory/fleet.py): which should be thinking, where each
one's memory is, its persona files, and the bookkeeping of its next scheduled tick."""

from __future__ import annotations

import builtins
from datetime import datetime

from sqlalchemy import select, text, update

from memory.clock import utcnow
from memory.models import PersonaEntry
from memory.repositories.base import NotFound, Repo


class PersonaRegistryRepo(Repo):
    def get(self, name: str) -> PersonaEntry | None:
        return self.session.get(PersonaEntry, name)

    def require(self, name: str) -> PersonaEntry:
        entry = self.get(name)
        if entry is None:
            known = ", ".join(self.names()) or "none yet: run.py personas add NAME"
            raise NotFound(f"no persona {name!r} in this deployment (personas: {known})")
        return entry

    def names(self) -> list[str]:
        return list(self.session.scalars(select(PersonaEntry.name).order_by(PersonaEntry.name)).all())

    def list(self, state: str | None = None) -> list[PersonaEntry]:
        query = select(PersonaEntry).order_by(PersonaEntry.name)
        if state:
            query = query.where(PersonaEntry.state == state)
        return list(self.session.scalars(query).all())

    def add(self, name: str, schema: str, *, playbook: str, files: bytes | None, digest: str) -> PersonaEntry:
        entry = PersonaEntry(
            name=name, schema=schema, playbook=playbook, files=files, files_digest=digest, state="active"
        )
        self.session.add(entry)
        self.session.flush()
        return entry

    def set_state(self, name: str, state: str) -> PersonaEntry:
        entry = self.require(name)
        entry.state, entry.updated_at = state, utcnow()
        self.session.flush()
        return entry

    def set_files(self, name: str, files: bytes, digest: str) -> None:
        entry = self.require(name)
        entry.files, entry.files_digest, entry.updated_at = files, digest, utcnow()
        self.session.flush()

    def digest_of(self, name: str) -> str | None:
        return self.session.scalar(select(PersonaEntry.files_digest).where(PersonaEntry.name == name))

    def brief(self, name: str) -> tuple[str, str, str] | None:
        """(state, files digest, playbook) of a persona, without its files: what a worker asks before every job."""
        row = self.session.execute(
            select(PersonaEntry.state, PersonaEntry.files_digest, PersonaEntry.playbook).where(
                PersonaEntry.name == name
            )
        ).first()
        return (row[0], row[1], row[2]) if row is not None else None

    def state_of(self, name: str) -> str | None:
        return self.session.scalar(select(PersonaEntry.state).where(PersonaEntry.name == name))

    def set_next_tick(self, name: str, job_id: int | None, at: datetime | None) -> None:
        self.session.execute(
            update(PersonaEntry).where(PersonaEntry.name == name).values(next_tick_job=job_id, next_tick_at=at)
        )

    def record_tick(self, name: str, *, at: datetime, worker: str) -> None:
        self.session.execute(
            update(PersonaEntry)
            .where(PersonaEntry.name == name)
            .values(ticks=PersonaEntry.ticks + 1, last_tick_at=at, last_worker=worker[:200])
        )

    def remove(self, name: str) -> PersonaEntry:
        entry = self.require(name)
        self.session.delete(entry)
        self.session.flush()
        return entry

    def drop_schema(self, schema: str) -> None:
        """A removed persona's memory, for good (`personas remove --purge`)."""
        self.session.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))

    def has_table(self, name: str) -> bool:
        """Whether a table of the default schema exists (the job engine's, LangGraph's checkpoints)."""
        return bool(self.session.scalar(text("SELECT to_regclass(:name) IS NOT NULL"), {"name": name}))

    def try_advisory_lock(self, key: int) -> bool:
        """A session-level advisory lock on this repository's connection, if free (memory/fleet.py: Fleet.fence)."""
        return bool(self.session.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": key}).scalar())

    def advisory_unlock(self, key: int) -> None:
        self.session.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})

    def checkpoint_threads(self, prefix: str) -> builtins.list[str]:
        """LangGraph's checkpoint threads of one persona (their ids start with its name)."""
        if not self.has_table("checkpoints"):
            return []
        rows = self.session.execute(
            text("SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id LIKE :pattern"),
            {"pattern": prefix.replace("%", r"\%").replace("_", r"\_") + "%"},
        )
        return [row[0] for row in rows]
