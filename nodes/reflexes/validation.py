"""Cognitive & ethical validation (HMP): reading a validator's rating, the trust-weighted consensus with HMP's
tie-break rules, the arbitration by weighted majority when the validators disagree, the drift of a validator's trust
away from (or back to) the consensus, and the validators' metrics.

Agreement (HMP's "accuracy": the validators' consistency) is 1 − the trust-weighted mean distance of the votes from
their weighted mean, over 3: +2 and +2 agree fully (1.0), +2 and −1 half (0.5), +3 and −3 not at all (0). Below
`reflexes.agreement_min` the mean is not trusted to say what the validators think ("if the mean is unstable", HMP):
the votes are arbitrated by weighted majority — those at or above the threshold against those below, each side
weighing its validators' trust; the heavier side's trust-weighted mean is the rating (so it passes exactly when the
majority approved), an exact tie goes to the most trusted validator's side, and equal trust to rating 0, commands
blocked (HMP's tie-break rules). An ethics violation is still judged by the plain weighted mean (`mean`): the
majority decides what runs, not how harmful the validators found the output.

Metrics over the last outputs (`validator_metrics`): coverage — the share that got at least one validator's vote;
accuracy — the mean agreement of those with two or more votes; response time of each validator (mean and slowest,
in ms); drift — each validator's mean signed distance from the consensus and its trust then and now."""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from typing_extensions import TypedDict

import i18n
from llm.json_output import read_json
from nodes.context import Services
from nodes.reflexes.prompts import VALIDATOR_ETHICS_MODEL
from nodes.state import Vote
from persona.ethics import Ethics

LOOSE_RATING = re.compile(r"([+-]?\d)\s*(?:--\s*(.*))?", re.DOTALL)


def parse_rating(text: str) -> tuple[int, str] | None:
    data = read_json(text).value
    if isinstance(data, dict) and isinstance(data.get("rating"), int) and -3 <= data["rating"] <= 3:
        return data["rating"], str(data.get("comment", ""))[:100]
    match = LOOSE_RATING.search(text or "")
    if match and -3 <= int(match.group(1)) <= 3:
        return int(match.group(1)), (match.group(2) or "").strip()[:100]
    return None


def ethics_for_validators(ethics: Ethics, language: str) -> str:
    """What the validators' question names as the ethics in force: the principles, and the model and its weights
    when ethics.yaml states them."""
    principles = "; ".join(ethics.principles) or "none stated"
    if not ethics.stated:
        return principles
    model = i18n.text(VALIDATOR_ETHICS_MODEL, language).format(
        model=ethics.model_type, weights=ethics.weights_text() or "—"
    )
    return f"{principles}; {model}"


class Tally(TypedDict):
    """The validators' votes, weighed: the rating, how the votes fell, their agreement, and the tie-break or the
    arbitration when one decided (`mean`: HMP's trust-weighted mean, whatever decided — what an ethics violation is
    judged by)."""

    rating: float
    mean: float
    distribution: dict[str, int]
    tie_break: str | None
    agreement: float | None
    arbitration: str | None


def _counted(votes: Iterable[Mapping[str, Any]]) -> list[tuple[int, float, str]]:
    """(rating, trust, name) of the votes that gave a rating."""
    return [
        (int(given), float(v.get("trust") or 0.0), str(v.get("LLM") or v.get("id") or "?"))
        for v in votes
        if (given := v.get("rating")) is not None
    ]


def agreement(votes: Iterable[Mapping[str, Any]]) -> float | None:
    """How far the votes agree (module doc), 0..1; None under two votes or with no trust to weigh them."""
    counted = _counted(votes)
    total = sum(trust for _, trust, _ in counted)
    if len(counted) < 2 or total <= 0:
        return None
    mean = sum(vote * trust for vote, trust, _ in counted) / total
    spread = sum(abs(vote - mean) * trust for vote, trust, _ in counted) / total
    return round(max(0.0, 1 - spread / 3), 3)


def _majority(counted: list[tuple[int, float, str]], threshold: float) -> tuple[float, str]:
    """HMP's "majority with weights": approval (at or above the threshold) against refusal, by trust."""
    approve = [(v, t) for v, t, _ in counted if v >= threshold]
    refuse = [(v, t) for v, t, _ in counted if v < threshold]
    weight_for, weight_against = sum(t for _, t in approve), sum(t for _, t in refuse)
    side = approve if weight_for > weight_against else refuse if weight_against > weight_for else None
    how = f"weighted majority: {weight_for:g} for, {weight_against:g} against (threshold {threshold:+g})"
    if side is None:
        top = max(t for _, t, _ in counted)
        leaders = [(v, n) for v, t, n in counted if t == top]
        if len({v >= threshold for v, _ in leaders}) > 1:
            return 0.0, how + "; a tie between equally trusted validators: rating 0, commands blocked"
        side = approve if leaders[0][0] >= threshold else refuse
        how += f"; a tie, decided by the most trusted validator {leaders[0][1]}"
    weight = sum(t for _, t in side)
    return sum(v * t for v, t in side) / weight, how


