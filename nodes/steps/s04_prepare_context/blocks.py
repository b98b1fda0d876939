"""Prompt blocks and the budget. What does not fit is taken away in a fixed order, and every step is reported:

1. **A block too large for its share** of the budget (`share`: 30% for the command guide, 10% for the skills and
   the bootstrap files) takes the largest of its smaller `forms` that fits the share (the guide: full → brief →
   compact → essential; the skills: a line each; the bootstrap: AGENTS.md alone), before anything is dropped: one
   oversized block never costs the smaller, more important ones their place.
2. **Lowest priority first**: the block with the lowest priority gives up one thing — its oldest item (`trim_oldest`:
   recent thoughts, recalled memories, notes…), else its next smaller form, else the whole block. A trimmed block's
   last item goes at `last_priority` when it has one (the latest thought outlives core memory and goals: it is what
   the next thought builds on). A `keep` block is never dropped whole: only shrunk to its smaller forms.
3. **Last resort** (only the kept blocks are left and they still do not fit, e.g. a persona with a very long
   SOUL.md in a small Stelis child): a `keep="head"` block is cut to its head, lowest priority first. A
   `keep="whole"` block (ethics) is never dropped or cut: fit_blocks leaves it, and the caller refuses a budget that
   cannot hold it (ContextBudgetError).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from nodes.steps.s04_prepare_context.untrusted import defuse, fenced

Keep = Literal["no", "head", "whole"]


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
    forms: list[list[str]] = field(default_factory=list)  # smaller renderings of the items, largest first
    share: float | None = None  # above this share of the budget the block takes a smaller form first (step 1)
    keep: Keep = "no"  # never dropped whole: "head" may be cut to its head as a last resort, "whole" never
    last_priority: int | None = None  # a trim_oldest block's last item goes at this priority (default: `priority`)

    def __post_init__(self) -> None:
        if self.fence is not None:
            self.items = [defuse(item) for item in self.items]
            self.forms = [[defuse(item) for item in form] for form in self.forms]

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


class _Fitter:
    def __init__(self, blocks: list[Block], count: Callable[[str], int]) -> None:
        self.blocks, self.count = blocks, count
        self.drops: list[str] = []
        for block in blocks:
            block.tokens = [count(item) + 1 for item in block.items]
        self.envelope = {b.name: count(envelope) + 2 if (envelope := b.envelope()) else 0 for b in blocks}

    def size(self, block: Block) -> int:
        return sum(block.tokens) + (self.envelope[block.name] if block.items else 0)

    def total(self) -> int:
        return sum(self.size(b) for b in self.blocks)

    def shrink(self, block: Block) -> None:
        """The block's next smaller form."""
        before = self.size(block)
        block.items = block.forms.pop(0)
        block.tokens = [self.count(item) + 1 for item in block.items]
        block.keys = []
        self.drops.append(f"{block.name}: shrunk to a smaller form ({before} → {self.size(block)} tokens)")

    def next_step(self) -> tuple[int, Block] | None:
        """(priority, block) of the next thing to give up in step 2, or None when only kept blocks are left."""
        steps = []
        for b in self.blocks:
            if b.trim_oldest and len(b.items) > 1:
                steps.append((b.priority, b))
            elif b.forms:
                steps.append((b.priority, b))
            elif b.items and b.keep == "no":
                steps.append((b.last_priority if b.trim_oldest and b.last_priority is not None else b.priority, b))
        return min(steps, key=lambda s: s[0]) if steps else None

    def give_up(self, block: Block) -> None:
        if block.trim_oldest and len(block.items) > 1:
            block.items.pop(0)
            removed = block.tokens.pop(0)
            if block.keys:
                block.keys.pop(0)
            self.drops.append(f"{block.name}: oldest item ({removed} tokens)")
        elif block.forms:
            self.shrink(block)
        else:
            self.drops.append(f"{block.name}: whole block ({sum(block.tokens)} tokens)")
            block.items, block.tokens, block.keys = [], [], []

    def cut_head(self, block: Block, room: int) -> None:
        """Cut the block's text to the head that fits `room` tokens (at a line end where one is near)."""
        before = self.size(block)
        text = "\n".join(block.items)
        low, high = 0, len(text)
        while low < high:  # the longest prefix whose block fits
            mid = (low + high + 1) // 2
            if self.count(text[:mid]) + 1 + self.envelope[block.name] <= room:
                low = mid
            else:
                high = mid - 1
        head = text[:low]
        if "\n" in head and len(head) < len(text):
            head = head[: head.rindex("\n")]
        block.items = [head] if head.strip() else []
        block.tokens = [self.count(head) + 1] if block.items else []
        block.keys = []
        self.drops.append(f"{block.name}: cut to its head ({before} → {self.size(block)} tokens)")


def size_of(blocks: list[Block], count: Callable[[str], int]) -> int:
    """What the blocks cost as fit_blocks counts it (their items and, when they have any, their envelopes)."""
    return _Fitter(blocks, count).total()


def fit_blocks(blocks: list[Block], budget: int, count: Callable[[str], int]) -> tuple[list[Block], list[str]]:
    """Take away content in the module doc's order until the blocks fit `budget` tokens. Returns (blocks, drops)."""
    fitted, drops, _ = fit_blocks_sized(blocks, budget, count)
    return fitted, drops


def fit_blocks_sized(
    blocks: list[Block], budget: int, count: Callable[[str], int]
) -> tuple[list[Block], list[str], int]:
    """fit_blocks, and what the fitted blocks cost (`size_of` them, without counting every item's tokens again:
    with an embedded model a count is a tokenizer call)."""
    fit = _Fitter(blocks, count)
    for block in blocks:  # 1. a block over its share takes a smaller form
        while block.share is not None and block.forms and fit.size(block) > block.share * budget:
            fit.shrink(block)
    while fit.total() > budget:  # 2. lowest priority first
        step = fit.next_step()
        if step is None:
            break
        fit.give_up(step[1])
    for block in sorted((b for b in blocks if b.keep == "head" and b.items), key=lambda b: b.priority):
        if fit.total() <= budget:  # 3. the last resort: a kept block's head
            break
        fit.cut_head(block, budget - (fit.total() - fit.size(block)))
    return blocks, fit.drops, fit.total()
