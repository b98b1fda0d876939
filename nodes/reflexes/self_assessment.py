"""The model's own reliability marks (HMP "confidence and unverified facts").

An output may carry:
- `[confidence=0.6]claim[/confidence]` tags around statements it is unsure of;
- an `UnverifiedFacts: [{"claim": …, "context": …, "confidence": …, "sources": […], "why_unverified": …,
  "priority": …}, …]` block;
- a `Confidence: 0.8` line (the whole message);
- an `Emotions: curiosity:4 (a new idea), joy:2` line: the model's own emotional rating of this output,
  which spares the evaluation call (HMP: the LLM that wrote the output rates it).

All are parsed leniently: a malformed block is repaired as far as possible and the problem reported, never
raised. The thought that is stored and compared keeps the tagged words but not the markup or the blocks.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from llm.json_output import read_json
from nodes.reflexes.emotion import parse_emotions
from nodes.state import UnverifiedFactDict

TAG = re.compile(r"\[confidence\s*[=:]\s*([0-9]*\.?[0-9]+%?)\s*\](.*?)\[/confidence\]", re.IGNORECASE | re.DOTALL)
BLOCK = re.compile(r"unverified[_ ]?facts\s*:\s*", re.IGNORECASE)
OVERALL = re.compile(r"^[ \t#*]*confidence\s*[:=]\s*([0-9]*\.?[0-9]+%?)[ \t]*,?[ \t]*$", re.IGNORECASE | re.MULTILINE)
EMOTIONS = re.compile(r"^[ \t#*]*emotions\s*:[ \t]*(.+)$", re.IGNORECASE | re.MULTILINE)
MAX_CLAIM_CHARS = 500


@dataclass
class SelfAssessment:
    body: str
    confidence: float | None = None
    facts: list[UnverifiedFactDict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    emotions: list[str] = field(default_factory=list)  # "name:strength (reason)" from an Emotions: line


def _fraction(raw: Any) -> float | None:
    """0..1 from 0.7, "0.7", "70%" or 70; None when it is no number."""
    text = str(raw).strip()
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        return None
    if text.endswith("%") or 1 < value <= 100:
        value /= 100
    return min(1.0, max(0.0, value))


def _block(text: str, errors: list[str]) -> tuple[list[Any], tuple[int, int] | None]:
    """The parsed UnverifiedFacts list and the span it covers in `text`."""
    match = BLOCK.search(text)
    if match is None:
        return [], None
    start = match.end()
    if not text[start:].startswith("["):
        errors.append("UnverifiedFacts: expected a JSON list after the colon")
        return [], (match.start(), start)
    try:
        items, length = json.JSONDecoder().raw_decode(text[start:])
        return (items if isinstance(items, list) else []), (match.start(), start + length)
    except ValueError as exc:  # broken JSON: read it leniently up to the Confidence line (or the end)
        end = OVERALL.search(text, start)
        chunk = text[start : end.start() if end else len(text)]
        repaired = read_json(chunk).value
        why = f"{exc.msg} at char {exc.pos}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        errors.append(
            f"UnverifiedFacts: malformed JSON ({why}); "
            f"kept {len(repaired) if isinstance(repaired, list) else 0} repaired item(s)"
        )
        return (repaired if isinstance(repaired, list) else []), (match.start(), start + len(chunk))


def parse_self_assessment(text: str) -> SelfAssessment:
    errors: list[str] = []
    items, span = _block(text, errors)
    overall_match = OVERALL.search(text)
    overall = _fraction(overall_match.group(1)) if overall_match else None
    facts: list[UnverifiedFactDict] = []
    for n, item in enumerate(items, 1):
        if not isinstance(item, dict) or not str(item.get("claim") or "").strip():
            errors.append(f"UnverifiedFacts item {n}: no claim")
            continue
        confidence = _fraction(item.get("confidence"))
        if confidence is None:
            errors.append(f"UnverifiedFacts item {n}: confidence {item.get('confidence')!r} is not a number 0..1")
        sources = item.get("sources") or []
        try:
            priority = int(item.get("priority") or 0)
        except (TypeError, ValueError):
            priority = 0
        facts.append(
            {
                "claim": str(item["claim"]).strip()[:MAX_CLAIM_CHARS],
                "context": str(item.get("context") or "")[:1000],
                "confidence": confidence if confidence is not None else (overall if overall is not None else 0.5),
                "sources": [str(s) for s in (sources if isinstance(sources, list) else [sources])][:10],
                "why_unverified": str(item.get("why_unverified") or "")[:500],
                "priority": priority,
                "origin": "block",
            }
        )
    claimed = {f["claim"].lower() for f in facts}
    for raw, inner in TAG.findall(text):
        claim = " ".join(inner.split())[:MAX_CLAIM_CHARS]
        confidence = _fraction(raw)
        if claim and claim.lower() not in claimed and confidence is not None:
            claimed.add(claim.lower())
            facts.append(
                {
                    "claim": claim,
                    "context": "",
                    "confidence": confidence,
                    "sources": [],
                    "why_unverified": "",
                    "priority": 0,
                    "origin": "tag",
                }
            )
    body = text
    if span is not None:
        body = body[: span[0]] + body[span[1] :]
    emotions: list[str] = []
    emotion_match = EMOTIONS.search(body)
    if emotion_match:
        rated = parse_emotions(emotion_match.group(1))
        emotions = [f"{n}:{s} ({r})" if r else f"{n}:{s}" for n, s, r in rated]
        if not emotions:
            errors.append(f"Emotions: no 'emotion:1-5' pair in {emotion_match.group(1)[:80]!r}")
        body = body[: emotion_match.start()] + body[emotion_match.end() :]
    body = OVERALL.sub("", TAG.sub(lambda m: m.group(2), body))
    return SelfAssessment(
        body=re.sub(r"\n{3,}", "\n\n", body).strip(), confidence=overall, facts=facts, errors=errors, emotions=emotions
    )
