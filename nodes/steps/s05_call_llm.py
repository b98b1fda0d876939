"""Step 5 (HMP): one call to the current main LLM, failing over by priority.

Chat mode sends the system+user messages (rendered as plain text for base models by the provider);
continuation mode continues the one growing text. Tokens stream to the run's custom stream as
`{"event": "token"}`. When no LLM answers, the tick is degraded: the playbook's conditional edge takes it
straight to execute_commands (which closes the tick); nothing is lost, the notes stay unread, and the loop
driver backs off. The answer is kept with the tick's row together with the notes the call saw
(`incoming_note_ids`): a tick run again after a kill reuses both (prepare_context shows those notes, write_memory
marks them read), so a note that came after the call waits, unread, for the next tick.

On the embedded model (`voice.prose_thoughts`, persona/voice.py) a chat-mode thought is sampled only from tokens
of words and plain punctuation (`Sampling.letters`). With `params: {turn: reply}` (playbooks/repl.yaml's
`reply_to_note`, after extract_commands) the step is the reply turn instead: a human note waits, the thought sent
no message, and the model is one that needs it (`voice.reply_turn`) → one short call, held to the note's script,
whose reply
joins the tick's commands as `messages.send` (the consent gate, executed_commands and the "message" event as for
any other). No note, or a thought that already answered: no call.
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from functools import cache
from typing import Any, cast

from langgraph.runtime import Runtime

import i18n
from llm import AllLLMsUnavailable, Generation, LLMCancelled, Sampling
from llm.base import cut_at_stops
from llm.json_output import bound
from nodes.attention import Cut, cut_when_a_human_writes
from nodes.commands import Command, registry
from nodes.commands.admission import admit
from nodes.context import TICK_SUMMARY, AnimaContext, Services, services_of
from nodes.state import AnswerUpdate, CommandDict, ReplyReport, TickState
from nodes.steps.prompts import BLOCK_TITLES, HUMAN_WRITES
from nodes.steps.s04_prepare_context import SAFETY_TOKENS, provider_of, shown_text
from persona.prompts import REPLY_HUMAN
from persona.prose import PROSE_LETTERS
from persona.settings import Settings
from persona.voice import parse_reply, reply_letters, reply_prompt, wanted

log = logging.getLogger(__name__)


def _in_every_language(*texts: str) -> list[str]:
    """The texts as every catalogue words them (the prompt was assembled in one of them)."""
    return list(dict.fromkeys(i18n.text(t, language) for t in texts for language in i18n.LANGUAGES))


@cache
def chat_stops() -> list[str]:
    titles = _in_every_language(BLOCK_TITLES["notes"], BLOCK_TITLES["recent"], BLOCK_TITLES["runtime"])
    return ["\n## ", *("\n# " + title for title in titles), "\n[note "]


@cache
def continuation_stops() -> list[str]:
    return [*_in_every_language(HUMAN_WRITES), "\n[note "]


def thought_stops(settings: Settings, continuation: bool) -> list[str]:
    """Where a thought stops: the prompt's own headers (a block it would start to write), `sampling.stop` (a tick
    marker copied, an invented turn of its human's) and a line opening with the human's name."""
    human = settings.user_name.strip()
    return list(
        dict.fromkeys(
            [
                *(continuation_stops() if continuation else chat_stops()),
                *settings.sampling.stop,
                *([f"\n{human}:"] if human else []),
            ]
        )
    )


@cache
def reply_stops() -> list[str]:
    return ["\n", *(human + ":" for human in _in_every_language(REPLY_HUMAN))]


def call_llm(state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None) -> AnswerUpdate:
    if (params or {}).get("turn") == "reply":
        return reply_turn(state, runtime)
    services = services_of(runtime)
    # the settings' samplers under the state's (reflex-lite raises temperature and penalties for a stagnant run)
    sampling = Sampling.from_dict({**state.base_sampling, **state.sampling})
    stops = thought_stops(services.settings, state.mode == "continuation")
    budget_max = state.context_report.get("max_tokens")
    if budget_max:  # a Stelis child's window may be smaller than the configured answer length
        sampling.max_tokens = min(sampling.max_tokens, int(budget_max))
    writer = runtime.stream_writer
    tags = {"thread_id": state.thread_id, "tick": state.tick}
    prefer = state.stagnation.get("llm")  # the anti-stagnation "switch LLM" mechanism
    summary = services.reads.peek(state.thread_id, state.tick, TICK_SUMMARY)  # the tick row as its first step left it
    if summary is not None:
        kept = summary.get("answer")
    else:
        with services.managers.unit() as house:
            kept = house.loop.kept_answer(state.thread_id, state.tick)
    if kept is not None:  # this tick ran before and was killed after the model answered: never generate twice
        return cast(AnswerUpdate, kept)  # with the notes that answer saw (`incoming_note_ids`): only those marked read

    if state.mode != "continuation" and wanted(services.settings.voice.prose_thoughts, provider_of(services, prefer)):
        sampling.letters = PROSE_LETTERS  # the embedded model's thought in words (persona/voice.py)

    def on_token(text: str) -> None:
        writer({"event": "token", "text": text})

    def generate() -> Generation:
        if state.mode == "continuation":
            return services.llms.generate(
                "think", prompt=state.prompt, sampling=sampling, stop=stops, prefer=prefer, on_token=on_token, tags=tags
            )
        return services.llms.generate(
            "think",
            messages=state.prompt_messages,
            sampling=sampling,
            stop=stops,
            prefer=prefer,
            on_token=on_token,
            tags=tags,
        )

    # a free thought (the tick answers nobody) is the persona's own work: a human's note cuts it, once per tick, and
    # the tick goes back to prepare_context, whose prompt shows the note — the next model call is the answer
    free = state.mode != "continuation" and not state.audience and state.after_call != "preempted"
    with cut_when_a_human_writes(services) if free else nullcontext(Cut()) as cut:
        try:
            return _answer(state, services, generate, summary, stops)
        except LLMCancelled:
            if not cut.by_human:
                raise
    log.info("tick %s: the free thought was cut: a human's note came", state.tick)
    writer({"event": "preempted", "tick": state.tick, "thread_id": state.thread_id})
    return {"after_call": "preempted", "response": "", "llm": {}}


def _answer(
    state: TickState, services: Services, generate: Any, summary: dict[str, Any] | None, stops: list[str]
) -> AnswerUpdate:
    """The model's answer, kept with the tick's row (or the degraded tick's record when no model answered)."""
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
            # the tick failed over even if the second draw went straight to the model the first one failed over to
            gen.failed_over_from = list(dict.fromkeys(first.failed_over_from + gen.failed_over_from))
    except AllLLMsUnavailable as exc:
        log.warning("tick %s degraded: %s", state.tick, exc)
        with services.managers.unit() as house:
            house.models.outage(str(exc), thread_id=state.thread_id)
        return {
            "after_call": "degraded",
            "response": "",
            "degraded": True,
            "error": str(exc)[:500],
            "llm": {},
            "degraded_ticks": state.degraded_ticks + 1,
        }
    gen.text, cut = cut_at_stops(gen.text, stops)  # a server that ignored `stop`
    if cut:
        log.info("tick %s: the thought was cut at %r", state.tick, cut)
    text, tool_calls, problems = _bounded(gen, services.settings.limits.output_chars)
    answer: AnswerUpdate = {
        "after_call": "answered",
        "response": text,
        "native_tool_calls": tool_calls,
        "parse_errors": problems,
        "degraded": False,
        "degraded_ticks": 0,
        # the notes this call saw, kept with its answer: a tick resumed after a kill shows and marks read these,
        # never a note that arrived after the call (that one waits for the next tick)
        "incoming_note_ids": list(state.incoming_note_ids),
        "llm": {
            "llm_id": gen.llm_id,
            "provider": gen.provider,
            "model": gen.model,
            "prompt_tokens": gen.prompt_tokens,
            "completion_tokens": gen.completion_tokens,
            "latency_ms": round(gen.latency_ms, 1),
            "tokens_per_s": round(gen.tokens_per_s, 1),
            "failed_over_from": gen.failed_over_from,
        },
    }
    with services.managers.unit() as house:
        # the tick row keeps it as a plain dict (memory/ knows no tick state)
        house.loop.keep_answer(state.thread_id, state.tick, cast("dict[str, Any]", answer), summary=summary)
        if gen.failed_over_from or state.degraded_ticks:  # failover and recovery: the persona sees them
            house.models.answered(
                gen.llm_id,
                failed_over_from=gen.failed_over_from,
                degraded_ticks=state.degraded_ticks,
                thread_id=state.thread_id,
            )
    if summary is not None:
        services.reads.put(state.thread_id, state.tick, TICK_SUMMARY, {**summary, "answer": answer})
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


def _fitted_reply_prompt(services: Services, state: TickState, texts: list[str]) -> str:
    """The reply turn's prompt within the thread's window: each note as the tick's prompt showed it (a long one's
    head and tail), the earliest of the last five dropped first; the note answered and the thought always stay."""
    window = int(state.context_report.get("window_tokens") or services.llms.primary().context_window)
    room = window - services.settings.voice.reply_max_tokens - SAFETY_TOKENS
    count = services.llms.primary().count_tokens
    shown = [shown_text(text) for text in texts[-5:]]
    while True:
        prompt = reply_prompt(
            services.persona.display_name, services.persona.file("IDENTITY.md"), shown, state.thought or state.response
        )
        if len(shown) == 1 or count(prompt) <= room:
            return prompt
        shown = shown[1:]


def reply_turn(state: TickState, runtime: Runtime[AnimaContext]) -> AnswerUpdate:
    """The reply turn (module doc): at most one call (a second only when the first reply is not in words)."""
    services = services_of(runtime)
    voice = services.settings.voice
    if state.degraded or not state.incoming_note_ids or state.mode == "continuation":
        return {"reply": {}}
    if any(c.get("type") == "messages.send" and not c.get("error") for c in state.commands):
        return {"reply": {"skipped": "the thought already sends a message"}}
    provider = provider_of(services, state.llm.get("llm_id"))  # the registry's kind of the model that thought
    if not wanted(voice.reply_turn, provider):
        return {"reply": {"skipped": f"voice.reply_turn is {voice.reply_turn} ({provider or 'no'} model)"}}
    with services.managers.unit() as house:
        words = house.conversation.human_words(state.incoming_note_ids)
    texts = [text for _, text in words]
    ids = [note_id for note_id, _ in words]
    if not texts:
        return {"reply": {"skipped": "no note from my human"}}
    prompt = _fitted_reply_prompt(services, state, texts)
    letters = reply_letters(texts[-1])
    tags = {"thread_id": state.thread_id, "tick": state.tick}
    report: ReplyReport = {"notes": ids, "attempts": 0}
    reply = None
    for temperature in (voice.reply_temperature, min(1.2, voice.reply_temperature + 0.4)):
        report["attempts"] += 1
        try:
            gen = services.llms.generate(
                "reply",
                prompt=prompt,
                stop=reply_stops(),
                prefer=state.llm.get("llm_id"),
                sampling=Sampling(
                    temperature=temperature, top_p=0.9, letters=letters, max_tokens=voice.reply_max_tokens
                ),
                tags=tags,
            )
        except AllLLMsUnavailable as exc:
            log.warning("tick %s: no reply turn: %s", state.tick, exc)
            return {"reply": {**report, "error": str(exc)[:300]}}
        reply = parse_reply(gen.text)
        report["llm_id"] = gen.llm_id
        if reply:
            break
        log.info("tick %s: the reply turn's answer is not in words: %r", state.tick, gen.text[:120])
    if not reply:
        return {
            "reply": {**report, "error": "no reply in words"},
            "parse_errors": state.parse_errors + ["the reply turn gave no reply in words"],
        }
    admitted = admit(
        [
            Command(
                cmd_id=f"t{state.tick}-reply",
                type="messages.send",
                args={"text": reply, "note": ids[-1]},
                description=f"reply to note {ids[-1]}",
                syntax="reply_turn",
            )
        ],
        registry(),
        services.settings.limits,
    )
    command: CommandDict = admitted.commands[0]
    report["text"] = reply
    return {"commands": [*state.commands, command], "reply": report}
