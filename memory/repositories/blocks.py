"""Core memory and notepad (Nexus Ark): always injected, edited by the persona, never saved over their limit.

Whatever a write replaces is kept as a version (`memory_block_versions`), so a rewrite or a clear can be undone:
the persona's `memory.restore {"tier": "notepad", "ref": "<version>"}` or the human."""

from __future__ import annotations

from sqlalchemy import Select, bindparam, select

from memory.clock import utcnow
from memory.models import MemoryBlock, MemoryBlockVersion
from memory.repositories.base import NotFound, Repo, prepared, table_of

BLOCK_LIMITS = {"core": 2000, "notepad": 3000}


class MemoryLimitError(ValueError):
    """A self-edit would take a block over its size limit; nothing is saved."""


@prepared
def _named() -> Select[MemoryBlock]:
    return select(MemoryBlock).where(MemoryBlock.name.in_(bindparam("names", expanding=True)))


@prepared
def _named_contents() -> Select[str, str]:
    """Core: blocks' names and texts (the prompt reads nothing else of them)."""
    c = table_of(MemoryBlock).c
    return select(c.name, c.content).where(c.name.in_(bindparam("names", expanding=True)))


class BlockRepo(Repo):
    def get(self, name: str) -> MemoryBlock:
        block = self.session.get(MemoryBlock, name)
        if block is None:
            block = MemoryBlock(name=name, content="", char_limit=BLOCK_LIMITS.get(name, 2000))
            self.session.add(block)
            self.session.flush()
        return block

    def many(self, *names: str) -> dict[str, MemoryBlock]:
        """Several blocks in one query (each made, empty, when it does not exist yet)."""
        found = {b.name: b for b in self.session.scalars(_named(), {"names": list(names)}).all()}
        return {name: found[name] if name in found else self.get(name) for name in names}

    def contents(self, *names: str) -> dict[str, str]:
        """Several blocks' texts in one query, as plain rows (the prompt's read); a block that does not exist yet is
        made, empty, as `many` makes it."""
        found = {name: content for name, content in self.core(_named_contents(), {"names": list(names)}).all()}
        if len(found) < len(set(names)):
            return {name: block.content for name, block in self.many(*names).items()}
        return {name: found[name] for name in names}

    def write(self, name: str, content: str, keep_previous: bool = True) -> MemoryBlock:
        """Set the block's text; what it replaces is kept as a version unless told otherwise (an append loses
        nothing)."""
        block = self.get(name)
        if len(content) > block.char_limit:
            raise MemoryLimitError(
                f"{name} would be {len(content)} chars, over its {block.char_limit}-char limit; "
                f"nothing saved — shorten it or replace old text first"
            )
        if keep_previous and block.content and block.content != content:
            self.session.add(MemoryBlockVersion(name=name, content=block.content))
        block.content, block.updated_at = content, utcnow()
        self.session.flush()
        return block

    def versions(self, name: str | None = None, limit: int = 10) -> list[MemoryBlockVersion]:
        """What rewrites replaced, newest first (of one block, or both)."""
        q = select(MemoryBlockVersion)
        if name is not None:
            q = q.where(MemoryBlockVersion.name == name)
        return list(self.session.scalars(q.order_by(MemoryBlockVersion.id.desc()).limit(limit)).all())

    def restore_version(self, name: str, version_id: int) -> bool:
        """Put a replaced version back (what it replaces becomes a version in turn); False if there is none."""
        version = self.session.get(MemoryBlockVersion, int(version_id))
        if version is None or version.name != name:
            return False
        self.write(name, version.content)
        return True

    def latest_version(self, name: str) -> MemoryBlockVersion | None:
        found = self.versions(name, 1)
        return found[0] if found else None

    def append(self, name: str, text: str) -> MemoryBlock:
        current = self.get(name).content
        return self.write(name, f"{current}\n{text}".strip() if current else text, keep_previous=False)

    def replace(self, name: str, old: str, new: str) -> MemoryBlock:
        current = self.get(name).content
        if old not in current:
            raise NotFound(f"{name} does not contain {old[:60]!r}")
        return self.write(name, current.replace(old, new, 1))
