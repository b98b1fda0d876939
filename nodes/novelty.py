"""How new an output is against the thread's recent ones (HMP §6), cheapest signal first.

1. n-gram overlap (character 3-grams and word bigrams) catches verbatim and surface-edited repeats;
2. the cosine of sentence embeddings (the memory index's model, cached per text) catches paraphrase loops;
3. only when those leave it uncertain, the LLM comparison of HMP §6 (assessment, novelty_score, new /
   refined / discarded ideas, tags), asked in the same structured call as the emotional rating.

Similarity to one earlier output = max(n-gram, cosine mapped linearly from `SEMANTIC_FLOOR`..`SEMANTIC_CEILING`
to 0..1); the output's similarity is the max over the last `responses` outputs. Bands: ≥ `stagnation_threshold`
stagnant (decided without an LLM), < `novel_below` new (likewise), in between uncertain.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from llm import Sampling
from nodes.prompts import COMPARISON_PART, COMPARISON_SCHEMA, EMOTION_PART, EMOTION_SCHEMA, EVALUATION_TAIL

log = logging.getLogger(__name__)
WORD = re.compile(r"\w+", re.UNICODE)
# all-MiniLM-L6-v2 cosines, measured on bench/data/stagnation_set.py: new thoughts on one theme 0.14–0.61,
# paraphrases of one thought 0.52–0.95, surface-edited repeats ≥ 0.96
SEMANTIC_FLOOR, SEMANTIC_CEILING = 0.35, 0.8
MAX_EVAL_CHARS = 1500
RECENT_KINDS = ("response", "continuation")


def normalise(text: str) -> str:
    return " ".join(WORD.findall(text.lower()))


def _shingles(text: str, n: int = 3) -> set[str]:
    return {text[i:i + n] for i in range(max(1, len(text) - n + 1))} if text else set()


def _bigrams(text: str) -> set[tuple[str, str]]:
    words = text.split()
    return set(zip(words, words[1:])) if len(words) > 1 else {(w, "") for w in words}


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def similarity(a: str, b: str) -> float:
    """Lexical similarity 0..1: the mean of character-3-gram and word-bigram Jaccard (1.0 when identical)."""
    na, nb = normalise(a), normalise(b)
    if not na or not nb:
        return 0.0
    if na == nb:
        return 1.0
    return (_jaccard(_shingles(na), _shingles(nb)) + _jaccard(_bigrams(na), _bigrams(nb))) / 2


def semantic_similarity(cosine: float) -> float:
    return min(1.0, max(0.0, (cosine - SEMANTIC_FLOOR) / (SEMANTIC_CEILING - SEMANTIC_FLOOR)))


def band_of(value: float, stagnant_at: float, novel_below: float) -> str:
    return "stagnant" if value >= stagnant_at else "new" if value < novel_below else "uncertain"


def measure(text: str, recent: list[Any], memory: Any, *, stagnant_at: float, novel_below: float) -> dict[str, Any]:
    """Cheap signals of `text` against `recent` messages (oldest first); no LLM."""
    texts = [m.content for m in recent]
    lexical = [similarity(text, t) for t in texts]
    cosines: list[float] | None = None
    if memory is not None and texts and normalise(text):
        try:
            vectors = memory.embed_texts([text, *texts])
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


def evaluation_schema(emotions: bool, comparison: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    if emotions:
        properties["emotions"] = EMOTION_SCHEMA["properties"]["emotions"]
    if comparison:
        properties["comparison"] = COMPARISON_SCHEMA
    return {"type": "object", "properties": properties, "required": list(properties)}


def evaluation_prompt(response: str, vocabulary: list[str], previous: str | None) -> str:
    parts = []
    if vocabulary is not None:
        parts.append(EMOTION_PART.format(vocabulary=json.dumps(vocabulary, ensure_ascii=False)))
    if previous is not None:
        parts.append(COMPARISON_PART.format(previous=previous[-MAX_EVAL_CHARS:]))
    return "\n".join(parts) + EVALUATION_TAIL.format(response=response[-MAX_EVAL_CHARS:])


def evaluate(llms, response: str, *, vocabulary: list[str] | None, previous: str | None, prefer: str | None,
             tags: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """One structured call: the emotional rating (when `vocabulary` is given) and/or the comparison with
    `previous`. Returns (generation, parsed JSON object — {} when the answer was no JSON at all)."""
    schema = evaluation_schema(vocabulary is not None, previous is not None)
    max_tokens = (128 if vocabulary is not None else 0) + (160 if previous is not None else 0)
    gen = llms.generate("evaluate" if previous is not None else "emotion",
                        prompt=evaluation_prompt(response, vocabulary, previous),
                        sampling=Sampling(temperature=0.2, top_p=0.9, max_tokens=max_tokens),
                        json_schema=schema, prefer=prefer, tags=tags)
    return gen, json_object_lenient(gen.text)


def json_object_lenient(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        from json_repair import repair_json

        data = repair_json(text or "", return_objects=True)
    return data if isinstance(data, dict) else {}


def _phrases(value: Any, limit: int = 5) -> list[str]:
    items = value if isinstance(value, list) else [value] if isinstance(value, str) and value.strip() else []
    return [str(i).strip()[:120] for i in items if str(i).strip()][:limit]


def parse_comparison(data: Any) -> dict[str, Any] | None:
    """The HMP §6 comparison from a JSON object, tolerant of types; None when there is no usable score."""
    if not isinstance(data, dict):
        return None
    try:
        score = float(str(data.get("novelty_score")).rstrip("%"))
    except ValueError:
        return None
    assessment = str(data.get("assessment") or "").strip().lower()
    return {"assessment": "identical" if assessment in ("identical", "идентичен") else "not identical",
            "novelty_score": min(100.0, max(0.0, score)),
            "new_ideas": _phrases(data.get("new_ideas")), "refined_ideas": _phrases(data.get("refined_ideas")),
            "discarded_ideas": _phrases(data.get("discarded_ideas")),
            "tags": [t.lower() for t in _phrases(data.get("tags"), 6) if len(t) <= 32]}


def reflection_of(comparison: dict[str, Any] | None) -> str | None:
    """HMP's automatic summary: new / refined / discarded ideas, whichever are present."""
    if not comparison:
        return None
    parts = [f"{label}: {'; '.join(comparison[key])}" for key, label in
             (("new_ideas", "new ideas"), ("refined_ideas", "refined ideas"), ("discarded_ideas", "discarded ideas"))
             if comparison.get(key)]
    return ". ".join(parts) or None
