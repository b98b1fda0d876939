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

from llm import AllLLMsUnavailable, Sampling
from nodes.context import AnimaContext, Services, services_of
from nodes.prompts import COMPRESSION_PROMPT
from nodes.state import TickState, tick_key

log = logging.getLogger(__name__)
SUMMARY_TOKENS = 400


def split_to_fit(text: str, max_tokens: int, count) -> list[str]:
    """Split at paragraph, then line, then hard boundaries so each piece counts ≤ max_tokens."""
    if count(text) <= max_tokens:
        return [text]
    for sep in ("\n\n", "\n", ". "):
        parts = text.split(sep)
        if len(parts) > 1:
            pieces, current = [], ""
            for part in parts:
                candidate = f"{current}{sep}{part}" if current else part
                if count(candidate) <= max_tokens:
                    current = candidate
                    continue
                if current:
                    pieces.append(current)
                current = part
            if current:
                pieces.append(current)
            return [p for piece in pieces for p in split_to_fit(piece, max_tokens, count)]
    half = len(text) // 2
    return split_to_fit(text[:half], max_tokens, count) + split_to_fit(text[half:], max_tokens, count)


def distill(text: str, svc: Services, tags: dict[str, Any]) -> tuple[str, int]:
    """Hierarchical distillation of all of `text`; returns (summary, LLM calls made).

    Each level summarises pieces that fit the summariser's window; the next level summarises the
    joined summaries, until one call covers everything. If a level stops shrinking (a model that does
    not summarise), the joined summaries of that level are kept rather than looping forever.
    """
    provider = svc.llms.primary()
    count = provider.count_tokens
    name = svc.persona.display_name
    summary_tokens = max(32, min(SUMMARY_TOKENS, provider.context_window // 4))
    overhead = count(COMPRESSION_PROMPT.format(part=1, parts=1, name=name, text=""))
    room = max(32, provider.context_window - summary_tokens - overhead - 32)
    sampling = Sampling(temperature=0.3, max_tokens=summary_tokens)
    calls, level, previous_pieces = 0, text, None
    while True:
        pieces = split_to_fit(level, room, count)
        if previous_pieces is not None and len(pieces) >= previous_pieces:
            log.warning("distillation stopped shrinking at %s pieces; keeping this level's summaries", len(pieces))
            return level, calls
        summaries = []
        for index, piece in enumerate(pieces, start=1):
            prompt = COMPRESSION_PROMPT.format(part=index, parts=len(pieces), name=name, text=piece)
            summaries.append(svc.llms.generate("compress", prompt=prompt, sampling=sampling, tags=tags).text.strip())
            calls += 1
        level = "\n\n".join(s for s in summaries if s)
        if len(pieces) == 1:
            return level, calls
        previous_pieces = len(pieces)


def compress_context(state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None) -> dict:
    svc = services_of(runtime)
    if state.get("mode") != "continuation":
        return {}
    threshold = int((params or {}).get("compress_at_chars") or svc.settings.compress_at_chars)
    thread_id = state["thread_id"]
    with svc.db.unit() as repos:
        last = repos.messages.last_of_kind(thread_id, "compression")
        chunks = repos.messages.since(thread_id, last.id if last else 0, ("continuation", "human"))
        base = last.content if last else (svc.persona.seed or "")
    text = base + "".join(m.content for m in chunks)
    if len(text) <= threshold or not chunks:
        return {}
    try:
        summary, calls = distill(text, svc, {"thread_id": thread_id, "tick": state["tick"]})
    except AllLLMsUnavailable as exc:
        log.warning("compression postponed: %s", exc)
        return {}
    if not summary:
        return {}
    with svc.db.unit() as repos:
        repos.messages.upsert(f"{tick_key(state)}:compression", thread_id=thread_id, tick=state["tick"],
                              kind="compression", role="system", content=summary.rstrip() + "\n",
                              meta={"source_ids": [m.id for m in chunks], "previous_compression": last.id if last else None,
                                    "pre_chars": len(text), "llm_calls": calls})
    log.info("compressed %s chars into %s (%s calls)", len(text), len(summary), calls)
    report = dict(state.get("context_report") or {})
    report["compressed"] = {"pre_chars": len(text), "post_chars": len(summary), "calls": calls}
    return {"context_report": report}
