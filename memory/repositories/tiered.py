"""The bases of the memory tiers' repositories: a tier's retrievable rows keep their retrieval-catalogue item
(memory/repositories/items.py) in step with the row, in the same transaction."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Generic, TypeVar

from sqlalchemy.orm import Session

from memory.clock import utcnow
from memory.models import Base
from memory.repositories.base import Archivable, Repo
from memory.repositories.items import MemoryItemRepo

M = TypeVar("M", bound=Base)


class TierRepo(Repo):
    """A memory tier's repository: its retrievable rows keep their retrieval-catalogue item in step, in the same
    transaction, so search sees every write, update and archive."""

    def __init__(self, session: Session, items: MemoryItemRepo):
        super().__init__(session)
        self.items = items


class StatusTierRepo(ABC, Archivable, TierRepo, Generic[M]):
    """A tier whose rows carry their own status (active | archived) besides their catalogue item's: archiving
    sets both, so the row leaves its lists and the item leaves retrieval; restoring brings both back."""

    model: type[M]  # a mapped class with `id`, `status` and `updated_at` columns
    tier: str

    @abstractmethod
    def _index(self, row: M) -> None:
        """Write the row's catalogue item (each tier says what of the row is retrievable)."""

    def _insert(self, row: M) -> M:
        self.session.add(row)
        self.session.flush()
        self._index(row)
        return row

    def get(self, row_id: int) -> M:
        return self._get(self.model, row_id)

    def _put_item(self, row: Any, text: str, **fields: Any) -> None:
        """Write the row's catalogue item; the item of an archived row stays archived."""
        self.items.put(self.tier, row.id, text, **fields)
        if row.status != "active":
            self.items.set_status_of(self.tier, row.id, row.status)

    def _set_status(self, row_id: int, status: str) -> bool:
        row: Any = self.session.get(self.model, int(row_id))  # (its status columns: the tier's, not Base's)
        if row is None:
            return False
        changed = self.items.set_status_of(self.tier, row.id, status)
        if row.status != status:
            row.status, row.updated_at, changed = status, utcnow(), True
            self.session.flush()
        return changed

    def purge(self, row_id: int) -> None:
        """Delete the row and its catalogue item for good (a human's delete; the persona archives)."""
        self.session.delete(self._get(self.model, row_id))
        self.items.remove(self.tier, row_id)
