"""Hierarchical summarisation that never truncates its input.

The text is split into pieces that fit the summariser's own window; each piece is summarised, then
the joined summaries are summarised the same way, until one call covers everything. Used by Epos
compression and by Stelis chronicles (whose input must never be cut).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llm import LLMRegistry, Sampling

log = logging.getLogger(__name__)


@dataclass
class Summary:
    text: str
    calls: int
    levels: int


def split_to_fit(text: str, max_tokens: int, count: Callable[[str], int]) -> list[str]:
    """Split at paragraph, then line, then sentence, then hard boundaries so each piece counts ≤ max_tokens."""
    if count(text) <= max_tokens:
        return [text]
    for sep in ("\n\n", "\n", ". "):
        parts = text.split(sep)
        if len(parts) > 1:
            pieces, current = [], ""
            for part in parts:
                candidate = f"{current}{sep}{part}" if current else part
                if count(candidate) <= max_tokens:
                    current = candidate
                    continue
                if current:
                    pieces.append(current)
                current = part
            if current:
                pieces.append(current)
            return [p for piece in pieces for p in split_to_fit(piece, max_tokens, count)]
    half = len(text) // 2
    return split_to_fit(text[:half], max_tokens, count) + split_to_fit(text[half:], max_tokens, count)


def summarise(
    text: str,
    llms: LLMRegistry,
    prompt: str,
    *,
    purpose: str,
    max_tokens: int,
    merge_prompt: str | None = None,
    tags: dict[str, Any] | None = None,
    **fields: Any,
) -> Summary:
    """Summarise all of `text`. `prompt` (and `merge_prompt` for the levels above the first) are
    format strings with {part}, {parts} and {text} plus `fields`."""
    provider = llms.primary()
    count = provider.count_tokens
    summary_tokens = max(32, min(max_tokens, provider.context_window // 4))
    sampling = Sampling(temperature=0.3, max_tokens=summary_tokens)
    calls, level, previous_pieces, depth = 0, text, None, 0
    while True:
        template = prompt if depth == 0 or merge_prompt is None else merge_prompt
        overhead = count(template.format(part=1, parts=1, text="", **fields))
        room = max(32, provider.context_window - summary_tokens - overhead - 32)
        pieces = split_to_fit(level, room, count)
        if previous_pieces is not None and len(pieces) >= previous_pieces:
            log.warning("summarisation stopped shrinking at %s pieces; keeping this level's summaries", len(pieces))
            return Summary(level, calls, depth)
        summaries = []
        for index, piece in enumerate(pieces, start=1):
            filled = template.format(part=index, parts=len(pieces), text=piece, **fields)
            summaries.append(llms.generate(purpose, prompt=filled, sampling=sampling, tags=tags).text.strip())
            calls += 1
        level = "\n\n".join(s for s in summaries if s)
        depth += 1
        if len(pieces) == 1:
            return Summary(level, calls, depth)
        previous_pieces = len(pieces)
