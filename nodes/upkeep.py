"""Memory upkeep shared by the tick (steps/s11_manage_memory.py) and the dream (dreaming.py): the model calls
behind abstracts and episodic summaries, and the memory manager's pruning pass on its schedule.

Every decision goes to process_log; a missing model postpones the work, it never fails the tick.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from llm import AllLLMsUnavailable, Sampling
from llm.json_output import json_object
from memory.upkeep.episodes import build_episode, next_due
from memory.upkeep.manager import run_pass
from nodes.context import Services
from nodes.state import MemoryUpkeep

if TYPE_CHECKING:
    from memory import Repos

log = logging.getLogger(__name__)


def generator(
    services: Services, purpose: str, max_tokens: int, *, thread_id: str, tick: int, prefer: str | None = None
) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    """A structured model call for a memory builder: prompt + JSON schema → the answer's JSON object ({} when the
    answer holds none; a cut-off answer keeps its complete fields)."""

    def generate(prompt: str, schema: dict[str, Any]) -> dict[str, Any]:
        return json_object(
            services.llms.generate(
                purpose,
                prompt=prompt,
                json_schema=schema,
                sampling=Sampling(temperature=0.3, max_tokens=max_tokens),
                prefer=prefer,
                tags={"thread_id": thread_id, "tick": tick},
            ).text
        )

    return generate


def today(services: Services) -> str:
    """The persona's date now, in its time zone (ISO)."""
    return services.clock().astimezone(services.settings.zone()).date().isoformat()


def episodes_checked(services: Services, repos: Repos) -> bool:
    """True when today's look for missing summaries found none (nothing to do until tomorrow or the next dream)."""
    return services.managers.over(repos).dreams.summaries_checked(today(services))


def write_episode(
    services: Services, thread_id: str, generate: Callable[[str, dict[str, Any]], dict[str, Any]]
) -> MemoryUpkeep:
    """The oldest missing day/week/month summary (memory/episodes.py), one per call, looked for until none is
    missing on this local day."""
    zone = services.settings.zone()
    today = services.clock().astimezone(zone).date()
    with services.db.unit() as repos:
        if episodes_checked(services, repos):
            return {}
        period = next_due(repos, today, zone, services.settings.memory.episode_backfill_days)
        if period is None:
            services.managers.over(repos).dreams.no_summary_missing(today.isoformat())
            return {}
    try:
        with services.db.unit() as repos:
            row = build_episode(
                repos, period, zone, generate, services.persona.display_name, services.settings.prompt_language
            )
            if row is not None:
                services.managers.over(repos).loop.log(
                    "memory.episode",
                    f"{period.describe()} summarised from {len(row.sources)} sources",
                    status="close",
                    thread_id=thread_id,
                )
    except AllLLMsUnavailable as exc:
        log.warning("episode postponed: %s", exc)
        return {"episode": "postponed"}
    services.sync_memory()
    return {"episode": f"{period.kind} {period.start}"}


def prune_memory(services: Services, thread_id: str, tick: int) -> MemoryUpkeep:
    """The memory manager's pass, every `memory_manager.every` ticks."""
    manager = services.settings.memory_manager
    if manager.every <= 0 or tick <= 0 or tick % manager.every:
        return {}
    services.sync_memory()  # the pass compares against the index: it must hold everything written so far
    with services.db.unit() as repos:
        report = run_pass(repos, services.memory, manager, thread_id=thread_id)
    services.sync_memory()
    return {
        "manager": {
            "assessed": report.assessed,
            "archived": len(report.archived),
            "kept": len(report.decisions) - len(report.archived),
        }
    }
