"""llm_memory: the model's own notepad of ideas, hypotheses and plans (always in context)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from memory.models import LLMMemory

if TYPE_CHECKING:
    from managers import Managers


class LLMMemoryManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    def add(
        self,
        text: str,
        *,
        title: str = "",
        tags: Iterable[str] = (),
        thread_id: str | None = None,
        llm_id: str | None = None,
    ) -> LLMMemory:
        return self.repos.llm_memory.add(text, title=title, tags=tags, thread_id=thread_id, llm_id=llm_id)

    def recent(self, limit: int = 20) -> list[LLMMemory]:
        return self.repos.llm_memory.recent(limit)


__all__ = ["LLMMemoryManager"]
