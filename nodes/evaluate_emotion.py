"""Step 5 (HMP §5–6): the reflexes' evaluation — emotions `emotion:strength (reason)` and the cheap novelty signals.

The LLM that produced the output rates it. That costs nothing when the output ends with its own
`Emotions:` line; a repeat inherits its original's rating, and with `reflexes.emotion_every` = N a similar
output inherits the last rating up to N − 1 times in a row. Otherwise one structured call asks for the
emotions and — only when n-grams and embeddings leave the novelty uncertain — the HMP §6 comparison too.
On llama.cpp the answer is grammar-constrained JSON (even the 270M model returns valid JSON); anything
else is parsed leniently. Emotions not in the vocabulary (config `emotions`) extend it (logged).
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from langgraph.runtime import Runtime

from llm import AllLLMsUnavailable
from memory.text import emotion_strengths
from nodes.context import AnimaContext, services_of
from nodes.novelty import RECENT_KINDS, evaluate, measure, parse_comparison
from nodes.state import TickState

log = logging.getLogger(__name__)
LOOSE = re.compile(r"([^\W\d_][\w-]{1,15})\s*[:=]\s*\"?([1-5])\b(?:\s*\(([^)]{0,80})\))?", re.UNICODE)
ANXIOUS = {"anxiety", "fear", "panic", "worry", "stress", "alarm", "dread", "nervousness"}


def anxious(emotions: list[tuple[str, int]]) -> bool:
    return any(name in ANXIOUS and strength > 3 for name, strength in emotions)


def parse_emotions(text: str) -> list[tuple[str, int, str]]:
    """(emotion, strength 1..5, reason) from JSON or from loose `joy:4 (why)` text."""
    found: list[tuple[str, int, str]] = []
    try:
        try:
            data = json.loads(text)
        except json.JSONDecodeError:  # cut off at max_tokens: keep the complete items
            from json_repair import repair_json

            data = repair_json(text or "", return_objects=True)
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
    except (json.JSONDecodeError, AttributeError):
        pass
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


def _carried(recent: list[Any], signals: dict[str, Any], state: TickState, every: int) -> Any | None:
    """The earlier output whose rating this one may inherit without asking the LLM, or None.

    A repeat inherits its original's. Otherwise, with `every` > 1, the last output's rating carries over
    when no human note arrived, it was not anxious, and fewer than `every` − 1 outputs in a row inherited."""
    by_id = {m.id: m for m in recent}
    if signals.get("band") == "stagnant" and (match := by_id.get(signals.get("similar_to_id"))) and match.emotions:
        return match
    if every <= 1 or not recent or state.get("incoming_note_ids") or state.get("human_turns"):
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


def evaluate_emotion(state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None) -> dict:
    """The reflexes' one evaluation call: emotions (unless the model rated itself or a rating carries over)
    and, when the cheap novelty signals are uncertain, the HMP §6 comparison, in one JSON answer."""
    svc = services_of(runtime)
    settings = svc.settings
    response = (state.get("response") or "").strip()
    if state.get("degraded") or not response:
        return {"emotions": [], "emotion_eval": {}, "novelty_signals": {}}
    body = state.get("thought") or response
    with svc.db.unit() as repos:
        recent = repos.messages.recent(state["thread_id"], settings.responses, kinds=RECENT_KINDS)
        vocabulary = list(repos.config.get("emotions") or settings.emotions)
        signals = measure(body, recent, svc.memory, stagnant_at=settings.stagnation_threshold,
                          novel_below=settings.novel_below)
        previous = next((m.content for m in recent if m.id == signals["similar_to_id"]), None)
    emotions: list[str] = []
    evaluation: dict[str, Any] = {}
    want_emotions = settings.emotion_reflex
    if want_emotions and state.get("self_emotions"):
        emotions, want_emotions = list(state["self_emotions"]), False
        evaluation = {"source": "self", "llm_id": (state.get("llm") or {}).get("llm_id"), "llm_mismatch": False}
    elif want_emotions and (source := _carried(recent, signals, state, settings.emotion_every)) is not None:
        emotions, want_emotions = list(source.emotions), False
        evaluation = {"source": "carried", "carried_from": source.tick, "llm_id": source.llm_id, "llm_mismatch": False}
    want_comparison = signals["band"] == "uncertain" and settings.compare_with_llm and previous is not None
    if want_emotions or want_comparison:
        author = (state.get("llm") or {}).get("llm_id")
        try:
            gen, answer = evaluate(svc.llms, response, vocabulary=vocabulary if want_emotions else None,
                                   previous=previous if want_comparison else None, prefer=author,
                                   tags={"thread_id": state["thread_id"], "tick": state["tick"]})
        except AllLLMsUnavailable as exc:
            log.warning("evaluation call skipped: %s", exc)
        else:
            if want_comparison:
                signals["comparison"] = parse_comparison(answer.get("comparison"))
            if want_emotions:
                rated = parse_emotions(json.dumps({"emotions": answer["emotions"]}) if "emotions" in answer else gen.text)
                emotions = [f"{n}:{s} ({r})" if r else f"{n}:{s}" for n, s, r in rated]
                # HMP: the LLM that wrote the output rates it; a fallback's rating is marked
                evaluation = {"source": "llm", "llm_id": gen.llm_id, "llm_mismatch": bool(author) and gen.llm_id != author}
    if evaluation.get("source") in ("llm", "self"):
        _extend_vocabulary(svc, state, vocabulary, emotions)
    return {"emotions": emotions, "emotion_eval": evaluation, "novelty_signals": signals}


def _extend_vocabulary(svc, state: TickState, vocabulary: list[str], emotions: list[str]) -> None:
    new = [name for name, _ in emotion_strengths(emotions) if name not in vocabulary]
    if new:
        with svc.db.unit() as repos:
            repos.config.set("emotions", vocabulary + new)
            repos.processes.add("emotions.vocabulary", f"new emotion(s) added to my vocabulary: {', '.join(new)}",
                                status="close", thread_id=state["thread_id"])
        log.info("emotion vocabulary extended with %s", new)
