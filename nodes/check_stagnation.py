"""Step 6 (HMP §6, "Anti-Stagnation Reflex"): is the new output new, and what to do if it is not.

The signals come from nodes/novelty.py (n-grams, embeddings, and in the uncertain band the LLM comparison
the evaluation step asked for). A stagnant output gets a flag and a reason; an identical one is not stored
again (write_memory keeps a short record). Reflex-lite: temperature +0.2 (≤ 1.5), top_p +0.05 (≤ 0.95),
presence/frequency penalties +0.2, and once those are at their limits the HMP rephrased request. If the
next output is stagnant too, nodes/escalation.py diagnoses and applies the break-out mechanisms. When
novelty recovers, sampling and every mechanism are restored.

Emotional dynamics (HMP §5) come from the emotions × novelty: productive excitement (new ideas, positive
emotions), panicked novelty (new ideas under anxiety), burnout (low novelty, fading emotions), else steady.
Anxiety above 3 on `ANXIETY_TICKS` consecutive outputs also triggers reflex-lite.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from llm import AllLLMsUnavailable, Sampling
from memory.text import emotion_strengths
from nodes.context import AnimaContext, services_of
from nodes.escalation import Escalation
from nodes.evaluate_emotion import ANXIOUS, anxious
from nodes.novelty import RECENT_KINDS, evaluate, json_object_lenient, measure, parse_comparison, reflection_of
from nodes.prompts import CHAT_INSTRUCTION, REPHRASE_PROMPT, REPHRASE_SCHEMA
from nodes.state import TickState

POSITIVE = {"joy", "curiosity", "excitement", "enthusiasm", "inspiration", "delight", "interest", "hope", "surprise",
            "tenderness", "wonder", "pride", "gratitude", "love", "amusement"}
FADING = {"boredom", "sadness", "fatigue", "apathy", "tiredness", "emptiness", "melancholy", "indifference"}
ANXIETY_TICKS = 3
MAX_TEMPERATURE, MAX_TOP_P = 1.5, 0.95


def emotional_dynamics(emotions: list[tuple[str, int]], novelty_score: float) -> str:
    strongest = lambda names: max((s for n, s in emotions if n in names), default=0)  # noqa: E731
    if novelty_score >= 50 and strongest(ANXIOUS) >= 3:
        return "panicked_novelty"
    if novelty_score >= 50 and strongest(POSITIVE) >= 3:
        return "productive_excitement"
    if novelty_score < 30 and (sum(s for _, s in emotions) <= 2 or strongest(FADING) >= 3):
        return "burnout"
    return "steady"


def reflex_lite(sampling: dict[str, float]) -> dict[str, float]:
    return {**sampling,
            "temperature": round(min(MAX_TEMPERATURE, sampling.get("temperature", 0.8) + 0.2), 3),
            "top_p": round(min(MAX_TOP_P, sampling.get("top_p", 0.9) + 0.05), 3),
            "presence_penalty": round(min(1.0, sampling.get("presence_penalty", 0.0) + 0.2), 3),
            "frequency_penalty": round(min(1.0, sampling.get("frequency_penalty", 0.0) + 0.2), 3)}


def rephrase(svc, state: TickState, instruction: str) -> str | None:
    """HMP reflex-lite's rephrased request, once sampling cannot be raised further; None if no LLM answers."""
    try:
        gen = svc.llms.generate("rephrase", prompt=REPHRASE_PROMPT.format(instruction=instruction),
                                sampling=Sampling(temperature=0.9, top_p=0.95, max_tokens=120),
                                json_schema=REPHRASE_SCHEMA, prefer=(state.get("llm") or {}).get("llm_id"),
                                tags={"thread_id": state["thread_id"], "tick": state["tick"]})
    except AllLLMsUnavailable:
        return None
    text = " ".join(str(json_object_lenient(gen.text).get("request") or "").split())
    return text[:400] if len(text) >= 12 else None


def decide(signals: dict[str, Any], settings) -> tuple[bool, float, str]:
    """(stagnant, similarity reported, method). The cheap bands decide alone; in the uncertain band the cheap
    similarity flags from `stagnation_soft_threshold`, and the LLM comparison, when there is one, may clear that
    flag (it found new ideas and novelty ≥ 50) but never raise one: a false alarm perturbs genuinely new
    thinking, and a small model's comparison is noisy (bench/reflexes.py: the 270M model's comparisons alone
    raised 3 false alarms on 36 sequences). The reported similarity averages both."""
    value, comparison = float(signals.get("similarity") or 0.0), signals.get("comparison")
    if signals.get("band") == "stagnant":
        return True, value, "cheap"
    if signals.get("band") != "uncertain":
        return False, value, "cheap"
    flag = value >= settings.stagnation_soft_threshold
    if not comparison:
        return flag, value, "cheap"
    llm_similarity = 1 - comparison["novelty_score"] / 100
    if comparison["assessment"] == "identical":
        llm_similarity = max(llm_similarity, 0.95)
    cleared = (comparison["assessment"] != "identical" and comparison["novelty_score"] >= 50
               and bool(comparison["new_ideas"]))
    return flag and not cleared, (value + llm_similarity) / 2, "llm"


