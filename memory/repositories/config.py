"""The `config` table: JSON values by key (cycle settings, the persona's own changes, durable requests)."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from sqlalchemy import select

from memory.models import ConfigEntry, utcnow
from memory.repositories.base import Repo


# the persona's own database on a `chroma run` server outside a deployment (a deployment names it by the persona's
# schema): made on first use, never inherited by a spawned child (memory/repositories/transfer.py)
VECTOR_DATABASE_KEY = "vectors/chroma_database"


class ConfigRepo(Repo):
    def get(self, key: str, default: Any = None) -> Any:
        row = self.s.get(ConfigEntry, key)
        return default if row is None else row.value

    def set(self, key: str, value: Any) -> None:
        row = self.s.get(ConfigEntry, key)
        if row is None:
            self.s.add(ConfigEntry(key=key, value=value))
        elif row.value == value:
            return
        else:
            row.value = value
            row.updated_at = utcnow()
        self.s.flush()

    def many(self, *keys: str) -> dict[str, Any]:
        """Several keys in one query (absent ones are None)."""
        found = {row.key: row.value for row in self.s.scalars(select(ConfigEntry).where(ConfigEntry.key.in_(keys))).all()}
        return {key: found.get(key) for key in keys}

    def with_prefix(self, prefix: str) -> dict[str, Any]:
        """Every key starting with `prefix` (e.g. the persona's own setting changes, `persona/…`)."""
        rows = self.s.scalars(select(ConfigEntry).where(ConfigEntry.key.startswith(prefix, autoescape=True))).all()
        return {row.key: row.value for row in rows if row.value is not None}

    def all(self) -> dict[str, Any]:
        return {row.key: row.value for row in self.s.scalars(select(ConfigEntry)).all()}

    def vector_database(self) -> str:
        """This database's own database on a Chroma server, named once: personas that share a server never share
        vectors."""
        name = self.get(VECTOR_DATABASE_KEY)
        if not name:
            name = f"persona_{uuid4().hex[:20]}"
            self.set(VECTOR_DATABASE_KEY, name)
        return str(name)
