"""Index-time expansion: the configured model reads a memory once, after its write, and states
its key phrases, the facts it holds and the dates it refers to (resolved against the record time); that text is
kept in the item's `meta.expansion`, indexed with its words (the full-text document) and as one more vector
(memory/retrieval/caches.py), so a later question that shares no word with the memory may share one with its
expansion. It runs in the memory index's follow-up (memory/followup.py), never on the tick's path, and only when
`memory.expansion` is on: off by default, because the embedded model's expansions invent facts and dates and made
recall@5 worse on a small LoCoMo subset (0.92 → 0.83 on 10 memories and 6 questions; bench/expansion.py measures it
beside the bound of an ideal expander on the same subset, and bench/ideal_expansion.py on all of dev).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from memory.upkeep.prompts import EXPANSION_PROMPT, EXPANSION_SCHEMA

MAX_TEXT = 2000  # characters of the memory the model reads
MAX_EXPANSION = 600  # characters of its answer kept

Generate = Callable[[str, dict[str, Any]], dict[str, Any]]  # (prompt, JSON schema) -> the answer's object


def expansion_text(answer: dict[str, Any]) -> str:
    """The model's answer as the text that is indexed (malformed fields are skipped, never raised on)."""
    parts: list[str] = []
    for field in ("key_phrases", "facts", "dates"):
        values = answer.get(field)
        if isinstance(values, list):
            parts += [str(v).strip() for v in values if isinstance(v, (str, int, float)) and str(v).strip()]
    return "; ".join(dict.fromkeys(parts))[:MAX_EXPANSION]


def expander(generate: Generate) -> Callable[[str, str, datetime], str]:
    """An expander for the follow-up: (text, author, record time) -> the expansion text."""

    def expand(text: str, author: str, when: datetime) -> str:
        prompt = EXPANSION_PROMPT.format(
            author=author or "someone", when=f"{when:%d %B %Y}", text=text[:MAX_TEXT].replace('"', "'")
        )
        return expansion_text(generate(prompt, EXPANSION_SCHEMA))

    return expand
