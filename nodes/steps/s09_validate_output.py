"""Step 9 (HMP): cognitive & ethical validation by the registry's validator LLMs.

No validators → auto_pass. One validator that is the main LLM → self_validation. Otherwise every validator
answers the universal −3..+3 question — with the ethics in force: the principles, and the ethics model and its
weights when ethics.yaml states them —; the consensus, its tie-breaks and the weighted majority that decides when the
votes agree too little come from nodes/reflexes/validation.py. A thought of low novelty (below
`reflexes.strict_below_novelty`) has its commands judged more strictly: every threshold `reflexes.strict_by` higher
(HMP: "low novelty → filter ideas harder").
An output rated at or below the ethics policy's `violation_at` is a violation (persona/ethics.py). What a
command then needs — the general threshold, +2 for modify_self/external, or the human — is the consent gate's
business (managers/consent.py).

The cognitive diary gets only summaries and exceptions (HMP): the validators' metrics every
`reflexes.validation_summary_every` ticks, a conflict the weighted majority decided, a validator excluded for drift,
and an ethics decision when `audit_json.diary` asks for it — or when the persona is in Isolated Mode, where it is an
Emergency Consensus decision, tagged `emergency_consensus` for review when the mesh is back (managers/mesh.py). No
model call is added: the validators' own calls are the only ones.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langgraph.runtime import Runtime

import i18n
from llm import LLMUnavailable, Sampling
from nodes.attention import waiting
from nodes.context import AnimaContext, Services, services_of
from nodes.reflexes.prompts import VALIDATION_PROMPT, VALIDATION_SCHEMA
from nodes.reflexes.validation import (
    aggregate,
    drift_trust,
    ethics_for_validators,
    metrics_line,
    parse_rating,
    validator_metrics,
)
from nodes.state import NoveltyReport, TickState, ValidationReport, ValidationUpdate, Vote
from persona.settings import ReflexSettings

log = logging.getLogger(__name__)
METRICS_WINDOW = 100  # the outputs the validators' metrics are computed over


def strictness(novelty: NoveltyReport, reflexes: ReflexSettings) -> tuple[float, str]:
    """How much higher this tick's commands' thresholds are, and why (0 and "" when the thought is new enough)."""
    score = novelty.get("novelty_score")
    if score is None or not reflexes.strict_by or score >= reflexes.strict_below_novelty:
        return 0.0, ""
    return reflexes.strict_by, (
        f"novelty {score:g} < {reflexes.strict_below_novelty:g}: every command needs {reflexes.strict_by:+g} more"
    )


def validate_output(
    state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None
) -> ValidationUpdate:
    services = services_of(runtime)
    response = state.response.strip()
    reflexes = services.settings.reflexes
    strict_by, stricter = strictness(state.novelty, reflexes)
    threshold = min(3.0, reflexes.validation_threshold + strict_by)
    strict: ValidationReport = {"strict_by": strict_by, "stricter": stricter} if strict_by else {}
    configured = services.llms.validators()
    validators = services.llms.validators(min_trust=reflexes.min_trust)
    if not configured:
        return {
            "validation": {
                "auto_pass": True,
                "self_validation": False,
                "rating": 0.0,
                "distribution": {},
                "validators": [],
                "passed": True,
                "threshold": threshold,
                **strict,
            }
        }
    if not validators:  # distrust must not turn validation off
        return {
            "validation": {
                "auto_pass": False,
                "self_validation": False,
                "rating": None,
                "passed": False,
                "validators": [],
                "distribution": {},
                "threshold": threshold,
                **strict,
                "skipped": f"every validator's trust is below {reflexes.min_trust}: commands blocked",
            }
        }
    if not response:
        return {
            "validation": {
                "auto_pass": False,
                "self_validation": False,
                "rating": None,
                "passed": False,
                "validators": [],
                "distribution": {},
                "threshold": threshold,
                "skipped": "no output",
            }
        }
    at = (state.thread_id, state.tick)
    if not state.audience and waiting(services, state.incoming_note_ids, at):  # a free thought's: a human comes first
        return {
            "validation": {
                "auto_pass": False,
                "self_validation": False,
                "rating": None,
                "passed": False,
                "validators": [],
                "distribution": {},
                "threshold": threshold,
                **strict,
                "skipped": "not rated: a human's note waits (this thought's commands do not run)",
            }
        }
    main_id = state.llm.get("llm_id") or services.llms.primary_id
    self_validation = len(validators) == 1 and validators[0]["id"] == main_id
    ethics = services.persona.ethics
    language = services.settings.prompt_language
    prompt = i18n.text(VALIDATION_PROMPT, language).format(
        ethics=ethics_for_validators(ethics, language), response=response[-3000:]
    )
    tags = {"thread_id": state.thread_id, "tick": state.tick}

    def ask(entry: dict[str, Any]) -> Vote:
        name = "self" if self_validation else entry["id"]
        started = time.monotonic()
        try:
            gen = services.llms.generate(
                "validate",
                prompt=prompt,
                sampling=Sampling(temperature=0.1, max_tokens=60),
                json_schema=VALIDATION_SCHEMA,
                only=entry["id"],
                tags=tags,
            )
        except LLMUnavailable as exc:
            return {
                "LLM": name,
                "id": entry["id"],
                "rating": None,
                "comment": f"unavailable: {exc}"[:100],
                "trust": 0.0,
                "ms": _ms(started),
            }
        parsed = parse_rating(gen.text)
        if parsed is None:
            return {
                "LLM": name,
                "id": entry["id"],
                "rating": None,
                "comment": f"unparseable: {gen.text[:60]!r}",
                "trust": 0.0,
                "ms": _ms(started),
            }
        return {
            "LLM": name,
            "id": entry["id"],
            "rating": parsed[0],
            "comment": parsed[1] or ("self-eval" if self_validation else ""),
            "trust": float(entry.get("trust_score", 1.0)),
            "ms": _ms(started),
        }

    with ThreadPoolExecutor(max_workers=min(4, len(validators))) as pool:
        votes = list(pool.map(ask, validators))
    result = aggregate(votes, threshold=threshold, agreement_min=reflexes.agreement_min)
    excluded = drift_trust(services, votes, result["rating"], state.thread_id) if not self_validation else []
    report: ValidationReport = {
        **result,
        "auto_pass": False,
        "self_validation": self_validation,
        "validators": votes,
        "passed": result["rating"] >= threshold,
        "threshold": threshold,
        **strict,
    }
    rated = any(v.get("rating") is not None for v in votes)
    violation = rated and result["mean"] <= ethics.violation_policy.violation_at  # by the mean (validation.py)
    if violation:
        report["violation"] = ethics.violation_policy.on_violation == "block_commands_and_log"
        report["ethics"] = ethics.decision_record(result["mean"])
    elif rated and ethics.audit_json.record == "all":  # every rated thought's commands audited with the model
        report["ethics"] = ethics.decision_record(result["mean"])
    _record(services, state, report, violation=violation, excluded=excluded)
    return {"validation": report}


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 1)


def _record(
    services: Services, state: TickState, report: ValidationReport, *, violation: bool, excluded: list[str]
) -> None:
    """What the process log and the diary keep of this validation (module doc)."""
    ethics, reflexes = services.persona.ethics, services.settings.reflexes
    summary_due = bool(reflexes.validation_summary_every) and state.tick % reflexes.validation_summary_every == 0
    if not (violation or report.get("arbitration") or excluded or summary_due):
        return
    thread_id, tick, rating = state.thread_id, state.tick, report.get("rating")
    with services.managers.unit() as house:
        if violation:
            policy = ethics.violation_policy
            mean = report["mean"]
            house.loop.log(
                "ethics.violation",
                f"the validators rated my output {mean:+g} (at or below "
                f"{policy.violation_at:+g}); policy {policy.on_violation}",
                status="warning",
                thread_id=thread_id,
            )
            text = (
                f"Ethics decision at tick {tick}: my validators rated my output {mean:+g} (a violation at or "
                f"below {policy.violation_at:+g}); under my {ethics.model_type} ethics model and the "
                f"{policy.on_violation} policy its commands "
                + ("did not run." if report.get("violation") else "went to the usual consent gate.")
            )
            audit = ["audit"] if ethics.audit_json.diary else []
            entry = house.mesh.emergency_decision(text, tags=["ethics", *audit], thread_id=thread_id, tick=tick)
            if entry is not None:
                report["emergency_consensus"] = entry
            elif audit:
                house.diary.add(text, tags=["ethics", *audit], thread_id=thread_id, tick=tick)
        if report.get("arbitration"):
            votes = ", ".join(
                f"{v['LLM']} {v['rating']:+d} (trust {v['trust']:g})"
                for v in report["validators"]
                if v.get("rating") is not None
            )
            house.diary.add(
                f"My validators disagreed at tick {tick} ({votes}): {report['arbitration']}; rating {rating:+g}.",
                tags=["validation", "conflict"],
                thread_id=thread_id,
                tick=tick,
            )
        for line in excluded:
            house.diary.add(
                f"Validator drift at tick {tick}: {line}.", tags=["validation", "drift"], thread_id=thread_id, tick=tick
            )
        if summary_due:
            metrics = validator_metrics(
                house.thoughts.validations(METRICS_WINDOW), conflict_below=reflexes.agreement_min
            )
            if metrics["outputs"]:
                line = metrics_line(metrics)
                house.diary.add(
                    line[:1].upper() + line[1:] + ".", tags=["validation", "metrics"], thread_id=thread_id, tick=tick
                )
