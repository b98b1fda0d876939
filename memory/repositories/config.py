"""The `config` table: JSON values by key (cycle settings, the persona's own changes, durable requests).

A unit of work remembers the rows it has read (and the keys it found absent), so a key read twice in one
transaction — or loaded beforehand with `preload`, several keys in one query — costs no second statement.
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from sqlalchemy import Select, bindparam, or_, select
from sqlalchemy.orm import Session

from memory.models import ConfigEntry, utcnow
from memory.repositories.base import Repo, prepared


@prepared
def _keys(prefixes: tuple[str, ...]) -> Select[ConfigEntry]:
    """These keys, and every key under `prefixes` (a few fixed prefixes: one statement for each set of them)."""
    return select(ConfigEntry).where(or_(ConfigEntry.key.in_(bindparam("keys", expanding=True)),
                                         *(ConfigEntry.key.startswith(p, autoescape=True) for p in prefixes)))


# the persona's own database on a `chroma run` server outside a deployment (a deployment names it by the persona's
# schema): made on first use, never inherited by a spawned child (memory/repositories/transfer.py)
VECTOR_DATABASE_KEY = "vectors/chroma_database"


class ConfigRepo(Repo):
    def __init__(self, session: Session):
        super().__init__(session)
        self._rows: dict[str, ConfigEntry | None] = {}  # this transaction's reads: key -> row (None: absent)
        self._prefixes: set[str] = set()  # prefixes whose every key is in `_rows`

    def _row(self, key: str) -> ConfigEntry | None:
        if key not in self._rows:
            self.preload(key)
        return self._rows[key]

    def preload(self, *keys: str, prefixes: tuple[str, ...] = ()) -> None:
        """Read these keys (and every key under `prefixes`) in one query; later `get`s of them cost nothing."""
        wanted = [key for key in keys if key not in self._rows]
        prefixes = tuple(p for p in prefixes if p not in self._prefixes)
        if not wanted and not prefixes:
            return
        for row in self.session.scalars(_keys(prefixes), {"keys": wanted}).all():
            self._rows[row.key] = row
        for key in wanted:
            self._rows.setdefault(key, None)
        self._prefixes.update(prefixes)

    def get(self, key: str, default: Any = None) -> Any:
        row = self._row(key)
        return default if row is None else row.value

    def set(self, key: str, value: Any) -> None:
        row = self._row(key)
        if row is None:
            row = self._rows[key] = ConfigEntry(key=key, value=value)
            self.session.add(row)
        elif row.value == value:
            return
        else:
            row.value = value
            row.updated_at = utcnow()
        self.session.flush()

    def many(self, *keys: str) -> dict[str, Any]:
        """Several keys in one query (absent ones are None)."""
        self.preload(*keys)
        return {key: self.get(key) for key in keys}

    def with_prefix(self, prefix: str) -> dict[str, Any]:
        """Every key starting with `prefix` (e.g. the persona's own setting changes, `persona/…`)."""
        self.preload(prefixes=(prefix,))
        return {key: row.value for key, row in self._rows.items()
                if key.startswith(prefix) and row is not None and row.value is not None}

    def all(self) -> dict[str, Any]:
        return {row.key: row.value for row in self.session.scalars(select(ConfigEntry)).all()}

    def vector_database(self) -> str:
        """This database's own database on a Chroma server, named once: personas that share a server never share
        vectors."""
        name = self.get(VECTOR_DATABASE_KEY)
        if not name:
            name = f"persona_{uuid4().hex[:20]}"
            self.set(VECTOR_DATABASE_KEY, name)
        return str(name)
