"""Step 7 (HMP): the reflexes' evaluation — emotions `emotion:strength (reason)` and the cheap novelty signals.

The LLM that produced the output rates it. That costs nothing when the output ends with its own
`Emotions:` line; a repeat inherits its original's rating, and (without ratings from signals) with
`reflexes.emotion_every` = N a similar output inherits the last rating up to N − 1 times in a row; a thought that names
emotions of the vocabulary in its
own words (`lexicon_rating`) is rated from them; one that shows no feeling at all is rated from the tick's signals
(`signal_rating`: the novelty band and the felt drive; `reflexes.emotion_from_signals`). Only what is left —
a human spoke, a feeling the lexicon cannot name, an anxious last rating — costs one structured call for the
emotions, and HMP's novelty comparison joins it only when its answer could change the verdict (the cheap similarity
would flag the output, and the comparison may clear that flag: `comparison_decides`).
On llama.cpp the answer is grammar-constrained JSON (even the 270M model returns valid JSON); anything
else is parsed leniently. Emotions not in the vocabulary (config `emotions`) extend it (logged).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from langgraph.runtime import Runtime

from llm import AllLLMsUnavailable
from memory.text import emotion_strengths
from nodes.attention import side_call
from nodes.context import AnimaContext, Services, services_of
from nodes.reflexes.anti_stagnation.novelty import measure, recent_outputs
from nodes.reflexes.anti_stagnation.verdict import comparison_decides
from nodes.reflexes.emotion import carried_rating, lexicon_rating, parse_emotions, signal_rating
from nodes.reflexes.evaluation import evaluate, parse_comparison
from nodes.state import EmotionEval, EmotionUpdate, TickState
from persona.prose import degenerate

log = logging.getLogger(__name__)


def evaluate_emotion(
    state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None
) -> EmotionUpdate:
    """The reflexes' one evaluation call: emotions (unless the model rated itself or a rating carries over)
    and, when the cheap novelty signals are uncertain, HMP's novelty comparison, in one JSON answer."""
    services = services_of(runtime)
    reflexes = services.settings.reflexes
    response = state.response.strip()
    if not response:
        return {"emotions": [], "emotion_eval": {}, "novelty_signals": {}}
    body = state.thought or response
    if degenerate(body, acted=bool(state.commands)):  # no thought in words (check_stagnation flags it): no call
        return {"emotions": [], "emotion_eval": {}, "novelty_signals": {}}
    with services.managers.reading() as house:  # reads only: nothing to commit
        recent = recent_outputs(services, house, state)
        vocabulary = house.inner_life.emotion_vocabulary()
    signals = measure(
        body,
        recent,
        services.memory,
        stagnant_at=reflexes.stagnation_threshold,
        novel_below=reflexes.novel_below,
        documents=services.own_turn(body),
    )
    previous = next((m.content for m in recent if m.id == signals["similar_to_id"]), None)
    emotions: list[str] = []
    evaluation: EmotionEval = {}
    want_emotions = reflexes.emotion
    human_spoke = bool(state.incoming_note_ids or state.human_turns)
    # with ratings from signals, only a repeat inherits (its original's rating): what signals leave ambiguous is a
    # feeling they cannot read, and an older rating cannot read it either
    every = 1 if reflexes.emotion_from_signals else reflexes.emotion_every
    if want_emotions and state.self_emotions:
        emotions, want_emotions = list(state.self_emotions), False
        evaluation = {"source": "self", "llm_id": state.llm.get("llm_id"), "llm_mismatch": False}
    elif (
        want_emotions and (source := carried_rating(recent, signals, human_spoke=human_spoke, every=every)) is not None
    ):
        emotions, want_emotions = list(source.emotions), False
        evaluation = {"source": "carried", "carried_from": source.tick, "llm_id": source.llm_id, "llm_mismatch": False}
    elif want_emotions and (named := lexicon_rating(body, vocabulary)):
        emotions, want_emotions = named, False  # the thought names its emotions: no call (a cheap signal)
        evaluation = {"source": "lexicon", "llm_id": None, "llm_mismatch": False}
    elif (
        want_emotions
        and reflexes.emotion_from_signals
        and (
            cheap := signal_rating(
                body,
                signals,
                vocabulary,
                drives=dict(state.drives),
                human_spoke=human_spoke,
                previous=list(recent[-1].emotions or []) if recent else None,
            )
        )
    ):
        emotions, want_emotions = cheap, False  # no feeling in the thought: novelty and drives rate it (no call)
        evaluation = {"source": "signals", "llm_id": None, "llm_mismatch": False}
    want_comparison = comparison_decides(signals, reflexes) and previous is not None
    if want_emotions or want_comparison:
        author = state.llm.get("llm_id")

        def ask() -> tuple[Any, dict[str, Any]] | None:
            try:
                return evaluate(
                    services.llms,
                    response,
                    vocabulary=vocabulary if want_emotions else None,
                    previous=previous if want_comparison else None,
                    prefer=author,
                    tags={"thread_id": state.thread_id, "tick": state.tick},
                    language=services.settings.prompt_language,
                )
            except AllLLMsUnavailable as exc:
                log.warning("evaluation call skipped: %s", exc)
                return None

        # a side call: not while a human's note (other than the ones this tick answers) waits
        at = (state.thread_id, state.tick)
        asked = side_call(services, state.incoming_note_ids, ask, None, "the reflexes' evaluation", at)
        if asked is not None:
            gen, answer = asked
            if want_comparison:
                signals["comparison"] = parse_comparison(answer.get("comparison"))
            if want_emotions:
                rated = parse_emotions(
                    json.dumps({"emotions": answer["emotions"]}) if "emotions" in answer else gen.text
                )
                emotions = [f"{n}:{s} ({r})" if r else f"{n}:{s}" for n, s, r in rated]
                # HMP: the LLM that wrote the output rates it; a fallback's rating is marked
                evaluation = {
                    "source": "llm",
                    "llm_id": gen.llm_id,
                    "llm_mismatch": bool(author) and gen.llm_id != author,
                }
    if evaluation.get("source") in ("llm", "self"):
        _extend_vocabulary(services, state, vocabulary, emotions)
    return {"emotions": emotions, "emotion_eval": evaluation, "novelty_signals": signals}


def _extend_vocabulary(services: Services, state: TickState, vocabulary: list[str], emotions: list[str]) -> None:
    new = [name for name, _ in emotion_strengths(emotions) if name not in vocabulary]
    if new:
        with services.managers.unit() as house:
            house.inner_life.extend_emotion_vocabulary(vocabulary, new, thread_id=state.thread_id)
        log.info("emotion vocabulary extended with %s", new)
