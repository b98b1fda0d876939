"""Step 6 (HMP §6): novelty of the new output against the last K, from cheap text signals.

Similarity = max over recent outputs of the mean of character-3-gram Jaccard and word-bigram overlap;
novelty_score = 100 × (1 − similarity). At or above the threshold the output is stagnant: flag + reason,
and reflex-lite raises temperature (+0.2, ≤ 1.5), top_p (+0.05, ≤ 0.95) and the penalties; sampling
returns to the persona's base once novelty recovers. An identical output is not stored again
(write_memory keeps only a short record).

Emotional dynamics (HMP §5) come from the emotions × novelty: productive excitement (new ideas, positive
emotions), panicked novelty (new ideas under anxiety), burnout (low novelty, fading emotions), else steady.
Anxiety above 3 on `ANXIETY_TICKS` consecutive outputs also triggers reflex-lite.
"""

from __future__ import annotations

import re
from typing import Any

from langgraph.runtime import Runtime

from memory.text import emotion_strengths
from nodes.context import AnimaContext, services_of
from nodes.state import TickState

WORD = re.compile(r"\w+", re.UNICODE)
POSITIVE = {"joy", "curiosity", "excitement", "enthusiasm", "inspiration", "delight", "interest", "hope", "surprise",
            "tenderness", "wonder", "pride", "gratitude", "love", "amusement"}
ANXIOUS = {"anxiety", "fear", "panic", "worry", "stress", "alarm", "dread", "nervousness"}
FADING = {"boredom", "sadness", "fatigue", "apathy", "tiredness", "emptiness", "melancholy", "indifference"}
ANXIETY_TICKS = 3


def emotional_dynamics(emotions: list[tuple[str, int]], novelty_score: float) -> str:
    strongest = lambda names: max((s for n, s in emotions if n in names), default=0)  # noqa: E731
    if novelty_score >= 50 and strongest(ANXIOUS) >= 3:
        return "panicked_novelty"
    if novelty_score >= 50 and strongest(POSITIVE) >= 3:
        return "productive_excitement"
    if novelty_score < 30 and (sum(s for _, s in emotions) <= 2 or strongest(FADING) >= 3):
        return "burnout"
    return "steady"


def anxious(emotions: list[tuple[str, int]]) -> bool:
    return any(name in ANXIOUS and strength > 3 for name, strength in emotions)


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
    na, nb = normalise(a), normalise(b)
    if not na or not nb:
        return 0.0
    if na == nb:
        return 1.0
    return (_jaccard(_shingles(na), _shingles(nb)) + _jaccard(_bigrams(na), _bigrams(nb))) / 2


def reflex_lite(sampling: dict[str, float]) -> dict[str, float]:
    return {**sampling,
            "temperature": round(min(1.5, sampling.get("temperature", 0.8) + 0.2), 3),
            "top_p": round(min(0.95, sampling.get("top_p", 0.9) + 0.05), 3),
            "presence_penalty": round(min(1.0, sampling.get("presence_penalty", 0.0) + 0.2), 3),
            "frequency_penalty": round(min(1.0, sampling.get("frequency_penalty", 0.0) + 0.2), 3)}


def check_stagnation(state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None) -> dict:
    svc = services_of(runtime)
    response = state.get("response") or ""
    if state.get("degraded") or not response.strip():
        return {"novelty": {"skipped": "no output"}}
    body = state.get("thought") or response
    with svc.db.unit() as repos:
        recent = repos.messages.recent(state["thread_id"], svc.settings.responses,
                                       kinds=("response", "continuation"))
        scored = [(similarity(body, m.content), m) for m in recent]
        previous = [emotion_strengths(m.emotions or []) for m in recent[-(ANXIETY_TICKS - 1):]]
    best, match = max(scored, key=lambda pair: pair[0], default=(0.0, None))
    threshold = svc.settings.stagnation_threshold
    flag = best >= threshold
    repeated = best >= 0.999
    sampling = dict(state.get("sampling") or {})
    base = dict(state.get("base_sampling") or sampling)
    actions: list[str] = []
    emotions = emotion_strengths(state.get("emotions") or [])
    anxiety_streak = len(previous) == ANXIETY_TICKS - 1 and all(anxious(e) for e in previous + [emotions])
    if flag or anxiety_streak:
        sampling = reflex_lite(sampling)
        actions.append("reflex_lite" if flag else "reflex_lite:anxiety")
    elif sampling != base:
        sampling = base
        actions.append("sampling_restored")
    reason = None
    if flag and match is not None:
        reason = ("identical to" if repeated else "repeats") + f" tick {match.tick} (similarity {best:.2f})"
    return {
        "novelty": {"novelty_score": round(100 * (1 - best), 1), "max_similarity": round(best, 3),
                    "compared_with": len(recent), "similar_to_tick": match.tick if match is not None else None,
                    "stagnation_flag": flag, "stagnation_reason": reason, "repeated": repeated,
                    "triggered_actions": actions,
                    "dynamics": emotional_dynamics(emotions, 100 * (1 - best)), "anxiety_streak": anxiety_streak},
        "sampling": sampling,
    }
