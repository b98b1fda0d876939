"""Step 10: store the response with every reflex field; mark the notes it answered as read.

The human's words were remembered when they came in (managers/conversation.py); a thought that answered a guest
or a peer is tagged with their conversation, so it is theirs to be shown again.

Idempotent: rows carry a dedup key (thread:tick:kind), so a step re-run after a kill updates instead of
duplicating; the first run of a tick, before which nothing of it can be stored, inserts without looking. A
repeated (identical) output is not stored again, nor is one not in words (check_stagnation's `degenerate`): a
short `stagnation_record` replaces it.
"""

from __future__ import annotations

from typing import Any, cast

from langgraph.runtime import Runtime

from managers.audience import Audience
from memory.text import emotion_strengths
from nodes.context import AnimaContext, services_of
from nodes.state import NoveltyReport, TickState, WriteMemoryUpdate, tick_key


def write_memory(
    state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None
) -> WriteMemoryUpdate:
    services = services_of(runtime)
    response = state.response
    if not response.strip():
        return {"response_id": None}
    novelty, validation = state.novelty, state.validation
    continuation = state.mode == "continuation"
    key = tick_key(state)
    if novelty.get("degenerate"):  # not words: a later prompt would only learn to repeat it
        kind, content = (
            "stagnation_record",
            (
                f"[output not in words ({novelty['degenerate']}), not kept; "
                f"{', '.join(novelty.get('triggered_actions') or [])}]"
            ),
        )
    elif novelty.get("repeated"):
        kind, content = (
            "stagnation_record",
            (
                f"[output identical to tick {novelty.get('similar_to_tick')} "
                f"not stored again; {', '.join(novelty.get('triggered_actions') or [])}]"
            ),
        )
    else:
        kind = "continuation" if continuation else "response"
        content = response if continuation else (state.thought or response)
    llm, comparison = state.llm, novelty.get("comparison")
    thread_id = state.thread_id
    emotions = emotion_strengths(state.emotions)
    first = services.reads.first_run(thread_id, state.tick)  # no earlier run of this tick stored anything
    # a thought that answered a guest or a peer carries their conversation's tag: it is theirs to be shown again
    audience = Audience.from_dict(dict(state.audience))
    scope = [audience.tag] if audience.tag and not audience.private else []
    with services.managers.unit() as house:
        # what a human said became a conversation memory when it came in (managers/conversation.py, the one way in);
        # a note that came by another path (an older version, a tool writing the table) is remembered now
        response_id = house.thoughts.record_tick(
            thread_id=thread_id,
            tick=state.tick,
            key=key,
            first=first,
            kind=kind,
            content=content,
            fields={
                "llm_id": llm.get("llm_id"),
                "novelty_score": novelty.get("novelty_score"),
                "reflection": novelty.get("reflection"),
                "new_ideas": list(comparison.get("new_ideas") or []) if comparison else [],
                "refined_ideas": list(comparison.get("refined_ideas") or []) if comparison else [],
                "discarded_ideas": list(comparison.get("discarded_ideas") or []) if comparison else [],
                "tags": list(novelty.get("tags") or []),
                "emotions": list(state.emotions),
                "rating": validation.get("rating"),
                "distribution": dict(validation.get("distribution") or {}),
                "validators": list(validation.get("validators") or []),
                "auto_pass": bool(validation.get("auto_pass")),
                "self_validation": bool(validation.get("self_validation")),
                "confidence": state.confidence,
                "unverified_facts_json": list(state.unverified_facts),
                "stagnation_flag": bool(novelty.get("stagnation_flag")),
                "stagnation_reason": novelty.get("stagnation_reason"),
                "triggered_actions": list(novelty.get("triggered_actions") or []),
                "meta": {
                    "commands": [c["cmd_id"] for c in state.commands],
                    "dynamics": novelty.get("dynamics"),
                    "llm_mismatch": bool(state.emotion_eval.get("llm_mismatch")),
                    "emotion_source": state.emotion_eval.get("source"),
                    "emotions_carried_from": state.emotion_eval.get("carried_from"),
                    "parse_errors": state.parse_errors,
                    "raw_chars": len(response),
                },
            },
            human_turns=state.human_turns,
            answered=state.incoming_note_ids,
            metrics=_metrics(state, novelty) if "novelty_score" in novelty else None,
            # the repository takes the facts as plain dicts (memory/ knows no tick state)
            facts=cast("list[dict[str, Any]]", state.unverified_facts),
            author=services.persona.display_name,
            tags=[*(novelty.get("tags") or []), *scope],
            emotions=emotions,
            feel=state.emotion_eval.get("source") != "carried",  # an inherited rating is no new feeling
            novelty=novelty.get("novelty_score"),
        )
    services.sync_memory()
    return {"response_id": response_id}


def _metrics(state: TickState, novelty: NoveltyReport) -> dict[str, Any]:
    """The tick's anti_stagnation_metrics row; the previous reflex learns its 'after'."""
    comparison = novelty.get("comparison")
    return {
        "novelty_score": novelty.get("novelty_score"),
        "ngram_similarity": novelty.get("ngram_similarity"),
        "semantic_similarity": novelty.get("semantic_similarity"),
        "llm_novelty": novelty.get("llm_novelty"),
        "method": novelty.get("method") or "cheap",
        "new_ideas": len(comparison.get("new_ideas") or []) if comparison else 0,
        "refined_ideas": len(comparison.get("refined_ideas") or []) if comparison else 0,
        "discarded_ideas": len(comparison.get("discarded_ideas") or []) if comparison else 0,
        "stagnation_flag": bool(novelty.get("stagnation_flag")),
        "reason": novelty.get("stagnation_reason"),
        "streak": int(novelty.get("streak") or 0),
        "diagnosis": novelty.get("diagnosis"),
        "mechanisms": list(novelty.get("mechanisms") or []),
        "triggered_actions": list(novelty.get("triggered_actions") or []),
        "sampling": dict(state.sampling),
    }
