"""Playbook `llm` node: render a prompt template, fit it to the thread's window, ask, store the answer.

The prompt never exceeds the thread's window (model window × Π window_ratio of its Stelis lineage,
minus the answer's max_tokens): `{{ history }}` loses its oldest items first (items are never cut),
then the longest other string variable is shortened in the middle with a marker; if the template's own
text still does not fit, ContextBudgetError says so. With a JSON schema the answer is read leniently
(llm/json_output.py:
cut-off output keeps its complete fields) and stored as an object; otherwise as text. The answer also goes to the
thread's
message log (kind `step`), once per task even when a killed run is resumed.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime

from llm import Sampling
from llm.json_output import read_json
from nodes.context import AnimaContext, ContextBudgetError, checkpoint_thread_of, services_of
from nodes.kinds.expressions import referenced_names, render
from nodes.kinds.variables import namespace
from nodes.state import TickState, VarsUpdate
from nodes.stelis.history import render_timeline
from nodes.stelis.threads import thread_window

log = logging.getLogger(__name__)
SAFETY_TOKENS = 16
CUT_MARKER = "\n[… {n} tokens left out to fit the window …]\n"


def _shorten(text: str, keep_tokens: int, count: Callable[[str], int]) -> str:
    if keep_tokens <= 0:
        return CUT_MARKER.format(n=count(text))
    ratio = max(0.05, keep_tokens / max(1, count(text)))
    keep_chars = int(len(text) * ratio)
    head, tail = text[: keep_chars // 2], text[len(text) - keep_chars // 2 :]
    return head + CUT_MARKER.format(n=count(text) - keep_tokens) + tail


def fit_prompt(
    prompt_t: str,
    system_t: str | None,
    scope: dict[str, Any],
    history: list[str],
    budget: int,
    count: Callable[[str], int],
) -> tuple[str, str | None, list[str]]:
    """Render under `budget` tokens. Returns (prompt, system, what was dropped)."""
    drops: list[str] = []
    scope = dict(scope)

    def build(items: list[str]) -> tuple[str, str | None, int]:
        scope["history"] = "\n\n".join(items)
        prompt = render(prompt_t, scope)
        system = render(system_t, scope) if system_t else None
        return prompt, system, count(prompt) + (count(system) if system else 0)

    prompt, system, total = build(history)
    kept = list(history)
    if total > budget and kept:
        _, _, fixed = build([])
        sizes = [count(item) + 1 for item in kept]
        room, start = budget - fixed, len(kept)
        while start > 0 and sizes[start - 1] <= room:
            room -= sizes[start - 1]
            start -= 1
        if start:
            drops.append(f"history: {start} oldest item(s)")
        kept = kept[start:]
        prompt, system, total = build(kept)
        while total > budget and kept:
            kept.pop(0)
            drops.append("history: 1 more oldest item")
            prompt, system, total = build(kept)
    names = (referenced_names(prompt_t) | referenced_names(system_t or "")) - {"history", "state", "vars"}
    for _ in range(8):
        if total <= budget:
            break
        longest = max((n for n in names if isinstance(scope.get(n), str)), key=lambda n: count(scope[n]), default=None)
        if longest is None or count(scope[longest]) < 8:
            break
        size = count(scope[longest])
        scope[longest] = _shorten(scope[longest], size - (total - budget) - 16, count)
        drops.append(f"variable {longest}: shortened from {size} tokens")
        prompt, system, total = build(kept)
    if total > budget:
        raise ContextBudgetError(
            f"the prompt needs {total} tokens but the thread's budget is {budget}: "
            "shorten the template or raise the window"
        )
    return prompt, system, drops


def parse_structured(text: str) -> Any:
    reading = read_json(text)
    return reading.value if reading.ok else {"_raw": text}


def ask_llm(state: TickState, runtime: Runtime[AnimaContext], node: Any = None, playbook: str = "") -> VarsUpdate:
    services = services_of(runtime)
    thread_id = state.thread_id or checkpoint_thread_of(runtime) or "main"
    task_id = getattr(runtime.execution_info, "task_id", None) or uuid.uuid4().hex
    needs_history = "history" in referenced_names(node.prompt) | referenced_names(node.system or "")
    with services.db.unit() as repos:
        house = services.managers.over(repos)
        house.threads.ensure_root(thread_id, persona=services.persona.name, playbook=playbook)
        window = thread_window(services, repos, thread_id)
        history = render_timeline(house.threads, thread_id) if needs_history else []
    count = services.llms.primary().count_tokens
    max_tokens = max(16, min(node.max_tokens, window // 2))
    budget = window - max_tokens - SAFETY_TOKENS
    prompt, system, drops = fit_prompt(
        node.prompt, node.system, namespace(state, services.persona.display_name), history, budget, count
    )
    sampling = Sampling(
        temperature=node.temperature if node.temperature is not None else services.settings.sampling.temperature,
        max_tokens=max_tokens,
    )
    writer = runtime.stream_writer
    writer({"event": "step", "node": node.id, "thread_id": thread_id, "prompt_tokens": count(prompt), "dropped": drops})
    kwargs: dict[str, Any] = (
        {"messages": [{"role": "system", "content": system}, {"role": "user", "content": prompt}]}
        if system
        else {"prompt": prompt}
    )
    gen = services.llms.generate(
        node.purpose,
        sampling=sampling,
        json_schema=node.json_schema,
        on_token=lambda t: writer({"event": "token", "text": t}),
        tags={"thread_id": thread_id, "tick": state.tick},
        **kwargs,
    )
    value: Any = parse_structured(gen.text) if node.json_schema else gen.text.strip()
    if node.record:
        content = json.dumps(value, ensure_ascii=False) if node.json_schema else value
        with services.managers.unit() as house:
            house.threads.record_step(
                f"step:{thread_id}:{task_id}",
                thread_id=thread_id,
                tick=state.tick,
                role="assistant",
                content=content,
                llm_id=gen.llm_id,
                meta={
                    "node": node.id,
                    "playbook": playbook,
                    "purpose": node.purpose,
                    "prompt_tokens": gen.prompt_tokens,
                    "window": window,
                    "dropped": drops,
                },
            )
    return {"vars": {node.output: value}}
