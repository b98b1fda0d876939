"""Step 7 (HMP §7): cognitive & ethical validation by the registry's validator LLMs.

No validators → auto_pass. One validator that is the main LLM → self_validation. Otherwise every
validator answers the universal −3..+3 question; rating = Σ(rᵢ·trustᵢ)/Σtrustᵢ with the vote
distribution and per-validator records. A tie at zero with disagreeing votes is decided by the most
trusted validator; equal trust → rating 0 and commands blocked. Commands run only at rating ≥ threshold
(default +1) or auto_pass.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langgraph.runtime import Runtime

from llm import LLMUnavailable, Sampling
from nodes.context import AnimaContext, services_of
from nodes.prompts import VALIDATION_PROMPT, VALIDATION_SCHEMA
from nodes.state import TickState

log = logging.getLogger(__name__)
LOOSE_RATING = re.compile(r"([+-]?\d)\s*(?:--\s*(.*))?", re.DOTALL)


def parse_rating(text: str) -> tuple[int, str] | None:
    try:
        data = json.loads(text)
        if isinstance(data, dict) and isinstance(data.get("rating"), int) and -3 <= data["rating"] <= 3:
            return data["rating"], str(data.get("comment", ""))[:100]
    except json.JSONDecodeError:
        pass
    match = LOOSE_RATING.search(text or "")
    if match and -3 <= int(match.group(1)) <= 3:
        return int(match.group(1)), (match.group(2) or "").strip()[:100]
    return None


def aggregate(votes: list[dict[str, Any]]) -> dict[str, Any]:
    """Trust-weighted rating, distribution, and HMP's tie-break rules."""
    counted = [v for v in votes if v.get("rating") is not None]
    distribution = Counter(f"{v['rating']:+d}" if v["rating"] else "0" for v in counted)
    if not counted:
        return {"rating": 0.0, "distribution": {}, "tie_break": "no valid votes"}
    total_trust = sum(v["trust"] for v in counted) or 1.0
    rating = sum(v["rating"] * v["trust"] for v in counted) / total_trust
    tie_break = None
    if abs(rating) < 1e-9 and len({v["rating"] for v in counted}) > 1:
        top = max(v["trust"] for v in counted)
        leaders = [v for v in counted if v["trust"] == top]
        if len(leaders) == 1:
            rating, tie_break = float(leaders[0]["rating"]), f"decided by most trusted validator {leaders[0]['LLM']}"
        else:
            rating, tie_break = 0.0, "equal trust: rating 0, commands blocked"
    return {"rating": round(rating, 3), "distribution": dict(distribution), "tie_break": tie_break}


def validate_output(state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None) -> dict:
    svc = services_of(runtime)
    response = (state.get("response") or "").strip()
    threshold = svc.settings.validation_threshold
    configured = svc.llms.validators()
    validators = svc.llms.validators(min_trust=svc.settings.min_trust)
    if not configured:
        return {"validation": {"auto_pass": True, "self_validation": False, "rating": 0.0, "distribution": {},
                               "validators": [], "passed": True, "threshold": threshold}}
    if not validators:  # distrust must not turn validation off
        return {"validation": {"auto_pass": False, "self_validation": False, "rating": None, "passed": False,
                               "validators": [], "distribution": {}, "threshold": threshold,
                               "skipped": f"every validator's trust is below {svc.settings.min_trust}: commands blocked"}}
    if state.get("degraded") or not response:
        return {"validation": {"auto_pass": False, "self_validation": False, "rating": None, "passed": False,
                               "validators": [], "distribution": {}, "threshold": threshold, "skipped": "no output"}}
    main_id = (state.get("llm") or {}).get("llm_id") or svc.llms.primary_id
    self_validation = len(validators) == 1 and validators[0]["id"] == main_id
    principles = "; ".join((svc.persona.ethics or {}).get("principles") or []) or "none stated"
    prompt = VALIDATION_PROMPT.format(ethics=principles, response=response[-3000:])
    tags = {"thread_id": state["thread_id"], "tick": state["tick"]}

    def ask(entry: dict[str, Any]) -> dict[str, Any]:
        name = "self" if self_validation else entry["id"]
        try:
            gen = svc.llms.generate("validate", prompt=prompt, sampling=Sampling(temperature=0.1, max_tokens=60),
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
        drift_trust(svc, votes, result["rating"], state["thread_id"])
    return {"validation": {**result, "auto_pass": False, "self_validation": self_validation, "validators": votes,
                           "passed": result["rating"] >= threshold, "threshold": threshold}}


def drift_trust(svc, votes: list[dict[str, Any]], rating: float, thread_id: str) -> None:
    """A validator whose vote is 2 or more from the consensus loses `trust_drift`; one closer regains
    `trust_recovery` (up to 1; a trust configured above 1 is kept). Below `min_trust` it is excluded from validation (logged). Needs two votes."""
    counted = [v for v in votes if v.get("rating") is not None]
    if len(counted) < 2:
        return
    settings = svc.settings
    with svc.db.unit() as repos:
        for vote in counted:
            entry = svc.llms.entry(vote["id"])
            before = float(entry.get("trust_score", 1.0))
            disagrees = abs(vote["rating"] - rating) >= 2
            after = round(max(0.0, before - settings.trust_drift) if disagrees
                          else max(before, min(1.0, before + settings.trust_recovery)), 4)
            entry["trust_score"] = after
            vote["trust_after"] = after
            repos.llm_registry.upsert(vote["id"], trust_score=after)
            if before >= settings.min_trust > after:
                repos.processes.add("validation.trust", f"validator {vote['id']} excluded: trust {after:.2f} fell below "
                                    f"{settings.min_trust} (voted {vote['rating']:+d} against a consensus of {rating:+.2f})",
                                    status="warning", thread_id=thread_id)
