"""Core memory and the notepad: the two written blocks always in the persona's prompt (identity, its human, its
promises; short-term notes), edited by appending, rewriting or replacing a passage, never saved over their size
limit (the edit fails and says by how much). What a rewrite, replacement or clear discards is kept as a version,
and the edit's report says how to bring it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from memory.models import MemoryBlock

if TYPE_CHECKING:
    from managers import Managers

BlockName = Literal["core", "notepad"]
EditMode = Literal["append", "rewrite"]


@dataclass(frozen=True)
class BlockEdit:
    """A block after an edit, and how to undo it (empty when nothing was discarded)."""

    name: str
    chars: int
    limit: int
    undo: str


class IdentityManager:
    """The written blocks (core memory, notepad), in one unit of work."""

    def __init__(self, house: Managers) -> None:
        self.repos = house.repos
        self.actor = house.actor

    def block(self, name: BlockName) -> MemoryBlock:
        """The block; OutOfScope while the persona answers someone other than its owner."""
        self.actor.require_private("my core memory" if name == "core" else "my notepad")
        return self.repos.blocks.get(name)

    def show(self, name: BlockName) -> str:
        """The block with its size, as the persona reads it (OutOfScope while it answers a guest or a peer)."""
        block = self.block(name)
        return f"{name} ({len(block.content)}/{block.char_limit} chars):\n{block.content or '(empty)'}"

    def edit(
        self,
        name: BlockName,
        *,
        text: str | None = None,
        mode: EditMode = "append",
        old: str | None = None,
        new: str = "",
    ) -> BlockEdit:
        """Replace `old` by `new` (when `old` is given), rewrite the block with `text`, or append `text`.
        MemoryLimitError when it would go over the block's limit, NotFound when `old` is not in it."""
        blocks = self.repos.blocks
        before = blocks.get(name).content
        if old is not None:
            blocks.replace(name, old, new)
        elif mode == "rewrite":
            blocks.write(name, text or "")
        else:
            blocks.append(name, text or "")
        return self._edited(name, before)

    def clear(self, name: BlockName) -> BlockEdit:
        before = self.repos.blocks.get(name).content
        self.repos.blocks.write(name, "")
        return self._edited(name, before)

    def _edited(self, name: BlockName, before: str) -> BlockEdit:
        block = self.repos.blocks.get(name)
        return BlockEdit(name, len(block.content), block.char_limit, self._undo(name, before))

    def _undo(self, name: BlockName, before: str) -> str:
        """How to get back what a rewrite, replacement or clear discarded (kept as a version)."""
        version = self.repos.blocks.latest_version(name)
        if not before or version is None or version.content != before:
            return ""
        return f'; memory.restore {{"tier": "{name}", "ref": "{version.id}"}} brings the old text back'
