"""Step 3 (HMP §3): one call to the current main LLM, failing over by priority.

Chat mode sends the system+user messages (rendered as plain text for base models by the provider);
continuation mode continues the one growing text. Tokens stream to the run's custom stream as
`{"event": "token"}`. When no LLM answers, the tick is degraded: the playbook's conditional edge takes it
straight to execute_commands (which closes the tick); nothing is lost, the notes stay unread, and the loop
driver backs off.
"""

from __future__ import annotations

import logging
from typing import Any

from langgraph.runtime import Runtime

from llm import AllLLMsUnavailable, Generation, Sampling
from llm.json_output import bound
from nodes.context import AnimaContext, services_of
from nodes.state import TickState

log = logging.getLogger(__name__)

CHAT_STOPS = ["\n## ", "\n# Incoming notes", "\n# My recent thoughts", "\n# Runtime", "\n[note "]
CONTINUATION_STOPS = ["My human writes:", "\n[note "]


def call_llm(state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None) -> dict:
    svc = services_of(runtime)
    sampling = Sampling.from_dict(dict(state.sampling))
    budget_max = state.context_report.get("max_tokens")
    if budget_max:  # a Stelis child's window may be smaller than the configured answer length
        sampling.max_tokens = min(sampling.max_tokens, int(budget_max))
    writer = runtime.stream_writer
    tags = {"thread_id": state.thread_id, "tick": state.tick}
    prefer = state.stagnation.get("llm")  # the anti-stagnation "switch LLM" mechanism
    with svc.db.unit() as repos:
        kept = repos.ticks.kept_answer(state.thread_id, state.tick)
    if kept is not None:  # this tick ran before and was killed after the model answered: never generate twice
        return kept

    def generate():
        if state.mode == "continuation":
            return svc.llms.generate("think", prompt=state.prompt, sampling=sampling, stop=CONTINUATION_STOPS,
                                     prefer=prefer, on_token=lambda t: writer({"event": "token", "text": t}), tags=tags)
        return svc.llms.generate("think", messages=state.prompt_messages, sampling=sampling, stop=CHAT_STOPS,
                                 prefer=prefer, on_token=lambda t: writer({"event": "token", "text": t}), tags=tags)

    try:
        gen = generate()
        if not gen.text.strip() and not gen.tool_calls:
            # A sampled model sometimes stops at once; one more draw is cheaper than a wasted tick.
            log.info("tick %s: empty thought from %s, drawing again", state.tick, gen.llm_id)
            first = gen
            gen = generate()
            gen.prompt_tokens += first.prompt_tokens
            gen.completion_tokens += first.completion_tokens
            gen.latency_ms += first.latency_ms
    except AllLLMsUnavailable as exc:
        log.warning("tick %s degraded: %s", state.tick, exc)
        with svc.db.unit() as repos:
            repos.processes.add("llm.outage", str(exc)[:500], status="offline", thread_id=state.thread_id)
        return {"response": "", "degraded": True, "error": str(exc)[:500], "llm": {},
                "degraded_ticks": state.degraded_ticks + 1}
    text, tool_calls, problems = _bounded(gen, svc.settings.limits.output_chars)
    answer = {
        "response": text,
        "native_tool_calls": tool_calls,
        "parse_errors": problems,
        "degraded": False,
        "degraded_ticks": 0,
        "llm": {"llm_id": gen.llm_id, "provider": gen.provider, "model": gen.model,
                "prompt_tokens": gen.prompt_tokens, "completion_tokens": gen.completion_tokens,
                "latency_ms": round(gen.latency_ms, 1), "tokens_per_s": round(gen.tokens_per_s, 1),
                "failed_over_from": gen.failed_over_from},
    }
    with svc.db.unit() as repos:
        repos.ticks.keep_answer(state.thread_id, state.tick, answer)
        if gen.failed_over_from or state.degraded_ticks:
            _record_failover(repos, state, gen.llm_id, gen.failed_over_from)
    return answer


def _bounded(gen: Generation, max_chars: int) -> tuple[str, list[dict[str, Any]], list[str]]:
    """The answer as the tick may keep it: cut at `limits.output_chars` (a server may ignore max_tokens), native
    tool calls only when they are JSON a checkpoint can hold; what was cut is said to the model."""
    problems = []
    text = gen.text
    if len(text) > max_chars:
        problems.append(f"my answer was cut at {max_chars:,} of its {len(text):,} characters (limits.output_chars)")
        text = text[:max_chars]
    tool_calls = gen.tool_calls
    problem = bound(tool_calls) if tool_calls else None
    if problem or len(tool_calls) > 200:
        problems.append(f"tool calls dropped: {problem or f'{len(tool_calls)} of them'}")
        tool_calls = []
    return text, tool_calls, problems


def _record_failover(repos, state: TickState, llm_id: str, failed: list[str]) -> None:
    """Failover and recovery go to the process log (the persona sees them; `inspect` shows them)."""
    degraded = state.degraded_ticks
    if degraded:
        repos.processes.close([p.id for p in repos.processes.open(state.thread_id) if p.name == "llm.outage"])
        repos.processes.add("llm.recovered", f"{llm_id} answers again after {degraded} degraded tick(s)",
                            status="close", thread_id=state.thread_id)
    if failed:
        repos.processes.add("llm.failover", f"{', '.join(failed)} did not answer; {llm_id} took over",
                            status="close", thread_id=state.thread_id)
