"""The emotional reflex's logic (HMP): reading ratings `emotion:strength (reason)`, which earlier rating a new
output may inherit, a rating read from the thought's own words, a rating from the tick's signals (novelty and
drives) for a thought that shows no feeling — the model is asked only when these are ambiguous — and the dynamics
of emotions × novelty."""

from __future__ import annotations

import re
from collections.abc import Collection
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
_THOUGHT_LEXICON_RE = {
    name: re.compile(rf"(?<!\w)(?:{pattern})(?!\w)", re.IGNORECASE) for name, pattern in THOUGHT_LEXICON.items()
}


def lexicon_rating(text: str, vocabulary: list[str]) -> list[str]:
    """`emotion:strength (reason)` for each vocabulary emotion the thought names in its own words (strength 2, 3
    when named more than once), strongest first; [] when it names none (then the model rates it)."""
    counts = [(name, len(rx.findall(text))) for name, rx in _THOUGHT_LEXICON_RE.items() if name in vocabulary]
    found = sorted(((name, n) for name, n in counts if n), key=lambda pair: -pair[1])
    return [f"{name}:{min(3, 1 + n)} (named in the thought)" for name, n in found[:3]]


# A thought that shows a feeling in words the lexicon does not name: the rating is ambiguous, the model is asked.
THOUGHT_FEELING_CUES = re.compile(
    r"(?<!\w)(i feel|i'm feeling|i am feeling|feel|feeling|felt|feelings|heart|mood|tears?|cry|crying|smile|"
    r"laugh\w*|love|hate|miss|long for|yearn\w*|hope|hoping|afraid|lonely|hurt\w*|ache|excit\w*|bor(ed|ing)|"
    r"tired|upset|angry|proud|grateful|thankful|ashamed|guilt\w*|embarrass\w*|relie(f|ved)|"
    r"чувств\w*|сердц\w*|люблю|ненавиж\w*|скуча\w*|надеюсь|боль\w*|обид\w*|злюсь|счастлив\w*)(?!\w)"
    r"|!|[:;]-?[()]|[\u2639\u263a]|[\U0001F600-\U0001F64F]",
    re.IGNORECASE,
)
# what a novelty band says of the persona's state when its thought says nothing of it (HMP's emotions × novelty,
# read backwards: a new thought is curiosity, a familiar one calm, a repeat boredom)
BAND_EMOTION = {
    "new": ("curiosity", "a new thought"),
    "uncertain": ("calm", "a thought close to an earlier one"),
    "stagnant": ("boredom", "the same thought again"),
}
# the dominant drive (persona/drives.py), when it is felt (≥ its inject_at), adds its emotion
DRIVE_EMOTION = {"boredom": "boredom", "curiosity": "curiosity", "devotion": "tenderness"}


def signal_rating(
    text: str,
    signals: NoveltySignals,
    vocabulary: list[str],
    *,
    drives: dict[str, Any] | None,
    human_spoke: bool,
    previous: list[str] | None,
) -> list[str]:
    """`emotion:strength (reason)` from the tick's cheap signals for a thought that shows no feeling of its own:
    the novelty band (new → curiosity, close → calm, repeat → boredom; strength 3 for a clearly new thought) and the
    dominant drive when it is felt. [] when that is ambiguous and the model should rate it: a human spoke this tick
    (the answer to them is rated by the model), the thought shows a feeling in words the lexicon does not name
    (`THOUGHT_FEELING_CUES`), the last rating was anxious (whether it passed is the model's call), or none of the
    signalled emotions is in the persona's vocabulary."""
    if human_spoke or THOUGHT_FEELING_CUES.search(text) or anxious(emotion_strengths(previous or [])):
        return []
    rated: dict[str, tuple[int, str]] = {}
    band = str(signals.get("band") or "new")
    name, why = BAND_EMOTION.get(band, BAND_EMOTION["new"])
    if band == "stagnant" and name not in vocabulary:
        name, why = "calm", "the same thought again"
    strength = 3 if band == "new" and float(signals.get("similarity") or 0.0) < 0.3 else 2
    if name in vocabulary:
        rated[name] = (strength, why)
    dominant, level = (drives or {}).get("dominant"), float((drives or {}).get("level") or 0.0)
    felt = DRIVE_EMOTION.get(str(dominant)) if level >= float((drives or {}).get("inject_at") or 0.4) else None
    if felt and felt in vocabulary and felt not in rated:
        rated[felt] = (2, f"{dominant} drive at {level:.2f}")
    return [f"{n}:{s} ({r})" for n, (s, r) in sorted(rated.items(), key=lambda item: -item[1][0])]


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


POSITIVE = {
    "joy",
    "curiosity",
    "excitement",
    "enthusiasm",
    "inspiration",
    "delight",
    "interest",
    "hope",
    "surprise",
    "tenderness",
    "wonder",
    "pride",
    "gratitude",
    "love",
    "amusement",
}
FADING = {"boredom", "sadness", "fatigue", "apathy", "tiredness", "emptiness", "melancholy", "indifference"}


def emotional_dynamics(emotions: list[tuple[str, int]], novelty_score: float) -> str:
    def strongest(names: Collection[str]) -> int:
        return max((s for n, s in emotions if n in names), default=0)

    if novelty_score >= 50 and strongest(ANXIOUS) >= 3:
        return "panicked_novelty"
    if novelty_score >= 50 and strongest(POSITIVE) >= 3:
        return "productive_excitement"
    if novelty_score < 30 and (sum(s for _, s in emotions) <= 2 or strongest(FADING) >= 3):
        return "burnout"
    return "steady"
