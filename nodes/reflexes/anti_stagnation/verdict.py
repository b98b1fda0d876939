"""The anti-stagnation verdict (HMP): stagnant or not from the signals, why, and reflex-lite — sampling raised
(temperature +0.2 ≤ 1.5, top_p +0.05 ≤ 0.95, penalties +0.2), then the HMP rephrased request at the limits."""

from __future__ import annotations

from typing import Any

import i18n
from llm import AllLLMsUnavailable, LLMRegistry, Sampling
from llm.json_output import json_object
from nodes.reflexes.prompts import REPHRASE_PROMPT, REPHRASE_SCHEMA
from nodes.state import NoveltySignals, SamplingParams
from persona.settings import ReflexSettings

ANXIETY_TICKS = 3  # anxiety > 3 on this many outputs in a row triggers reflex-lite
MAX_TEMPERATURE, MAX_TOP_P = 1.5, 0.95
REPHRASE_EVERY = 4  # a stagnation episode asks the model to rephrase its request at most once per this many ticks


def reflex_lite(sampling: SamplingParams) -> SamplingParams:
    return {
        **sampling,
        "temperature": round(min(MAX_TEMPERATURE, sampling.get("temperature", 0.8) + 0.2), 3),
        "top_p": round(min(MAX_TOP_P, sampling.get("top_p", 0.9) + 0.05), 3),
        "presence_penalty": round(min(1.0, sampling.get("presence_penalty", 0.0) + 0.2), 3),
        "frequency_penalty": round(min(1.0, sampling.get("frequency_penalty", 0.0) + 0.2), 3),
    }


def rephrase(
    llms: LLMRegistry, instruction: str, *, prefer: str | None, tags: dict[str, Any], language: str = "en"
) -> str | None:
    """HMP reflex-lite's rephrased request, once sampling cannot be raised further; None if no LLM answers."""
    try:
        gen = llms.generate(
            "rephrase",
            prompt=i18n.text(REPHRASE_PROMPT, language).format(instruction=instruction),
            sampling=Sampling(temperature=0.9, top_p=0.95, max_tokens=120),
            json_schema=REPHRASE_SCHEMA,
            prefer=prefer,
            tags=tags,
        )
    except AllLLMsUnavailable:
        return None
    text = " ".join(str(json_object(gen.text).get("request") or "").split())
    return text[:400] if len(text) >= 12 else None


def comparison_decides(signals: NoveltySignals, settings: ReflexSettings) -> bool:
    """Whether HMP's LLM comparison is worth a call: only in the uncertain band from `stagnation_soft_threshold`
    up, where the cheap similarity flags the output and the comparison may clear the flag (`decide`). Below it the
    output is not flagged whatever the comparison says, so n-grams and embeddings decide alone."""
    return (
        settings.compare_with_llm
        and signals.get("band") == "uncertain"
        and float(signals.get("similarity") or 0.0) >= settings.stagnation_soft_threshold
    )


def graph_sign_matters(signals: NoveltySignals, settings: ReflexSettings) -> bool:
    """Whether an idle concept graph could change the verdict: a thought in the uncertain band, within
    `graph_idle_margin` below `stagnation_soft_threshold` (only then is the graph's growth read)."""
    value = float(signals.get("similarity") or 0.0)
    soft = settings.stagnation_soft_threshold
    return (
        bool(settings.graph_idle_ticks)
        and signals.get("band") == "uncertain"
        and soft - settings.graph_idle_margin <= value < soft
    )


def decide(signals: NoveltySignals, settings: ReflexSettings, graph_idle: bool = False) -> tuple[bool, float, str]:
    """(stagnant, similarity reported, method). The cheap bands decide alone; in the uncertain band the cheap
    similarity flags from `stagnation_soft_threshold` — from `graph_idle_margin` lower when the concept graph has
    not grown (HMP's sign "no new nodes or links in the concept graph": `graph_idle`) —, and the LLM comparison,
    when there is one, may clear that flag (it found new ideas and novelty ≥ 50) but never raise one: a false alarm
    perturbs genuinely new thinking, and a small model's comparison is noisy (bench/reflexes.py: the 270M model's
    comparisons alone raised 3 false alarms on 36 sequences). The reported similarity averages both."""
    value, comparison = float(signals.get("similarity") or 0.0), signals.get("comparison")
    if signals.get("band") == "stagnant":
        return True, value, "cheap"
    if signals.get("band") != "uncertain":
        return False, value, "cheap"
    flag = value >= settings.stagnation_soft_threshold
    if not flag and graph_idle and value >= settings.stagnation_soft_threshold - settings.graph_idle_margin:
        return True, value, "graph"
    if not comparison:
        return flag, value, "cheap"
    llm_similarity = 1 - comparison["novelty_score"] / 100
    if comparison["assessment"] == "identical":
        llm_similarity = max(llm_similarity, 0.95)
    cleared = (
        comparison["assessment"] != "identical" and comparison["novelty_score"] >= 50 and bool(comparison["new_ideas"])
    )
    return flag and not cleared, (value + llm_similarity) / 2, "llm"


def stagnation_reason(signals: NoveltySignals, method: str, repeated: bool, graph_idle_ticks: int = 0) -> str:
    tick = signals.get("similar_to_tick")
    if repeated:
        return f"identical to tick {tick}"
    if method == "graph":
        return (
            f"close to tick {tick} (similarity {signals.get('similarity') or 0:.2f}) while my concept graph has "
            f"had no new concept or link in {graph_idle_ticks} ticks"
        )
    comparison = signals.get("comparison")
    if method == "llm" and comparison:
        return f"the LLM comparison found little new against tick {tick} (novelty {comparison['novelty_score']:g})"
    if signals["ngram"] >= signals["similarity"]:
        return f"repeats tick {tick} (word overlap {signals['ngram']:.2f})"
    return f"says again what tick {tick} said (meaning similarity {signals.get('semantic') or 0:.2f})"
