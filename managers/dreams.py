"""Dreams (the dream playbook, nodes/dreaming.py): what a dream gathers — its level and material, and the provenance
of what it read that was written from untrusted text — and how its output is written, once per run (a killed dream
resumes and never applies twice), keeping that provenance (memory/taint.py)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from managers.records import Record, read
from memory import provenance
from memory.repositories.config import DREAM_APPLIED_KEY
from memory.taint import tainted
from persona.dreaming import apply_dream as apply_dream_output
from persona.dreaming import choose_level, gather_material

if TYPE_CHECKING:
    from managers import Managers


class AppliedDream(Record):
    """The last dream run whose answer was written (the `dreams/last_applied` key): a resumed run never writes twice."""

    run: str | None = None
    outcome: dict[str, Any] = {}


class DreamManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    def gather(self, requested_level: int, now: datetime) -> tuple[int, dict[str, Any]]:
        """(level, material): the level asked for (1–3) or the calendar's, its material, and `sources` — what it read
        that was written from untrusted text; the attempt is recorded."""
        settings = self.house.deps.settings
        level = requested_level if requested_level in (1, 2, 3) else choose_level(self.repos, now, settings.dreaming)
        material = gather_material(self.repos, self.house.deps.recall(), level, now, settings.zone(), settings.dreaming)
        found = self.repos.taints.of_keys((str(tier), str(ref)) for tier, ref in material.get("read") or [])
        material["sources"] = provenance.merged(
            *(
                provenance.through(sources, f"{provenance.via_of(tier, ref)}, in a dream")
                for (tier, ref), sources in found.items()
            )
        )
        self.repos.config.last_dream_attempt = now.isoformat()
        return level, material

    def apply(
        self,
        data: Any,
        *,
        level: int,
        material: dict[str, Any],
        started: datetime,
        run: str | None,
        thread_id: str,
        tick: int,
        describe: Any,
    ) -> dict[str, Any]:
        """The dream's output written (what it writes keeps its material's provenance), once for `run`; the outcome
        (the one already applied, when this run's was)."""
        done = read(AppliedDream, self.repos.config.last_applied_dream, DREAM_APPLIED_KEY)
        if done.run == run:  # this step already committed before a kill: do not apply the dream twice
            return dict(done.outcome)
        with tainted(self.repos.session, list(material.get("sources") or []), thread_id=thread_id, tick=tick):
            outcome = apply_dream_output(
                self.repos,
                data,
                level=level,
                now=started,
                topic=material["topic"],
                newest_message_id=int(material["newest_message_id"]),
            )
        result = outcome.as_dict()
        self.repos.config.last_applied_dream = AppliedDream(run=run, outcome=result).stored()
        self.repos.processes.add(
            "dream", describe(result), status="close" if outcome.status == "applied" else "warning", thread_id=thread_id
        )
        return result

    def summaries_checked(self, today: str) -> bool:
        """True when today's look for missing summaries found none (nothing to do until tomorrow or a dream)."""
        return self.repos.config.episodes_checked_on == today

    def no_summary_missing(self, today: str) -> None:
        self.repos.config.episodes_checked_on = today

    def look_for_missing_summaries(self) -> None:
        """Sleep is when the days get their summaries: look again even if today's upkeep found nothing missing."""
        self.repos.config.episodes_checked_on = None


__all__ = ["DreamManager"]
