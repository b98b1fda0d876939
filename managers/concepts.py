"""Concepts and links: the semantic graph (HMP `concepts`, `links`). Using a concept (reading it, linking it) brings
it back if the memory manager archived it (HMP: restored on access) and counts as using it."""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from typing import TYPE_CHECKING

from memory.models import Concept, ConceptLink

if TYPE_CHECKING:
    from managers import Managers

ALL_CONCEPTS = 10_000  # the names a link line may show


class ConceptManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    def add(self, name: str, description: str = "", *, tags: Iterable[str] = (), weight: float = 1.0) -> Concept:
        return self.repos.concepts.add(name, description, tags=tags, weight=weight)

    def growth(self, thread_id: str, since_tick: int) -> tuple[int, int, int] | None:
        """(concepts in all, concepts added, links added) since the thread's tick `since_tick` began; None when the
        thread has no such tick yet."""
        return self.repos.concepts.growth(thread_id, since_tick)

    def list(self, *, limit: int = 30, include_archived: bool = False) -> builtins.list[Concept]:
        return self.repos.concepts.list(limit=limit, include_archived=include_archived)

    def resolve(self, ref: int | str) -> Concept:
        """A concept by id or by name (NotFound when there is none)."""
        return self.repos.concepts.resolve(ref)

    def use(self, ref: int | str, *, thread_id: str) -> Concept:
        """The concept, restored if it was archived (the process log says so on `thread_id`), marked used now."""
        concept = self.repos.concepts.resolve(ref)
        if concept.status == "archived":
            self.house.memory.bring_back(
                "concept",
                concept.id,
                by="memory.restore",
                thread_id=thread_id,
                message=f"concept {concept.id} '{concept.name}' restored on use",
                status="close",
            )
        self.house.memory.touch("concept", concept.id)
        return concept

    def names(self) -> dict[int, str]:
        """Every concept's name by id (archived ones too)."""
        return {c.id: c.name for c in self.repos.concepts.list(limit=ALL_CONCEPTS, include_archived=True)}

    def update(
        self,
        ref: int | str,
        *,
        name: str | None = None,
        description: str | None = None,
        tags: builtins.list[str] | None = None,
        weight: float | None = None,
        pinned: bool | None = None,
    ) -> Concept:
        """Change what is given (None: unchanged)."""
        concept = self.repos.concepts.resolve(ref)
        return self.repos.concepts.update(
            concept.id, name=name, description=description, tags=tags, weight=weight, pinned=pinned
        )

    # ---- links ---------------------------------------------------------------------------------------------------

    def link(
        self,
        source: int | str,
        target: int | str,
        relation: str = "related_to",
        *,
        weight: float = 1.0,
        tags: Iterable[str] = (),
        thread_id: str,
    ) -> tuple[ConceptLink, Concept, Concept]:
        """A link between two concepts (each used, so restored if archived)."""
        first = self.use(source, thread_id=thread_id)
        second = self.use(target, thread_id=thread_id)
        return self.repos.links.add(first.id, second.id, relation, weight=weight, tags=tags), first, second

    def links(self, concept: int | str | None = None) -> builtins.list[ConceptLink]:
        concept_id = self.repos.concepts.resolve(concept).id if concept is not None else None
        return self.repos.links.list(concept_id)

    def get_link(self, link_id: int) -> ConceptLink:
        return self.repos.links.get(link_id)

    def update_link(
        self,
        link_id: int,
        *,
        relation: str | None = None,
        weight: float | None = None,
        tags: builtins.list[str] | None = None,
    ) -> ConceptLink:
        return self.repos.links.update(link_id, relation=relation, weight=weight, tags=tags)


__all__ = ["ConceptManager"]