def aggregate(votes: list[Vote], *, threshold: float = 1.0, agreement_min: float = 0.0) -> Tally:
    """Trust-weighted rating, distribution, and HMP's tie-break rules; the weighted majority when the votes agree
    less than `agreement_min` (0: never)."""
    counted = [(given, v) for v in votes if (given := v.get("rating")) is not None]
    distribution = Counter(f"{given:+d}" if given else "0" for given, _ in counted)
    if not counted:
        return {
            "rating": 0.0,
            "mean": 0.0,
            "distribution": {},
            "tie_break": "no valid votes",
            "agreement": None,
            "arbitration": None,
        }
    total_trust = sum(v["trust"] for _, v in counted) or 1.0
    mean = round(sum(vote * v["trust"] for vote, v in counted) / total_trust, 3)
    agreed = agreement(votes)
    if agreed is not None and agreed < agreement_min:
        rating, how = _majority(_counted(votes), threshold)
        return {
            "rating": round(rating, 3),
            "mean": mean,
            "distribution": dict(distribution),
            "tie_break": None,
            "agreement": agreed,
            "arbitration": f"agreement {agreed:g} < {agreement_min:g}: {how}",
        }
    rating = mean
    tie_break = None
    if abs(rating) < 1e-9 and len({vote for vote, _ in counted}) > 1:
        top = max(v["trust"] for _, v in counted)
        leaders = [(vote, v) for vote, v in counted if v["trust"] == top]
        if len(leaders) == 1:
            rating, tie_break = float(leaders[0][0]), f"decided by most trusted validator {leaders[0][1]['LLM']}"
        else:
            rating, tie_break = 0.0, "equal trust: rating 0, commands blocked"
    return {
        "rating": round(rating, 3),
        "mean": mean,
        "distribution": dict(distribution),
        "tie_break": tie_break,
        "agreement": agreed,
        "arbitration": None,
    }


def drift_trust(services: Services, votes: list[Vote], rating: float, thread_id: str) -> list[str]:
    """A validator whose vote is 2 or more from the consensus loses `trust_drift`; one closer regains
    `trust_recovery` (up to 1; a trust configured above 1 is kept). Below `min_trust` it is excluded from validation
    (logged; the lines saying so are returned, for the diary). Needs two votes."""
    counted = [(given, v) for v in votes if (given := v.get("rating")) is not None]
    excluded: list[str] = []
    if len(counted) < 2:
        return excluded
    settings = services.settings.reflexes
    with services.managers.unit() as house:
        for given, vote in counted:
            entry = services.llms.entry(vote["id"])
            before = float(entry.get("trust_score", 1.0))
            disagrees = abs(given - rating) >= 2
            after = round(
                max(0.0, before - settings.trust_drift)
                if disagrees
                else max(before, min(1.0, before + settings.trust_recovery)),
                4,
            )
            entry["trust_score"] = after
            vote["trust_after"] = after
            house.models.set_trust(vote["id"], after)
            if before >= settings.min_trust > after:
                line = (
                    f"validator {vote['id']} excluded: trust {after:.2f} fell below {settings.min_trust} (voted "
                    f"{given:+d} against a consensus of {rating:+.2f})"
                )
                house.loop.log("validation.trust", line, status="warning", thread_id=thread_id)
                excluded.append(line)
    return excluded


def validator_metrics(rows: Iterable[Any], *, conflict_below: float = 0.5) -> dict[str, Any]:
    """Coverage, accuracy, response time and drift (module doc) over validated outputs: rows of
    `repos.messages.validations` (rating, auto_pass, self_validation, validators); a conflict is an output whose
    votes agreed less than `conflict_below`."""
    outputs = covered = 0
    agreements: list[float] = []
    times: dict[str, list[float]] = defaultdict(list)
    distance: dict[str, list[float]] = defaultdict(list)
    trust: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        outputs += 1
        votes = [v for v in row.validators or [] if isinstance(v, Mapping)]
        counted = [v for v in votes if v.get("rating") is not None]
        covered += bool(counted)
        if (agreed := agreement(counted)) is not None:
            agreements.append(agreed)
        for vote in votes:
            name = str(vote.get("id") or vote.get("LLM") or "?")
            if isinstance(vote.get("ms"), (int, float)):
                times[name].append(float(vote["ms"]))
            if vote.get("rating") is not None and row.rating is not None and not row.self_validation:
                distance[name].append(float(vote["rating"]) - float(row.rating))
            if isinstance(vote.get("trust_after", vote.get("trust")), (int, float)) and vote.get("rating") is not None:
                trust[name].append(float(vote.get("trust_after", vote["trust"])))
    names = sorted(set(times) | set(distance) | set(trust))
    return {
        "outputs": outputs,
        "coverage": round(covered / outputs, 3) if outputs else None,
        "accuracy": round(statistics.fmean(agreements), 3) if agreements else None,
        "conflicts": sum(1 for a in agreements if a < conflict_below),
        "validators": {
            name: {
                "response_ms": {"mean": round(statistics.fmean(times[name]), 1), "max": round(max(times[name]), 1)}
                if times[name]
                else None,
                "drift": round(statistics.fmean(distance[name]), 3) if distance[name] else None,
                "trust": {"first": trust[name][0], "last": trust[name][-1]} if trust[name] else None,
            }
            for name in names
        },
    }


def metrics_line(metrics: Mapping[str, Any]) -> str:
    """The metrics in one diary line."""
    parts = [
        f"validation over my last {metrics['outputs']} outputs: coverage "
        f"{_share(metrics.get('coverage'))}, accuracy (agreement) {_share(metrics.get('accuracy'))}, "
        f"{metrics.get('conflicts', 0)} conflict(s)"
    ]
    for name, m in (metrics.get("validators") or {}).items():
        said = (
            [f"{m['response_ms']['mean']:g} ms mean, {m['response_ms']['max']:g} ms slowest"]
            if m.get("response_ms")
            else []
        )
        if m.get("drift") is not None:
            said.append(f"drift {m['drift']:+.2f} from the consensus")
        if m.get("trust"):
            said.append(f"trust {m['trust']['first']:.2f} → {m['trust']['last']:.2f}")
        parts.append(f"{name}: {', '.join(said) or 'no votes'}")
    return "; ".join(parts)


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"
