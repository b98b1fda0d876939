"""Step 9 (HMP): cognitive & ethical validation by the registry's validator LLMs.

No validators → auto_pass. One validator that is the main LLM → self_validation. Otherwise every validator
answers the universal −3..+3 question; the consensus and its tie-breaks come from nodes/reflexes/validation.py.
An output rated at or below the ethics policy's `violation_at` is a violation (persona/ethics.py). What a
command then needs — the general threshold, +2 for modify_self/external, or the human — is the consent gate's
business (nodes/commands/consent.py).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langgraph.runtime import Runtime

import i18n
from llm import LLMUnavailable, Sampling
from nodes.attention import waiting
from nodes.context import AnimaContext, services_of
from nodes.reflexes.prompts import VALIDATION_PROMPT, VALIDATION_SCHEMA
from nodes.reflexes.validation import aggregate, drift_trust, parse_rating
from nodes.state import TickState, ValidationReport, ValidationUpdate, Vote

log = logging.getLogger(__name__)


def validate_output(state: TickState, runtime: Runtime[AnimaContext],
                    params: dict[str, Any] | None = None) -> ValidationUpdate:
    services = services_of(runtime)
    response = state.response.strip()
    reflexes = services.settings.reflexes
    threshold = reflexes.validation_threshold
    configured = services.llms.validators()
    validators = services.llms.validators(min_trust=reflexes.min_trust)
    if not configured:
        return {"validation": {"auto_pass": True, "self_validation": False, "rating": 0.0, "distribution": {},
                               "validators": [], "passed": True, "threshold": threshold}}
    if not validators:  # distrust must not turn validation off
        return {"validation": {"auto_pass": False, "self_validation": False, "rating": None, "passed": False,
                               "validators": [], "distribution": {}, "threshold": threshold,
                               "skipped": f"every validator's trust is below {reflexes.min_trust}: commands blocked"}}
    if not response:
        return {"validation": {"auto_pass": False, "self_validation": False, "rating": None, "passed": False,
                               "validators": [], "distribution": {}, "threshold": threshold, "skipped": "no output"}}
    at = (state.thread_id, state.tick)
    if not state.audience and waiting(services, state.incoming_note_ids, at):  # a free thought's: a human comes first
        return {"validation": {"auto_pass": False, "self_validation": False, "rating": None, "passed": False,
                               "validators": [], "distribution": {}, "threshold": threshold,
                               "skipped": "not rated: a human's note waits (this thought's commands do not run)"}}
    main_id = state.llm.get("llm_id") or services.llms.primary_id
    self_validation = len(validators) == 1 and validators[0]["id"] == main_id
    ethics = services.persona.ethics
    principles = "; ".join(ethics.principles) or "none stated"
    prompt = i18n.text(VALIDATION_PROMPT, services.settings.prompt_language).format(ethics=principles, response=response[-3000:])
    tags = {"thread_id": state.thread_id, "tick": state.tick}

    def ask(entry: dict[str, Any]) -> Vote:
        name = "self" if self_validation else entry["id"]
        try:
            gen = services.llms.generate("validate", prompt=prompt, sampling=Sampling(temperature=0.1, max_tokens=60),
                                    json_schema=VALIDATION_SCHEMA, only=entry["id"], tags=tags)
        except LLMUnavailable as exc:
            return {"LLM": name, "id": entry["id"], "rating": None, "comment": f"unavailable: {exc}"[:100], "trust": 0.0}
        parsed = parse_rating(gen.text)
        if parsed is None:
            return {"LLM": name, "id": entry["id"], "rating": None, "comment": f"unparseable: {gen.text[:60]!r}", "trust": 0.0}
        return {"LLM": name, "id": entry["id"], "rating": parsed[0], "comment": parsed[1] or ("self-eval" if self_validation else ""),
                "trust": float(entry.get("trust_score", 1.0))}

    with ThreadPoolExecutor(max_workers=min(4, len(validators))) as pool:
        votes = list(pool.map(ask, validators))
    result = aggregate(votes)
    if not self_validation:
        drift_trust(services, votes, result["rating"], state.thread_id)
    report: ValidationReport = {**result, "auto_pass": False, "self_validation": self_validation, "validators": votes,
                                "passed": result["rating"] >= threshold, "threshold": threshold}
    if result["rating"] <= ethics.violation_policy.violation_at and any(v.get("rating") is not None for v in votes):
        report["violation"] = ethics.violation_policy.on_violation == "block_commands_and_log"
        report["ethics"] = ethics.decision_record(result["rating"])
        with services.db.unit() as repos:
            repos.processes.add("ethics.violation", f"the validators rated my output {result['rating']:+g} (at or below "
                                f"{ethics.violation_policy.violation_at:+g}); policy {ethics.violation_policy.on_violation}",
                                status="warning", thread_id=state.thread_id)
    return {"validation": report}


