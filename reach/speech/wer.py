"""Word error rate: word-level edit distance over the reference's word count, after lowercasing and dropping
punctuation (and ё → е, so Russian spelling variants count as one word). Fifteen lines here rather than jiwer and its
two dependencies for one number."""

from __future__ import annotations

import re

WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")


def words(text: str) -> list[str]:
    return WORD.findall(text.lower().replace("ё", "е").replace("-", " "))


def edit_distance(reference: list[str], hypothesis: list[str]) -> int:
    previous = list(range(len(hypothesis) + 1))
    for i, ref in enumerate(reference, 1):
        current = [i]
        for j, hyp in enumerate(hypothesis, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ref != hyp)))
        previous = current
    return previous[-1]


def word_error_rate(references: list[str], hypotheses: list[str]) -> float:
    """Corpus WER: all the edits over all the reference words."""
    edits = sum(edit_distance(words(r), words(h)) for r, h in zip(references, hypotheses, strict=True))
    total = sum(len(words(r)) for r in references)
    return edits / total if total else 0.0
