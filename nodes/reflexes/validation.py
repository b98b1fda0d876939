"""Cognitive & ethical validation (HMP): reading a validator's rating, the trust-weighted consensus with HMP's
tie-break rules, and the drift of a validator's trust away from (or back to) the consensus."""

from __future__ import annotations

import re
from collections import Counter

from typing_extensions import TypedDict

from llm.json_output import read_json
from nodes.context import Services
from nodes.state import Vote

LOOSE_RATING = re.compile(r"([+-]?\d)\s*(?:--\s*(.*))?", re.DOTALL)


def parse_rating(text: str) -> tuple[int, str] | None:
    data = read_json(text).value
    if isinstance(data, dict) and isinstance(data.get("rating"), int) and -3 <= data["rating"] <= 3:
        return data["rating"], str(data.get("comment", ""))[:100]
    match = LOOSE_RATING.search(text or "")
    if match and -3 <= int(match.group(1)) <= 3:
        return int(match.group(1)), (match.group(2) or "").strip()[:100]
    return None


class Tally(TypedDict):
    """The validators' votes, weighed: the rating, how the votes fell, and the tie-break when one decided."""
    rating: float
    distribution: dict[str, int]
    tie_break: str | None


def aggregate(votes: list[Vote]) -> Tally:
    """Trust-weighted rating, distribution, and HMP's tie-break rules."""
    counted = [(given, v) for v in votes if (given := v.get("rating")) is not None]
    distribution = Counter(f"{given:+d}" if given else "0" for given, _ in counted)
    if not counted:
        return {"rating": 0.0, "distribution": {}, "tie_break": "no valid votes"}
    total_trust = sum(v["trust"] for _, v in counted) or 1.0
    rating = sum(vote * v["trust"] for vote, v in counted) / total_trust
    tie_break = None
    if abs(rating) < 1e-9 and len({vote for vote, _ in counted}) > 1:
        top = max(v["trust"] for _, v in counted)
        leaders = [(vote, v) for vote, v in counted if v["trust"] == top]
        if len(leaders) == 1:
            rating, tie_break = float(leaders[0][0]), f"decided by most trusted validator {leaders[0][1]['LLM']}"
        else:
            rating, tie_break = 0.0, "equal trust: rating 0, commands blocked"
    return {"rating": round(rating, 3), "distribution": dict(distribution), "tie_break": tie_break}


def drift_trust(services: Services, votes: list[Vote], rating: float, thread_id: str) -> None:
    """A validator whose vote is 2 or more from the consensus loses `trust_drift`; one closer regains
    `trust_recovery` (up to 1; a trust configured above 1 is kept). Below `min_trust` it is excluded from validation (logged). Needs two votes."""
    counted = [(given, v) for v in votes if (given := v.get("rating")) is not None]
    if len(counted) < 2:
        return
    settings = services.settings.reflexes
    with services.db.unit() as repos:
        for given, vote in counted:
            entry = services.llms.entry(vote["id"])
            before = float(entry.get("trust_score", 1.0))
            disagrees = abs(given - rating) >= 2
            after = round(max(0.0, before - settings.trust_drift) if disagrees
                          else max(before, min(1.0, before + settings.trust_recovery)), 4)
            entry["trust_score"] = after
            vote["trust_after"] = after
            repos.llm_registry.upsert(vote["id"], trust_score=after)
            if before >= settings.min_trust > after:
                repos.processes.add("validation.trust", f"validator {vote['id']} excluded: trust {after:.2f} fell below "
                                    f"{settings.min_trust} (voted {given:+d} against a consensus of {rating:+.2f})",
                                    status="warning", thread_id=thread_id)
