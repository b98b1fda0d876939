"""Prompt blocks and the budget: each block has a priority; what does not fit is dropped lowest-priority first
(oldest item first where a block allows it), and every drop is reported."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from nodes.steps.s04_prepare_context.untrusted import defuse, fenced


@dataclass
class Block:
    name: str
    title: str
    items: list[str]
    priority: int
    system: bool = False
    trim_oldest: bool = False  # drop items one by one (oldest first) before dropping the block
    tokens: list[int] = field(default_factory=list)
    keys: list[Any] = field(default_factory=list)  # optional ids parallel to items (which notes were shown)
    fence: str | None = None  # untrusted input: the items are data inside a fence with this id
    source: str = ""  # what the fenced data is (shown in the fence)

    def __post_init__(self) -> None:
        if self.fence is not None:
            self.items = [defuse(item) for item in self.items]

    def render(self) -> str:
        if not self.items:
            return ""
        body = "\n".join(self.items)
        if self.fence is not None:
            body = fenced(body, self.fence, self.source or self.name)
        return f"# {self.title}\n{body}" if self.title else body

    def envelope(self) -> str:
        """What the block costs besides its items: its title and, for data, its fence."""
        title = f"# {self.title}\n" if self.title else ""
        return title + (fenced("", self.fence, self.source or self.name) if self.fence is not None else "")


def fit_blocks(blocks: list[Block], budget: int, count: Callable[[str], int]) -> tuple[list[Block], list[str]]:
    """Drop lowest-priority content until the blocks fit `budget` tokens. Returns (blocks, drops)."""
    for block in blocks:
        block.tokens = [count(item) + 1 for item in block.items]
    envelope_cost = {b.name: count(b.envelope()) + 2 if b.envelope() else 0 for b in blocks}

    def total() -> int:
        return sum(sum(b.tokens) + (envelope_cost[b.name] if b.items else 0) for b in blocks)

    drops: list[str] = []
    while total() > budget:
        candidates = [b for b in blocks if b.items and b.priority < 1000]
        if not candidates:
            break
        victim = min(candidates, key=lambda b: b.priority)
        if victim.trim_oldest and len(victim.items) > 1:
            victim.items.pop(0)
            removed = victim.tokens.pop(0)
            if victim.keys:
                victim.keys.pop(0)
            drops.append(f"{victim.name}: oldest item ({removed} tokens)")
        else:
            drops.append(f"{victim.name}: whole block ({sum(victim.tokens)} tokens)")
            victim.items, victim.tokens, victim.keys = [], [], []
    return blocks, drops
