"""Step 5 (HMP §5): the LLM that produced the output rates its emotions, `emotion:strength (reason)`.

On llama.cpp the answer is grammar-constrained JSON (even the 270M model returns valid JSON); any
other output is parsed leniently. Emotions not in the vocabulary (config `emotions`) extend it.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from langgraph.runtime import Runtime

from llm import AllLLMsUnavailable, Sampling
from nodes.context import AnimaContext, services_of
from nodes.prompts import EMOTION_PROMPT, EMOTION_SCHEMA
from nodes.state import TickState

log = logging.getLogger(__name__)
LOOSE = re.compile(r"([^\W\d_][\w-]{1,15})\s*[:=]\s*\"?([1-5])\b(?:\s*\(([^)]{0,80})\))?", re.UNICODE)
MAX_RESPONSE_CHARS = 1500


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


def evaluate_emotion(state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None) -> dict:
    svc = services_of(runtime)
    response = (state.get("response") or "").strip()
    if state.get("degraded") or not response or not svc.settings.emotion_reflex:
        return {"emotions": [], "emotion_eval": {}}
    with svc.db.unit() as repos:
        vocabulary = list(repos.config.get("emotions") or svc.settings.emotions)
    prompt = EMOTION_PROMPT.format(vocabulary=json.dumps(vocabulary, ensure_ascii=False),
                                   response=response[-MAX_RESPONSE_CHARS:])
    try:
        gen = svc.llms.generate("emotion", prompt=prompt, sampling=Sampling(temperature=0.2, top_p=0.9, max_tokens=128),
                                json_schema=EMOTION_SCHEMA, prefer=(state.get("llm") or {}).get("llm_id"),
                                tags={"thread_id": state["thread_id"], "tick": state["tick"]})
    except AllLLMsUnavailable as exc:
        log.warning("emotion reflex skipped: %s", exc)
        return {"emotions": [], "emotion_eval": {}}
    emotions = parse_emotions(gen.text)
    new = [name for name, _, _ in emotions if name not in vocabulary]
    if new:
        with svc.db.unit() as repos:
            repos.config.set("emotions", vocabulary + new)
            repos.processes.add("emotions.vocabulary", f"new emotion(s) added to my vocabulary: {', '.join(new)}",
                                status="close", thread_id=state["thread_id"])
        log.info("emotion vocabulary extended with %s", new)
    author = (state.get("llm") or {}).get("llm_id")
    return {"emotions": [f"{n}:{s} ({r})" if r else f"{n}:{s}" for n, s, r in emotions],
            # HMP: the LLM that wrote the output rates it; a fallback's rating is marked
            "emotion_eval": {"llm_id": gen.llm_id, "llm_mismatch": bool(author) and gen.llm_id != author}}
