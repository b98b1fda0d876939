"""Peers' trust (HMP's reputation): evaluations −1…+1 of a peer, decaying with a half-life, from three sources —
this persona's own (`evaluator="local"`: what the owner or the persona judged, and the door's penalties for forged,
replayed, expired, oversized, flooding containers), and the signed `evaluation` containers of other peers, weighed
by how much this persona trusts those evaluators (only its own evaluations of them count there: no recursion, so a
clique of peers cannot vouch itself up).

    trust(peer) = tanh( Σ  score_i · decay(age_i) · weight(evaluator_i) )      decay = 0.5 ** (age / half-life)
    weight(local) = 1;  weight(peer e) = 0.5 · max(0, direct_trust(e))

Acceptance and routing are weighted by it (managers/mesh.py refuses a peer below `mesh.min_trust`; `rank()` orders
peers for routing). A blocklisted peer is refused whatever its trust. The validators' drift: how far each evaluator's
evaluations stray from the others' on the same subject, recently compared with before."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from memory.models import MeshBlock, MeshEvaluation

if TYPE_CHECKING:
    from managers import Managers

LOCAL = "local"  # the evaluator name of this persona's own evaluations
PENALTY = -0.3  # one refused container's evaluation of its sender (three of them take an unknown peer below -0.5)


@dataclass(frozen=True)
class PeerTrust:
    did: str
    trust: float
    evaluations: int
    refusals: int
    blocked: bool


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


class ReputationManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repo = house.repos.trust

    @property
    def half_life(self) -> timedelta:
        return timedelta(days=self.house.deps.settings.mesh.trust_half_life_days)

    def _decay(self, at: datetime, now: datetime) -> float:
        age = max(0.0, (now - _aware(at)).total_seconds())
        return float(0.5 ** (age / self.half_life.total_seconds()))

    # ---- writing --------------------------------------------------------------------------------------------------
    def evaluate(
        self,
        subject: str,
        score: float,
        *,
        evaluator: str = LOCAL,
        about: str | None = None,
        reason: str = "",
        container_id: str | None = None,
        at: datetime | None = None,
    ) -> MeshEvaluation:
        """Record one evaluation (score clamped to −1…+1). A peer's evaluation of itself is ignored (returned, not
        stored) — a peer cannot raise its own trust."""
        row = MeshEvaluation(
            evaluator=evaluator,
            subject=subject,
            score=max(-1.0, min(1.0, float(score))),
            about=about,
            reason=reason[:200],
            container_id=container_id,
            at=at or self.house.deps.clock(),
        )
        if evaluator != subject:
            self.repo.add(row)
        return row

    def penalise(self, subject: str, reason: str, *, about: str | None = None) -> None:
        self.evaluate(subject, PENALTY, reason=f"refused: {reason}", about=about)

    def block(self, did: str, reason: str = "") -> None:
        self.repo.block(did, reason, self.house.deps.clock())

    def unblock(self, did: str) -> bool:
        return self.repo.unblock(did)

    def is_blocked(self, did: str) -> bool:
        return self.repo.blocked(did)

    def blocklist(self) -> list[MeshBlock]:
        return self.repo.blocklist()

    # ---- reading --------------------------------------------------------------------------------------------------
    def _evaluations(self, subject: str, before: datetime | None = None) -> list[MeshEvaluation]:
        return self.repo.of(subject, before)

    def direct_trust(self, did: str, *, now: datetime | None = None) -> float:
        """Trust from this persona's own evaluations only."""
        now = now or self.house.deps.clock()
        total = sum(e.score * self._decay(e.at, now) for e in self._evaluations(did, now) if e.evaluator == LOCAL)
        return math.tanh(total)

    def trust(self, did: str, *, now: datetime | None = None) -> float:
        """−1…+1; 0.0 for a peer nobody evaluated."""
        now = now or self.house.deps.clock()
        weights: dict[str, float] = {LOCAL: 1.0}
        total = 0.0
        for evaluation in self._evaluations(did, now):
            if evaluation.evaluator not in weights:
                weights[evaluation.evaluator] = 0.5 * max(0.0, self.direct_trust(evaluation.evaluator, now=now))
            total += evaluation.score * self._decay(evaluation.at, now) * weights[evaluation.evaluator]
        return math.tanh(total)

    def trust_history(
        self, did: str, *, points: int = 20, since: datetime | None = None
    ) -> list[tuple[datetime, float]]:
        """Trust over time: `points` moments from the first evaluation (or `since`) to now; [] for a peer nobody
        evaluated (its 0.0 is "unknown", not a measured trust)."""
        now = self.house.deps.clock()
        first = self.repo.first_at(did)
        if first is None and since is None:
            return []
        start = _aware(since or first or now)
        step = (now - start) / max(1, points - 1)
        return [(start + step * i, self.trust(did, now=start + step * i)) for i in range(points)]

    def rank(self, dids: list[str]) -> list[str]:
        """Peers for routing: the most trusted first; blocklisted ones left out."""
        return sorted((d for d in dids if not self.is_blocked(d)), key=lambda d: -self.trust(d))

    def known(self) -> list[str]:
        subjects = set(self.repo.subjects()) | set(self.house.repos.mesh.refused_by_sender())
        subjects |= {b.did for b in self.blocklist()}
        return sorted(subjects - {LOCAL})

    def table(self) -> list[PeerTrust]:
        """Every known peer's trust, evaluations, refusals, blocked."""
        evaluations, refusals = self.repo.subjects(), self.house.repos.mesh.refused_by_sender()
        return [
            PeerTrust(
                did, round(self.trust(did), 4), evaluations.get(did, 0), refusals.get(did, 0), self.is_blocked(did)
            )
            for did in self.known()
        ]

    def drift(self, *, window: int = 20) -> dict[str, dict[str, float]]:
        """Each evaluator's mean distance from the other evaluators' mean on the same subject/about, over its last
        `window` evaluations (`recent`) and the `window` before them (`before`); `drift` = recent − before (> 0: it
        strays more than it did)."""
        rows = self.repo.all()
        groups: dict[tuple[str, str], list[MeshEvaluation]] = defaultdict(list)
        for row in rows:
            groups[(row.subject, row.about or "")].append(row)
        deviations: dict[str, list[float]] = defaultdict(list)
        for group in groups.values():
            for row in group:
                others = [o.score for o in group if o.evaluator != row.evaluator]
                if others:
                    deviations[row.evaluator].append(abs(row.score - sum(others) / len(others)))
        out: dict[str, dict[str, float]] = {}
        for evaluator, values in deviations.items():
            recent, before = values[-window:], values[-2 * window : -window]
            mean_recent = sum(recent) / len(recent)
            mean_before = sum(before) / len(before) if before else mean_recent
            out[evaluator] = {
                "recent": round(mean_recent, 4),
                "before": round(mean_before, 4),
                "drift": round(mean_recent - mean_before, 4),
                "evaluations": float(len(values)),
            }
        return out


__all__ = ["LOCAL", "PENALTY", "PeerTrust", "ReputationManager"]
