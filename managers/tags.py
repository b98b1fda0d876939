"""Tag statistics (HMP): how often each tag is used, per source or over all of them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from managers import Managers


class TagManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    def stats(self, source: str = "all") -> dict[str, int]:
        """Tag -> uses, most used first."""
        return self.repos.tags.stats(source)


__all__ = ["TagManager"]
