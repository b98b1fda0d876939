"""The emotional reflex's logic (HMP): reading ratings `emotion:strength (reason)`, which earlier rating a new
output may inherit, a rating read from the thought's own words (a cheap signal: the model is asked only when it
finds none), and the dynamics of emotions × novelty."""

from __future__ import annotations

import re
from typing import Any

from llm.json_output import read_json
from memory.text import emotion_strengths
from nodes.state import NoveltySignals

LOOSE = re.compile(r"([^\W\d_][\w-]{1,15})\s*[:=]\s*\"?([1-5])\b(?:\s*\(([^)]{0,80})\))?", re.UNICODE)
ANXIOUS = {"anxiety", "fear", "panic", "worry", "stress", "alarm", "dread", "nervousness"}


# The words that name an emotion of the persona's vocabulary in its own thought (English and Russian stems). Only
# emotions of the vocabulary are read; a thought with none of these words goes to the model.
THOUGHT_LEXICON = {
    "joy": r"joy\w*|glad|happy|happiness|delight\w*|wonderful|радост\w*|рад|рада|счаст\w*",
    "curiosity": r"curious|curiosity|wonder|wondering|intrigu\w*|любопыт\w*|интересно",
    "calm": r"calm\w*|peace\w*|serene|tranquil\w*|спокой\w*|тишин\w*",
    "sadness": r"sad|sadness|sorrow\w*|lonely|loneliness|melanchol\w*|грус\w*|печал\w*|тоск\w*",
    "anxiety": r"anxious|anxiety|afraid|fear\w*|worr\w*|nervous|uneasy|тревог\w*|тревож\w*|страх\w*|боюсь",
}
_THOUGHT_LEXICON_RE = {name: re.compile(rf"(?<!\w)(?:{pattern})(?!\w)", re.IGNORECASE)
                       for name, pattern in THOUGHT_LEXICON.items()}


def lexicon_rating(text: str, vocabulary: list[str]) -> list[str]:
    """`emotion:strength (reason)` for each vocabulary emotion the thought names in its own words (strength 2, 3
    when named more than once), strongest first; [] when it names none (then the model rates it)."""
    counts = [(name, len(rx.findall(text))) for name, rx in _THOUGHT_LEXICON_RE.items() if name in vocabulary]
    found = sorted(((name, n) for name, n in counts if n), key=lambda pair: -pair[1])
    return [f"{name}:{min(3, 1 + n)} (named in the thought)" for name, n in found[:3]]


def anxious(emotions: list[tuple[str, int]]) -> bool:
    return any(name in ANXIOUS and strength > 3 for name, strength in emotions)


def parse_emotions(text: str) -> list[tuple[str, int, str]]:
    """(emotion, strength 1..5, reason) from JSON or from loose `joy:4 (why)` text."""
    found: list[tuple[str, int, str]] = []
    data = read_json(text).value  # a cut-off answer keeps its complete items
    items = data.get("emotions", []) if isinstance(data, dict) else data
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            name, strength = str(item.get("emotion", "")).strip().lower(), item.get("strength")
            if name and isinstance(strength, int) and 1 <= strength <= 5:
                found.append((name, strength, str(item.get("reason", "")).strip()[:100]))
        elif isinstance(item, str):
            found += parse_emotions(item)
    if found:
        return _dedupe(found)
    for name, strength, reason in LOOSE.findall(text or ""):
        found.append((name.lower(), int(strength), (reason or "").strip()))
    return _dedupe(found)


def _dedupe(items: list[tuple[str, int, str]]) -> list[tuple[str, int, str]]:
    best: dict[str, tuple[str, int, str]] = {}
    for item in items:
        name = item[0].split()[0][:16] if item[0].split() else ""
        if len(name) >= 3 and name.isalpha() and (name not in best or item[1] > best[name][1]):
            best[name] = (name, item[1], item[2])
    return list(best.values())


def carried_rating(recent: list[Any], signals: NoveltySignals, *, human_spoke: bool, every: int) -> Any | None:
    """The earlier output whose rating this one may inherit without asking the LLM, or None.

    A repeat inherits its original's. Otherwise, with `every` > 1, the last output's rating carries over
    when no human note arrived, it was not anxious, and fewer than `every` − 1 outputs in a row inherited."""
    by_id = {m.id: m for m in recent}
    if signals.get("band") == "stagnant" and (match := by_id.get(signals.get("similar_to_id"))) and match.emotions:
        return match
    if every <= 1 or not recent or human_spoke:
        return None
    last = recent[-1]
    if not last.emotions or anxious(emotion_strengths(last.emotions)):
        return None
    inherited = 0
    for message in reversed(recent):
        if (message.meta or {}).get("emotion_source") != "carried":
            break
        inherited += 1
    return last if inherited < every - 1 else None


POSITIVE = {"joy", "curiosity", "excitement", "enthusiasm", "inspiration", "delight", "interest", "hope", "surprise",
            "tenderness", "wonder", "pride", "gratitude", "love", "amusement"}
FADING = {"boredom", "sadness", "fatigue", "apathy", "tiredness", "emptiness", "melancholy", "indifference"}


def emotional_dynamics(emotions: list[tuple[str, int]], novelty_score: float) -> str:
    strongest = lambda names: max((s for n, s in emotions if n in names), default=0)  # noqa: E731
    if novelty_score >= 50 and strongest(ANXIOUS) >= 3:
        return "panicked_novelty"
    if novelty_score >= 50 and strongest(POSITIVE) >= 3:
        return "productive_excitement"
    if novelty_score < 30 and (sum(s for _, s in emotions) <= 2 or strongest(FADING) >= 3):
        return "burnout"
    return "steady"
