"""Core memory and notepad (Nexus Ark): always injected, edited by the persona, never saved over their limit."""

from __future__ import annotations

from memory.models import MemoryBlock, utcnow
from memory.repositories.base import NotFound, Repo

BLOCK_LIMITS = {"core": 2000, "notepad": 3000}


class MemoryLimitError(ValueError):
    """A self-edit would take a block over its size limit; nothing is saved."""


class BlockRepo(Repo):
    def get(self, name: str) -> MemoryBlock:
        block = self.s.get(MemoryBlock, name)
        if block is None:
            block = MemoryBlock(name=name, content="", char_limit=BLOCK_LIMITS.get(name, 2000))
            self.s.add(block)
            self.s.flush()
        return block

    def write(self, name: str, content: str) -> MemoryBlock:
        block = self.get(name)
        if len(content) > block.char_limit:
            raise MemoryLimitError(f"{name} would be {len(content)} chars, over its {block.char_limit}-char limit; "
                                   f"nothing saved — shorten it or replace old text first")
        block.content, block.updated_at = content, utcnow()
        self.s.flush()
        return block

    def append(self, name: str, text: str) -> MemoryBlock:
        current = self.get(name).content
        return self.write(name, f"{current}\n{text}".strip() if current else text)

    def replace(self, name: str, old: str, new: str) -> MemoryBlock:
        current = self.get(name).content
        if old not in current:
            raise NotFound(f"{name} does not contain {old[:60]!r}")
        return self.write(name, current.replace(old, new, 1))
