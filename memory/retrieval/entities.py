"""Entities of a memory, extracted offline at write time, and spreading activation over the entity–memory graph.

Extractor (no model, no download): capitalised spans that are not merely sentence-initial ("Caroline",
"Pride Parade", "LGBTQ"), numbers and years, month and weekday names, and the content words (Snowball stems,
memory/text.py) — the nouns and verbs a question shares with its evidence. A name is kept as `n:<words>`, a
number/date as `d:<text>`, a content word as `w:<stem>`, so the graph can weight them apart.

Activation (HippoRAG-style, two hops of personalised PageRank without the full matrix): the query's entities
seed weight idf(e); each memory holding a seed gets Σ idf over its seeds; those memories pass their activation on
to their own entities (divided by how many memories hold each entity: a common entity spreads little); the
memories holding the activated entities gain from them. What a memory reaches only through another memory is
the multi-hop path ("Caroline's friend" → the friend's name → what the friend did).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping
from typing import TypeVar

from memory.text import STOP_WORDS, tokenize

_CAPITALISED = re.compile(r"\b[A-Z][\w'’-]*(?:\s+(?:of|the|de|and)?\s*[A-Z][\w'’-]*)*")
_NUMBER = re.compile(r"\b\d{1,4}(?:[.,:]\d+)?\b")
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+|\n)\s*[\"'(]*$")
MONTHS = (
    "january february march april may june july august september october november december "
    "monday tuesday wednesday thursday friday saturday sunday"
).split()
COMMON_CAPITALISED = frozenset(
    """i im i'm ive i've id i'd ill i'll hey hi hello oh wow yes yeah no ok okay thanks thank
great awesome cool sure well so and but what who when where why how that this it its it's that's there there's they
we you he she my your our their haha lol omg please sorry congrats congratulations nice good glad love""".split()
)


def extract(text: str) -> list[str]:
    """The entities of a text (see the module doc), each once, in order of appearance."""
    found: list[str] = []
    for match in _CAPITALISED.finditer(text):
        words = match.group(0).split()
        if _SENTENCE_START.search(text[: match.start()]) and len(words) == 1:
            lowered = words[0].lower().strip("'’")
            if lowered in COMMON_CAPITALISED or lowered in STOP_WORDS:
                continue
        words = [w for w in words if w.lower().strip("'’") not in COMMON_CAPITALISED]
        if words:
            name = " ".join(re.split(r"['’]", w)[0] for w in words).lower()
            if name and name not in STOP_WORDS:
                found.append(f"n:{name}")
    found.extend(f"d:{n}" for n in _NUMBER.findall(text))
    lowered = text.lower()
    found.extend(f"d:{m}" for m in MONTHS if m in lowered and re.search(rf"\b{m}\b", lowered))
    found.extend(f"w:{stem}" for stem in tokenize(text) if len(stem) > 2 and not stem.isdigit())
    return list(dict.fromkeys(found))


Key = TypeVar("Key", bound=Hashable)  # a memory's id (or a benchmark's turn id)

ENTITY_KIND_WEIGHT = {"n": 1.5, "d": 1.0, "w": 0.6}


def activation(
    query_entities: Iterable[str],
    holders: Mapping[str, Iterable[Key]],
    entities_of: Mapping[Key, Iterable[str]],
    documents: int,
    *,
    damping: float = 0.5,
    max_fanout: int = 200,
) -> dict[Key, float]:
    """Memories' activation from the query's entities (module doc): first hop Σ idf of the seeds a memory holds,
    plus `damping` × what it reaches through the memories of the first hop. `holders`: entity → memory ids
    holding it; `entities_of`: memory id → its entities (only the first hop's are read). Entities held by more
    than `max_fanout` memories seed nothing (they select nothing)."""

    def weight(entity: str, count: int) -> float:
        return ENTITY_KIND_WEIGHT.get(entity[:1], 1.0) * math.log(1 + documents / max(1, count))

    first: dict[Key, float] = defaultdict(float)
    for entity in dict.fromkeys(query_entities):
        held = list(holders.get(entity, ()))
        if not held or len(held) > max_fanout:
            continue
        w = weight(entity, len(held))
        for item in held:
            first[item] += w
    if not first or damping <= 0:
        return dict(first)
    top = max(first.values())
    spread: dict[str, float] = defaultdict(float)
    for item, value in first.items():
        for entity in entities_of.get(item, ()):
            spread[entity] += value / top
    second: dict[Key, float] = defaultdict(float)
    for entity, value in spread.items():
        held = list(holders.get(entity, ()))
        if len(held) < 2 or len(held) > max_fanout:
            continue
        w = weight(entity, len(held)) * value / len(held)
        for item in held:
            second[item] += w
    if second:
        scale = top / max(second.values())
        for item, value in second.items():
            first[item] += damping * value * scale
    return dict(first)
