"""Nexus Ark entity memory: one record per person or thing, merged over time, retrievable."""

from __future__ import annotations

import re
from collections.abc import Iterable

from sqlalchemy import Select, bindparam, select

from memory.clock import utcnow
from memory.models import Entity
from memory.repositories.base import prepared
from memory.repositories.tiered import TierRepo


def entity_key(name: str) -> str:
    return re.sub(r"\s+", " ", name.strip().lower())


@prepared
def _by_name() -> Select[Entity]:
    return select(Entity).order_by(Entity.name).limit(bindparam("limit"))


class EntityRepo(TierRepo):
    def find(self, name: str) -> Entity | None:
        key = entity_key(name)
        row = self.session.scalars(select(Entity).where(Entity.key == key)).first()
        if row is not None:
            return row
        for candidate in self.session.scalars(select(Entity)).all():  # aliases are few; entities are not millions
            if key in {entity_key(a) for a in candidate.aliases or []}:
                return candidate
        return None

    def merge(
        self,
        name: str,
        *,
        kind: str | None = None,
        description: str = "",
        facts: Iterable[str] = (),
        aliases: Iterable[str] = (),
    ) -> Entity:
        """One record per person/thing: a second mention adds what is new instead of making a duplicate."""
        row = self.find(name)
        if row is None:
            row = Entity(
                key=entity_key(name), name=name.strip(), kind=kind or "thing", description="", aliases=[], facts=[]
            )
            self.session.add(row)
        if kind:
            row.kind = kind
        if description and description not in (row.description or ""):
            row.description = f"{row.description}\n{description}".strip()
        row.facts = list(dict.fromkeys([*(row.facts or []), *[str(f) for f in facts if str(f).strip()]]))
        extra = [a for a in aliases if entity_key(a) != row.key]
        row.aliases = list(dict.fromkeys([*(row.aliases or []), *extra]))
        row.updated_at = utcnow()
        self.session.flush()
        self._index(row)
        return row

    def _index(self, row: Entity) -> None:
        body = "\n".join([row.description, *[f"- {f}" for f in row.facts or []]]).strip() or row.name
        self.items.put("entity", row.id, body, title=row.name, author="", tags=[row.kind], importance=0.6)

    def update(
        self,
        entity_id: int,
        *,
        name: str | None = None,
        kind: str | None = None,
        description: str | None = None,
        facts: list[str] | None = None,
        aliases: list[str] | None = None,
    ) -> Entity:
        """Set what is given (a human's edit; `merge` only adds)."""
        row = self.get(entity_id)
        if name is not None and name.strip():
            row.name, row.key = name.strip(), entity_key(name)
        if kind is not None:
            row.kind = kind
        if description is not None:
            row.description = description
        if facts is not None:
            row.facts = [str(f) for f in facts if str(f).strip()]
        if aliases is not None:
            row.aliases = [a for a in aliases if entity_key(a) != row.key]
        row.updated_at = utcnow()
        self.session.flush()
        self._index(row)
        return row

    def purge(self, entity_id: int) -> None:
        """Delete the entity and its catalogue item for good (a human's delete)."""
        self.session.delete(self.get(entity_id))
        self.items.remove("entity", entity_id)

    def get(self, entity_id: int) -> Entity:
        return self._get(Entity, entity_id)

    def all(self, limit: int = 500) -> list[Entity]:
        return list(self.session.scalars(_by_name(), {"limit": limit}).all())

    def mentioned_in(self, text: str, limit: int = 3) -> list[Entity]:
        lowered = text.lower()
        found = []
        for row in self.all():
            names = [row.name, *(row.aliases or [])]
            if any(re.search(rf"\b{re.escape(n.lower())}\b", lowered) for n in names if n):
                found.append(row)
        return found[:limit]
