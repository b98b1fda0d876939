"""Step 8 (HMP's "Anti-Stagnation Reflex"): is the new output new, and what to do if it is not.

The signals come from nodes/reflexes/anti_stagnation/novelty.py (n-grams, embeddings, and in the uncertain band
the LLM comparison the evaluation step asked for); the verdict and reflex-lite from verdict.py. A stagnant output
gets a flag and a reason; an identical one is not stored again (write_memory keeps a short record). If the next
output is stagnant too, escalation.py diagnoses and applies the break-out mechanisms. When novelty recovers,
sampling and every mechanism are restored. A degenerate output (persona/prose.py: a short piece over and over,
mostly not letters) is flagged whatever its novelty, and kept only as a short record. Anxiety above 3 on `ANXIETY_TICKS`
consecutive outputs also
triggers reflex-lite; the emotional dynamics (nodes/reflexes/emotion.py) are reported with the novelty.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

import i18n
from llm import AllLLMsUnavailable
from memory.text import emotion_strengths
from nodes.attention import side_call, waiting
from nodes.context import AnimaContext, Services, services_of
from nodes.reflexes.anti_stagnation.escalation import Escalation
from nodes.reflexes.anti_stagnation.novelty import measure, recent_outputs
from nodes.reflexes.anti_stagnation.verdict import (
    ANXIETY_TICKS,
    MAX_TEMPERATURE,
    MAX_TOP_P,
    REPHRASE_EVERY,
    comparison_decides,
    decide,
    graph_sign_matters,
    reflex_lite,
    rephrase,
    stagnation_reason,
)
from nodes.reflexes.emotion import anxious, emotional_dynamics
from nodes.reflexes.evaluation import evaluate, parse_comparison, reflection_of
from nodes.reflexes.prompts import TASK_RETURN_LINE
from nodes.state import StagnationEpisode, StagnationUpdate, TickState
from nodes.steps.prompts import CHAT_INSTRUCTION
from persona.prose import degenerate


def ended(services: Services, state: TickState, episode: StagnationEpisode) -> None:
    """Novelty came back: the mechanisms added last count as having helped (before/after: the escalation prefers
    them next time), and a task set aside by the task switch is due again."""
    switch = episode.get("task_switch")
    task_return = (
        i18n.text(TASK_RETURN_LINE, services.settings.prompt_language).format(
            id=switch["from"], title=switch["from_title"]
        )
        if switch
        else None
    )
    with services.managers.unit() as house:
        house.strategies.stagnation_ended(
            episode.get("added") or [], task_return=task_return, thread_id=state.thread_id
        )


def _flagged(signals: Any, settings: Any, body: str, state: TickState) -> bool:
    """Whether the output may be flagged (the reflex may then ask a model or break out): asked only then whether a
    human waits."""
    return bool(decide(signals, settings)[0] or degenerate(body, acted=bool(state.commands)) or state.stagnation)


def _graph_idle(services: Services, state: TickState, ticks: int) -> bool:
    """HMP's stagnation sign "no new nodes or links in the concept graph": the persona has a graph, and no concept or
    link was added since this thread's tick `ticks` ago (a thread younger than that: no sign)."""
    with services.managers.reading() as house:
        growth = house.concepts.growth(state.thread_id, state.tick - ticks)
    return growth is not None and growth[0] > 0 and growth[1] == 0 and growth[2] == 0