def _reason(signals: dict[str, Any], method: str, repeated: bool) -> str:
    tick = signals.get("similar_to_tick")
    if repeated:
        return f"identical to tick {tick}"
    if method == "llm":
        return f"the LLM comparison found little new against tick {tick} (novelty {signals['comparison']['novelty_score']:g})"
    if signals["ngram"] >= signals["similarity"]:
        return f"repeats tick {tick} (word overlap {signals['ngram']:.2f})"
    return f"says again what tick {tick} said (meaning similarity {signals.get('semantic') or 0:.2f})"


def check_stagnation(state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None) -> dict:
    svc = services_of(runtime)
    settings = svc.settings
    response = state.get("response") or ""
    if state.get("degraded") or not response.strip():
        return {"novelty": {"skipped": "no output"}}
    body = state.get("thought") or response
    signals = dict(state.get("novelty_signals") or {})
    with svc.db.unit() as repos:
        recent = repos.messages.recent(state["thread_id"], settings.responses, kinds=RECENT_KINDS)
        if not signals:  # a playbook without evaluate_emotion
            signals = measure(body, recent, svc.memory, stagnant_at=settings.stagnation_threshold,
                              novel_below=settings.novel_below)
        previous_text = next((m.content for m in recent if m.id == signals.get("similar_to_id")), None)
        previous = [emotion_strengths(m.emotions or []) for m in recent[-(ANXIETY_TICKS - 1):]]
    if (signals["band"] == "uncertain" and "comparison" not in signals and settings.compare_with_llm
            and previous_text is not None):
        try:
            _, answer = evaluate(svc.llms, body, vocabulary=None, previous=previous_text,
                                 prefer=(state.get("llm") or {}).get("llm_id"),
                                 tags={"thread_id": state["thread_id"], "tick": state["tick"]})
            signals["comparison"] = parse_comparison(answer.get("comparison"))
        except AllLLMsUnavailable:
            signals["comparison"] = None
    flag, value, method = decide(signals, settings)
    novelty_score = round(100 * (1 - value), 1)
    comparison = signals.get("comparison")
    repeated = flag and (signals["ngram"] >= 0.95 or bool(comparison and comparison["assessment"] == "identical"
                                                          and signals["ngram"] >= settings.stagnation_soft_threshold))
    emotions = emotion_strengths(state.get("emotions") or [])
    anxiety_streak = len(previous) == ANXIETY_TICKS - 1 and all(anxious(e) for e in previous + [emotions])
    sampling = dict(state.get("sampling") or {})
    base = dict(state.get("base_sampling") or sampling)
    episode = dict(state.get("stagnation") or {})
    actions: list[str] = []
    if flag:
        episode["streak"] = int(episode.get("streak", 0)) + 1
        capped = sampling.get("temperature", 0.8) >= MAX_TEMPERATURE and sampling.get("top_p", 0.9) >= MAX_TOP_P
        sampling = reflex_lite(sampling)
        actions.append("reflex_lite")
        if capped and (instruction := rephrase(svc, state, episode.get("rephrased") or CHAT_INSTRUCTION)):
            episode["rephrased"] = instruction
            actions.append("rephrase")
        if episode["streak"] >= 2:  # reflex-lite did not help: diagnose and escalate, one mechanism more per tick
            with svc.db.unit() as repos:
                episode = Escalation(svc, repos, state, body, runtime.stream_writer).run(episode, episode["streak"] - 1)
            actions += [f"escalate:{m}" for m in episode["mechanisms"]]
    elif anxiety_streak:
        sampling = reflex_lite(sampling)
        actions.append("reflex_lite:anxiety")
    else:
        if sampling != base:
            sampling = base
            actions.append("sampling_restored")
        if episode:
            actions.append("stagnation_ended")
            episode = {}
    return {
        "novelty": {"novelty_score": novelty_score, "max_similarity": round(value, 3), "method": method,
                    "ngram_similarity": signals["ngram"], "semantic_similarity": signals.get("semantic"),
                    "llm_novelty": comparison["novelty_score"] if comparison else None,
                    "comparison": comparison, "reflection": reflection_of(comparison),
                    "tags": (comparison or {}).get("tags") or [],
                    "compared_with": signals.get("compared_with", 0), "similar_to_tick": signals.get("similar_to_tick"),
                    "stagnation_flag": flag, "stagnation_reason": _reason(signals, method, repeated) if flag else None,
                    "repeated": repeated, "triggered_actions": actions, "streak": episode.get("streak", 0),
                    "diagnosis": episode.get("diagnosis"), "mechanisms": episode.get("mechanisms") or [],
                    "dynamics": emotional_dynamics(emotions, novelty_score), "anxiety_streak": anxiety_streak},
        "sampling": sampling,
        "stagnation": episode,
    }
