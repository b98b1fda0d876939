"""HMP `concepts` and `links`: the semantic graph. Concepts are retrievable; links are typed, weighted edges.

Archiving a concept archives its active links with it (status `concept_archived`), and restoring it brings back
those of them whose other concept is active too; a link the persona archived itself stays archived.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, func, or_, select

from memory.clock import utcnow
from memory.models import Concept, ConceptLink, Tick
from memory.repositories.base import NotFound, Repo
from memory.repositories.tiered import StatusTierRepo

LINK_ARCHIVED_WITH_CONCEPT = "concept_archived"
ARCHIVED_LINK_STATUSES = ("archived", LINK_ARCHIVED_WITH_CONCEPT)


def _touching(concept_id: int) -> ColumnElement[bool]:
    return or_(ConceptLink.source_id == concept_id, ConceptLink.target_id == concept_id)


class ConceptRepo(StatusTierRepo[Concept]):
    model, tier = Concept, "concept"

    def _index(self, concept: Concept) -> None:
        self._put_item(
            concept,
            concept.description or concept.name,
            title=concept.name,
            tags=concept.tags,
            pinned=concept.pinned,
            importance=min(1.0, 0.4 + 0.1 * concept.weight),
        )

    def growth(self, thread_id: str, since_tick: int) -> tuple[int, int, int] | None:
        """The semantic graph's growth since the thread's tick `since_tick` began, in one statement: (concepts in
        all, concepts added since, links added since); None when the thread has no such tick yet."""
        since = (
            select(Tick.started_at)
            .where(Tick.thread_id == thread_id, Tick.tick <= since_tick)
            .order_by(Tick.tick.desc())
            .limit(1)
            .scalar_subquery()
        )
        row = self.session.execute(
            select(
                since,
                select(func.count(Concept.id)).scalar_subquery(),
                select(func.count(Concept.id)).where(Concept.created_at >= since).scalar_subquery(),
                select(func.count(ConceptLink.id)).where(ConceptLink.created_at >= since).scalar_subquery(),
            )
        ).one()
        if row[0] is None:
            return None
        return int(row[1] or 0), int(row[2] or 0), int(row[3] or 0)

    def add(self, name: str, description: str = "", *, tags: Iterable[str] = (), weight: float = 1.0) -> Concept:
        if self.by_name(name) is not None:
            raise ValueError(f"concept {name!r} exists; update it instead")
        concept = Concept(name=name, description=description, tags=list(tags), weight=weight)
        return self._insert(concept)

    def by_name(self, name: str) -> Concept | None:
        return self.session.scalars(select(Concept).where(func.lower(Concept.name) == name.lower())).first()

    def named_like(self, prefix: str) -> Concept | None:
        """The first concept whose name starts with `prefix` (a concept learned from a peer: `name (from …, …)`)."""
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return self.session.scalars(
            select(Concept).where(Concept.name.like(escaped + "%", escape="\\")).order_by(Concept.id)
        ).first()

    def find_id(self, concept_id: int) -> Concept | None:
        return self.session.get(Concept, int(concept_id))

    def resolve(self, ref: int | str) -> Concept:
        if isinstance(ref, int) or str(ref).isdigit():
            return self.get(int(ref))
        concept = self.by_name(str(ref))
        if concept is None:
            raise NotFound(f"no concept {ref!r}")
        return concept

    def list(self, *, limit: int = 50, include_archived: bool = False) -> list[Concept]:
        q = select(Concept)
        if not include_archived:
            q = q.where(Concept.status == "active")
        return list(
            self.session.scalars(
                q.order_by(Concept.pinned.desc(), Concept.weight.desc(), Concept.id).limit(limit)
            ).all()
        )

    def newer_than(self, concept_id: int, limit: int) -> builtins.list[Concept]:
        """The newest `limit` concepts after `concept_id`, archived ones too, newest first."""
        return list(
            self.session.scalars(
                select(Concept).where(Concept.id > concept_id).order_by(Concept.id.desc()).limit(limit)
            ).all()
        )

    def names(self, concept_ids: Iterable[int]) -> dict[int, str]:
        ids = list(concept_ids)
        if not ids:
            return {}
        return {
            concept_id: name
            for concept_id, name in self.session.execute(select(Concept.id, Concept.name).where(Concept.id.in_(ids)))
        }

    def update(self, concept_id: int, **fields: Any) -> Concept:
        concept = self.get(concept_id)
        for name in ("name", "description", "tags", "weight", "pinned"):
            if fields.get(name) is not None:
                setattr(concept, name, fields[name])
        concept.updated_at = utcnow()
        self._index(concept)
        return concept

    def archive(self, concept_id: int) -> bool:
        changed = super().archive(concept_id)
        links = self.session.scalars(
            select(ConceptLink).where(_touching(int(concept_id)), ConceptLink.status == "active")
        ).all()
        for link in links:
            link.status, link.updated_at = LINK_ARCHIVED_WITH_CONCEPT, utcnow()
        return changed or bool(links)

    def restore(self, concept_id: int) -> bool:
        changed = super().restore(concept_id)
        links = self.session.scalars(
            select(ConceptLink).where(_touching(int(concept_id)), ConceptLink.status == LINK_ARCHIVED_WITH_CONCEPT)
        ).all()
        active = {
            c.id
            for c in self.session.scalars(
                select(Concept).where(
                    Concept.id.in_({link.source_id for link in links} | {link.target_id for link in links}),
                    Concept.status == "active",
                )
            ).all()
        }
        back = [link for link in links if {link.source_id, link.target_id} <= active]
        for link in back:
            link.status, link.updated_at = "active", utcnow()
        return changed or bool(back)

    def purge(self, concept_id: int) -> None:
        """Delete the concept, its links and its catalogue item for good (a human's delete); the links one by one,
        so the memory history sees each go."""
        for link in self.session.scalars(select(ConceptLink).where(_touching(int(concept_id)))).all():
            self.session.delete(link)
        self.session.flush()
        super().purge(concept_id)


class LinkRepo(Repo):
    def add(
        self,
        source_id: int,
        target_id: int,
        relation: str = "related_to",
        *,
        weight: float = 1.0,
        tags: Iterable[str] = (),
    ) -> ConceptLink:
        for concept_id in (source_id, target_id):
            self._get(Concept, concept_id)
        link = ConceptLink(source_id=source_id, target_id=target_id, relation=relation, weight=weight, tags=list(tags))
        self.session.add(link)
        self.session.flush()
        return link

    def get(self, link_id: int) -> ConceptLink:
        return self._get(ConceptLink, link_id)

    def list(self, concept_id: int | None = None, limit: int = 50, include_archived: bool = False) -> list[ConceptLink]:
        q = select(ConceptLink)
        if not include_archived:
            q = q.where(ConceptLink.status == "active")
        if concept_id is not None:
            q = q.where(_touching(concept_id))
        return list(self.session.scalars(q.order_by(ConceptLink.id).limit(limit)).all())

    def update(self, link_id: int, **fields: Any) -> ConceptLink:
        link = self.get(link_id)
        for name in ("relation", "weight", "tags"):
            if fields.get(name) is not None:
                setattr(link, name, fields[name])
        link.updated_at = utcnow()
        return link

    def archive(self, link_id: int) -> bool:
        """Archive the link itself: it stays archived when its concepts are restored."""
        link = self.session.get(ConceptLink, int(link_id))
        if link is None or link.status == "archived":
            return False
        link.status, link.updated_at = "archived", utcnow()
        return True

    def restore(self, link_id: int) -> bool:
        link = self.session.get(ConceptLink, int(link_id))
        if link is None or link.status == "active":
            return False
        for concept_id in (link.source_id, link.target_id):
            if self._get(Concept, concept_id).status != "active":
                raise ValueError(f"link {link_id} joins archived concept {concept_id}; restore the concept first")
        link.status, link.updated_at = "active", utcnow()
        return True

    def archived(self, limit: int = 10) -> builtins.list[ConceptLink]:
        return list(
            self.session.scalars(
                select(ConceptLink)
                .where(ConceptLink.status.in_(ARCHIVED_LINK_STATUSES))
                .order_by(ConceptLink.updated_at.desc(), ConceptLink.id.desc())
                .limit(limit)
            ).all()
        )

    def purge(self, link_id: int) -> None:
        self.session.delete(self.get(link_id))