def check_stagnation(
    state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None
) -> StagnationUpdate:
    services = services_of(runtime)
    settings = services.settings.reflexes
    response = state.response
    if not response.strip():
        return {"novelty": {"skipped": "no output"}}
    body = state.thought or response
    signals = state.novelty_signals.copy()
    tags = {"thread_id": state.thread_id, "tick": state.tick}
    with services.managers.reading() as house:  # reads only: nothing to commit
        recent = recent_outputs(services, house, state)
        if not signals:  # a playbook without evaluate_emotion
            signals = measure(
                body,
                recent,
                services.memory,
                stagnant_at=settings.stagnation_threshold,
                novel_below=settings.novel_below,
            )
        previous_text = next((m.content for m in recent if m.id == signals.get("similar_to_id")), None)
        previous = [emotion_strengths(m.emotions or []) for m in recent[-(ANXIETY_TICKS - 1) :]]
    # while a human's note waits (other than this tick's), the reflex asks no model and starts no break-out (a pause,
    # a question, a rehearsal): the note is answered first, and the next thought is judged again
    at = (state.thread_id, state.tick)
    wants_comparison = (
        "comparison" not in signals and comparison_decides(signals, settings) and previous_text is not None
    )
    held = (wants_comparison or _flagged(signals, settings, body, state)) and waiting(
        services, state.incoming_note_ids, at
    )
    if wants_comparison and not held:

        def compare() -> Any:
            try:
                _, answer = evaluate(
                    services.llms,
                    body,
                    vocabulary=None,
                    previous=previous_text,
                    prefer=state.llm.get("llm_id"),
                    tags=tags,
                    language=services.settings.prompt_language,
                )
                return parse_comparison(answer.get("comparison"))
            except AllLLMsUnavailable:
                return None

        signals["comparison"] = side_call(
            services, state.incoming_note_ids, compare, None, "the novelty comparison", at
        )
    graph_idle = graph_sign_matters(signals, settings) and _graph_idle(services, state, settings.graph_idle_ticks)
    flag, value, method = decide(signals, settings, graph_idle)
    broken = degenerate(body, acted=bool(state.commands))  # `":":":"`, markup soup: no thought, however new
    if broken:
        flag, method = True, "prose_gate"
    novelty_score = round(100 * (1 - value), 1)
    comparison = signals.get("comparison")
    repeated = flag and (
        signals["ngram"] >= 0.95
        or bool(
            comparison
            and comparison["assessment"] == "identical"
            and signals["ngram"] >= settings.stagnation_soft_threshold
        )
    )
    emotions = emotion_strengths(state.emotions)
    anxiety_streak = len(previous) == ANXIETY_TICKS - 1 and all(anxious(e) for e in previous + [emotions])
    sampling = state.sampling.copy()
    base = (state.base_sampling or sampling).copy()
    episode = state.stagnation.copy()
    actions: list[str] = []
    if flag:
        episode["streak"] = int(episode.get("streak", 0)) + 1
        capped = sampling.get("temperature", 0.8) >= MAX_TEMPERATURE and sampling.get("top_p", 0.9) >= MAX_TOP_P
        # one rephrase asked per REPHRASE_EVERY stagnant ticks, answered or not: the escalation's mechanisms cost
        # no model call, a rephrase does
        due = episode["streak"] - int(episode.get("rephrase_asked_at", -REPHRASE_EVERY)) >= REPHRASE_EVERY
        sampling = reflex_lite(sampling)
        actions.append("reflex_lite")
        if capped and due and not held:
            episode["rephrase_asked_at"] = episode["streak"]
            language = services.settings.prompt_language
            if instruction := side_call(
                services,
                state.incoming_note_ids,
                lambda: rephrase(
                    services.llms,
                    episode.get("rephrased") or i18n.text(CHAT_INSTRUCTION, language),
                    prefer=state.llm.get("llm_id"),
                    tags=tags,
                    language=language,
                ),
                None,
                "the rephrase",
                at,
            ):
                episode["rephrased"] = instruction
                actions.append("rephrase")
        if held:
            actions.append("escalation_held:a_human_waits")
        elif episode["streak"] >= 2:  # reflex-lite did not help: diagnose and escalate, one mechanism more per tick
            with services.managers.unit() as house:
                episode = Escalation(services, house, state, body, runtime.stream_writer).run(
                    episode, episode["streak"] - 1
                )
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
            ended(services, state, episode)
            episode = StagnationEpisode()
    return {
        "novelty": {
            "novelty_score": novelty_score,
            "max_similarity": round(value, 3),
            "method": method,
            "ngram_similarity": signals["ngram"],
            "semantic_similarity": signals.get("semantic"),
            "llm_novelty": comparison["novelty_score"] if comparison else None,
            "comparison": comparison,
            "reflection": reflection_of(comparison),
            "tags": (comparison.get("tags") if comparison else None) or [],
            "compared_with": signals.get("compared_with", 0),
            "similar_to_tick": signals.get("similar_to_tick"),
            "stagnation_flag": flag,
            "degenerate": broken,
            "stagnation_reason": (
                f"not a thought in words: {broken}"
                if broken
                else stagnation_reason(signals, method, repeated, settings.graph_idle_ticks)
                if flag
                else None
            ),
            "graph_idle": graph_idle,
            "repeated": repeated,
            "triggered_actions": actions,
            "streak": episode.get("streak", 0),
            "diagnosis": episode.get("diagnosis"),
            "mechanisms": episode.get("mechanisms") or [],
            "dynamics": emotional_dynamics(emotions, novelty_score),
            "anxiety_streak": anxiety_streak,
        },
        "sampling": sampling,
        "stagnation": episode,
    }
