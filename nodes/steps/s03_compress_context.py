"""Continuation-mode compression (Epos, done better): when the growing text passes `compress_at_chars`,
the *whole* text since the last compression is distilled (in chunks that fit the summariser's window,
then the summaries of the chunks, until one summary remains) into core insights + open questions.

The summary becomes a `compression` message; prepare_context then starts the text from it, with the tool
definitions last (closest to the generation point). Nothing is deleted: the pre-compression chunks stay in
the database and the compression row lists their ids.
"""

from __future__ import annotations

import logging
from typing import Any

from langgraph.runtime import Runtime

import i18n
from llm import AllLLMsUnavailable
from nodes.context import AnimaContext, Services, services_of
from nodes.state import CompressionUpdate, TickState, tick_key
from nodes.steps.prompts import COMPRESSION_PROMPT
from nodes.summarise import summarise

log = logging.getLogger(__name__)
SUMMARY_TOKENS = 400


def distill(text: str, services: Services, tags: dict[str, Any]) -> tuple[str, int]:
    """All of `text` distilled hierarchically; returns (summary, LLM calls made)."""
    result = summarise(
        text,
        services.llms,
        i18n.text(COMPRESSION_PROMPT, services.settings.prompt_language),
        purpose="compress",
        max_tokens=SUMMARY_TOKENS,
        tags=tags,
        name=services.persona.display_name,
    )
    return result.text, result.calls


def compress_context(
    state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None
) -> CompressionUpdate:
    services = services_of(runtime)
    if state.mode != "continuation":
        return {}
    settings = services.settings.continuation
    threshold = min(
        int((params or {}).get("compress_at_chars") or settings.compress_at_chars), settings.max_chars
    )  # never later than the hard cap (prepare_context cuts beyond it)
    thread_id = state.thread_id
    with services.managers.unit() as house:
        continuation = house.prompt.continuation(thread_id)
    last, chunks = continuation.compression, continuation.chunks
    base = last.content if last else (services.persona.seed or "")
    text = base + "".join(m.content for m in chunks)
    if len(text) <= threshold or not chunks:
        return {}
    try:
        summary, calls = distill(text, services, {"thread_id": thread_id, "tick": state.tick})
    except AllLLMsUnavailable as exc:
        log.warning("compression postponed: %s", exc)
        return {}
    if not summary:
        return {}
    with services.managers.unit() as house:
        house.threads.compressed(
            f"{tick_key(state)}:compression",
            thread_id=thread_id,
            tick=state.tick,
            summary=summary,
            chunks=chunks,
            previous=last,
            pre_chars=len(text),
            llm_calls=calls,
        )
    log.info("compressed %s chars into %s (%s calls)", len(text), len(summary), calls)
    report = state.context_report.copy()
    report["compressed"] = {"pre_chars": len(text), "post_chars": len(summary), "calls": calls}
    return {"context_report": report}
