"""The reflexes' one evaluation call: the emotional rating (HMP) and, only when the cheap novelty signals are
uncertain, HMP's novelty comparison — in one structured JSON answer."""

from __future__ import annotations

import json
from typing import Any, Literal

import i18n
from llm import LLMRegistry, Sampling
from llm.json_output import json_object
from nodes.reflexes.prompts import COMPARISON_PART, COMPARISON_SCHEMA, EMOTION_PART, EMOTION_SCHEMA, EVALUATION_TAIL
from nodes.state import Comparison

MAX_EVAL_CHARS = 1500


def evaluation_schema(emotions: bool, comparison: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    if emotions:
        properties["emotions"] = EMOTION_SCHEMA["properties"]["emotions"]
    if comparison:
        properties["comparison"] = COMPARISON_SCHEMA
    return {"type": "object", "properties": properties, "required": list(properties)}


def evaluation_prompt(response: str, vocabulary: list[str] | None, previous: str | None, language: str = "en") -> str:
    parts = []
    if vocabulary is not None:
        parts.append(i18n.text(EMOTION_PART, language).format(vocabulary=json.dumps(vocabulary, ensure_ascii=False)))
    if previous is not None:
        parts.append(i18n.text(COMPARISON_PART, language).format(previous=previous[-MAX_EVAL_CHARS:]))
    return "\n".join(parts) + i18n.text(EVALUATION_TAIL, language).format(response=response[-MAX_EVAL_CHARS:])


def evaluate(
    llms: LLMRegistry,
    response: str,
    *,
    vocabulary: list[str] | None,
    previous: str | None,
    prefer: str | None,
    tags: dict[str, Any],
    language: str = "en",
) -> tuple[Any, dict[str, Any]]:
    """One structured call: the emotional rating (when `vocabulary` is given) and/or the comparison with
    `previous`. Returns (generation, parsed JSON object — {} when the answer was no JSON at all)."""
    schema = evaluation_schema(vocabulary is not None, previous is not None)
    max_tokens = (128 if vocabulary is not None else 0) + (160 if previous is not None else 0)
    gen = llms.generate(
        "evaluate" if previous is not None else "emotion",
        prompt=evaluation_prompt(response, vocabulary, previous, language),
        sampling=Sampling(temperature=0.2, top_p=0.9, max_tokens=max_tokens),
        json_schema=schema,
        prefer=prefer,
        tags=tags,
    )
    return gen, json_object(gen.text)


def _phrases(value: Any, limit: int = 5) -> list[str]:
    items = value if isinstance(value, list) else [value] if isinstance(value, str) and value.strip() else []
    return [str(i).strip()[:120] for i in items if str(i).strip()][:limit]


def parse_comparison(data: Any) -> Comparison | None:
    """HMP's novelty comparison from a JSON object, tolerant of types; None when there is no usable score."""
    if not isinstance(data, dict):
        return None
    try:
        score = float(str(data.get("novelty_score")).rstrip("%"))
    except ValueError:
        return None
    assessment = str(data.get("assessment") or "").strip().lower()
    return {
        "assessment": "identical" if assessment in ("identical", "идентичен") else "not identical",
        "novelty_score": min(100.0, max(0.0, score)),
        "new_ideas": _phrases(data.get("new_ideas")),
        "refined_ideas": _phrases(data.get("refined_ideas")),
        "discarded_ideas": _phrases(data.get("discarded_ideas")),
        "tags": [t.lower() for t in _phrases(data.get("tags"), 6) if len(t) <= 32],
    }


def reflection_of(comparison: Comparison | None) -> str | None:
    """HMP's automatic summary: new / refined / discarded ideas, whichever are present."""
    if not comparison:
        return None
    sections: tuple[tuple[Literal["new_ideas", "refined_ideas", "discarded_ideas"], str], ...] = (
        ("new_ideas", "new ideas"),
        ("refined_ideas", "refined ideas"),
        ("discarded_ideas", "discarded ideas"),
    )
    parts = [f"{label}: {'; '.join(comparison[key])}" for key, label in sections if comparison.get(key)]
    return ". ".join(parts) or None
