"""Unverified facts (HMP UnverifiedFacts): the claims the persona marked as unsure, and their fact-checks."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING

from memory.models import UnverifiedFact

if TYPE_CHECKING:
    from managers import Managers


class FactManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    def list(self, *, status: str | None = None, limit: int = 10) -> builtins.list[UnverifiedFact]:
        return self.repos.facts.list(status=status, limit=limit)

    def resolve(self, fact_id: int, status: str, resolution: str = "", *, by: str, thread_id: str) -> UnverifiedFact:
        """The fact-check's outcome (its task closes), said in the process log as `by`."""
        fact = self.repos.facts.resolve(fact_id, status, resolution)
        self.repos.processes.add(
            by, f"fact {fact.id} {status}: {fact.claim[:120]}", status="close", thread_id=thread_id
        )
        return fact


__all__ = ["FactManager"]
