"""The dream playbook's steps (playbooks/dream.yaml): gather → dream → apply → roll up the days.

`gather_dream` picks the level (input `level`, 0 = by the calendar) and the material; `dream` makes the one
structured call; `apply_dream` validates it and writes it in one transaction (what it writes keeps the provenance of
the rows written from untrusted text it read: memory/provenance.py); `summarise_days` writes the
episodic summaries that are due (days, then their week and month roll-ups). Progress and results live in
the run's variables, so a killed dream resumes at the step that was running and never dreams twice.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from langgraph.runtime import Runtime

from llm import AllLLMsUnavailable, Sampling
from llm.json_output import json_object
from nodes.context import AnimaContext, services_of
from nodes.state import TickState, VarsUpdate
from nodes.upkeep import generator, write_episode
from persona.dreaming import dream_prompt, unusable_dream
from persona.prompts import DREAM_SCHEMA

log = logging.getLogger(__name__)
MAX_EPISODES_PER_DREAM = 6


def gather_dream(state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None) -> VarsUpdate:
    services = services_of(runtime)
    variables = state.vars
    now = services.clock()
    with services.managers.unit() as house:
        level, material = house.dreams.gather(int(variables.get("level") or 0), now)
    runtime.stream_writer(
        {
            "event": "dream",
            "phase": "gathered",
            "level": level,
            "reason": variables.get("reason"),
            "material_chars": len(material["text"]),
        }
    )
    return {"vars": {"dream_level": level, "dream_material": material, "dream_started": now.isoformat()}}


def dream(state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None) -> VarsUpdate:
    services = services_of(runtime)
    variables = state.vars
    level, material = int(variables["dream_level"]), variables["dream_material"]
    max_tokens = services.settings.dreaming.max_tokens
    prompt = dream_prompt(
        services.persona.display_name,
        services.persona.file("IDENTITY.md") or services.persona.display_name,
        level,
        material["text"],
        services.settings.prompt_language,
    )
    attempts = services.settings.dreaming.attempts
    for attempt in range(1, attempts + 1):
        try:
            gen = services.llms.generate(
                "dream",
                prompt=prompt,
                json_schema=DREAM_SCHEMA,
                sampling=Sampling(temperature=0.3, top_p=0.9, max_tokens=max_tokens),
                tags={"thread_id": state.thread_id, "tick": state.tick},
            )
        except AllLLMsUnavailable as exc:
            log.warning("dream postponed: %s", exc)
            return {"vars": {"dream_raw": None, "dream_error": str(exc)}}
        problem = unusable_dream(json_object(gen.text))
        if problem is None or attempt == attempts:
            break
        # A small model's dream is sometimes markup or one word; sampling again is cheaper than a lost night.
        runtime.stream_writer(
            {"event": "dream", "phase": "retry", "level": level, "attempt": attempt, "problem": problem}
        )
    return {"vars": {"dream_raw": gen.text, "dream_llm": gen.llm_id, "dream_error": None, "dream_attempts": attempt}}


def apply_dream(state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None) -> VarsUpdate:
    services = services_of(runtime)
    variables = state.vars
    level, material = int(variables["dream_level"]), variables["dream_material"]
    if variables.get("dream_raw") is None:
        result = {"status": "postponed", "level": level, "error": variables.get("dream_error")}
        runtime.stream_writer({"event": "dream", "phase": "postponed", "level": level, "error": result["error"]})
        return {"vars": {"dream": result}}
    data = json_object(variables["dream_raw"])
    run = state.run_id or variables.get("dream_started")
    with services.managers.unit() as house:
        result = house.dreams.apply(
            data,
            level=level,
            material=material,
            started=datetime.fromisoformat(variables["dream_started"]),
            run=run,
            thread_id=state.thread_id,
            tick=state.tick,
            describe=_describe,
        )
    result["llm_id"] = variables.get("dream_llm")
    result["attempts"] = variables.get("dream_attempts", 1)
    services.sync_memory()
    runtime.stream_writer({"event": "dream", "phase": "applied", **result})
    return {"vars": {"dream": result}}


def summarise_days(
    state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None
) -> VarsUpdate:
    """Sleep is when the days get their summaries: every missing day, week and month, up to a few per dream."""
    services = services_of(runtime)
    with services.managers.unit() as house:
        house.dreams.look_for_missing_summaries()
    thread_id = state.thread_id or "main"
    generate = generator(services, "episode", 360, thread_id=thread_id, tick=state.tick)
    written = []
    for _ in range(MAX_EPISODES_PER_DREAM):
        done = write_episode(services, thread_id, generate).get("episode")
        if not done or done == "postponed" or str(done).startswith("error"):
            break
        written.append(done)
    dream_result = dict(state.vars.get("dream") or {})
    dream_result["episodes"] = written
    return {"vars": {"dream": dream_result}}


def _describe(outcome: dict[str, Any]) -> str:
    if outcome["status"] != "applied":
        return f"dream level {outcome['level']}: nothing applied ({'; '.join(outcome['dropped'])[:300]})"
    parts = [f"dream level {outcome['level']}: {outcome['insight'][:200]}", f"strategy: {outcome['strategy'][:160]}"]
    if outcome["goals"]:
        parts.append("goals: " + ", ".join(outcome["goals"]))
    if outcome["entities"]:
        parts.append("entities: " + ", ".join(outcome["entities"]))
    if outcome["questions_added"] or outcome["questions_resolved"]:
        parts.append(f"questions: +{len(outcome['questions_added'])}, resolved {len(outcome['questions_resolved'])}")
    if outcome["dropped"]:
        parts.append(f"{len(outcome['dropped'])} item(s) dropped")
    return "; ".join(parts)


# the playbook checks read what a step sets from its `produces` (a function attribute, which mypy does not model)
apply_dream.produces = ("dream",)  # type: ignore[attr-defined]
summarise_days.produces = ("dream",)  # type: ignore[attr-defined]
