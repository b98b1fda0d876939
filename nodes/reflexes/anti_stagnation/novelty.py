"""How new an output is against the thread's recent ones (HMP's anti-stagnation reflex), cheapest signal first.

1. n-gram overlap (character 3-grams and word bigrams) catches verbatim and surface-edited repeats;
2. the cosine of sentence embeddings (the memory index's model, cached per text) catches paraphrase loops;
3. only when those leave it uncertain, HMP's LLM comparison (assessment, novelty_score, new /
   refined / discarded ideas, tags), asked in the same structured call as the emotional rating.

Similarity to one earlier output = max(n-gram, cosine mapped linearly from `SEMANTIC_FLOOR`..`SEMANTIC_CEILING`
to 0..1); the output's similarity is the max over the last `responses` outputs. Bands: ≥ `stagnation_threshold`
stagnant (decided without an LLM), < `novel_below` new (likewise), in between uncertain.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any, Literal

from nodes.state import NoveltySignals

if TYPE_CHECKING:
    from managers import Managers
    from managers.thoughts import MessageLine
    from nodes.context import Services
    from nodes.state import TickState

log = logging.getLogger(__name__)
WORD = re.compile(r"\w+", re.UNICODE)
# all-MiniLM-L6-v2 cosines, measured on bench/data/stagnation_set.py: new thoughts on one theme 0.14–0.61,
# paraphrases of one thought 0.52–0.95, surface-edited repeats ≥ 0.96
SEMANTIC_FLOOR, SEMANTIC_CEILING = 0.35, 0.8
RECENT_KINDS = ("response", "continuation")


def normalise(text: str) -> str:
    return " ".join(WORD.findall(text.lower()))


def _shingles(text: str, n: int = 3) -> set[str]:
    return {text[i : i + n] for i in range(max(1, len(text) - n + 1))} if text else set()


def _bigrams(text: str) -> set[tuple[str, str]]:
    words = text.split()
    return set(zip(words, words[1:])) if len(words) > 1 else {(w, "") for w in words}


def _jaccard(a: AbstractSet[Any], b: AbstractSet[Any]) -> float:
    if not a or not b:
        return 0.0
    shared = len(a & b)  # the union's size follows from it: no second set built
    return shared / (len(a) + len(b) - shared)


GRAMS_KEPT = 64  # texts whose n-grams are kept: a tick compares its output with the last `cycle.responses` outputs,
# and the next tick with nearly the same ones


@functools.lru_cache(maxsize=GRAMS_KEPT)
def _grams(text: str) -> tuple[str, frozenset[str], frozenset[tuple[str, str]]]:
    """A text's normalised form, its character 3-grams and word bigrams, computed once while it is recent."""
    normalised = normalise(text)
    return normalised, frozenset(_shingles(normalised)), frozenset(_bigrams(normalised))


def similarity(a: str, b: str) -> float:
    """Lexical similarity 0..1: the mean of character-3-gram and word-bigram Jaccard (1.0 when identical)."""
    (na, shingles_a, bigrams_a), (nb, shingles_b, bigrams_b) = _grams(a), _grams(b)
    if not na or not nb:
        return 0.0
    if na == nb:
        return 1.0
    return (_jaccard(shingles_a, shingles_b) + _jaccard(bigrams_a, bigrams_b)) / 2


def semantic_similarity(cosine: float) -> float:
    return min(1.0, max(0.0, (cosine - SEMANTIC_FLOOR) / (SEMANTIC_CEILING - SEMANTIC_FLOOR)))


def band_of(value: float, stagnant_at: float, novel_below: float) -> Literal["new", "uncertain", "stagnant"]:
    return "stagnant" if value >= stagnant_at else "new" if value < novel_below else "uncertain"


def recent_outputs(services: Services, house: Managers, state: TickState) -> list[MessageLine]:
    """The thread's last `cycle.responses` outputs, oldest first, read once per tick (both reflex steps compare the
    new output with them, and nothing is stored in between)."""
    limit = services.settings.cycle.responses
    recent: list[MessageLine] = services.reads.get(
        state.thread_id,
        state.tick,
        ("recent_outputs", limit),
        lambda: house.thoughts.recent_lines(state.thread_id, limit, kinds=RECENT_KINDS),
    )
    return recent


def measure(
    text: str,
    recent: list[Any],
    memory: Any,
    *,
    stagnant_at: float,
    novel_below: float,
    documents: Iterable[tuple[str, str, list[str]]] = (),
) -> NoveltySignals:
    """Cheap signals of `text` against `recent` messages (oldest first); no LLM. `documents`: memories the tick will
    write (the output as the memory stores it), embedded in the same call."""
    texts = [m.content for m in recent]
    lexical = [similarity(text, t) for t in texts]
    cosines: list[float] | None = None
    if memory is not None and texts and normalise(text):
        try:
            vectors = memory.embed_texts([text, *texts], documents=documents)
            cosines = [float(c) for c in vectors[1:] @ vectors[0]]
        except Exception:  # a broken embedding server must not stop the tick: n-grams still decide
            log.exception("embedding similarity unavailable; n-gram signals only")
    combined = [max(lex, semantic_similarity(cosines[i]) if cosines else 0.0) for i, lex in enumerate(lexical)]
    best = max(range(len(combined)), key=combined.__getitem__, default=None)
    value = combined[best] if best is not None else 0.0
    match = recent[best] if best is not None else None
    return {
        "similarity": round(value, 4),
        "ngram": round(max(lexical, default=0.0), 4),
        "semantic": round(max(cosines), 4) if cosines else None,
        "band": band_of(value, stagnant_at, novel_below),
        "compared_with": len(recent),
        "similar_to_tick": match.tick if match is not None else None,
        "similar_to_id": match.id if match is not None else None,
    }
