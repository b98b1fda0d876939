"""Memory upkeep shared by the tick (steps/s11_manage_memory.py) and the dream (dreaming.py): the model calls
behind abstracts and episodic summaries, and the memory manager's pruning pass on its schedule.

Every decision goes to process_log; a missing model postpones the work, it never fails the tick.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from llm import AllLLMsUnavailable, Sampling
from llm.json_output import json_object
from memory.upkeep.episodes import build_episode, next_due
from memory.upkeep.manager import run_pass
from nodes.context import Services

log = logging.getLogger(__name__)
EPISODES_CHECKED = "memory/episodes_checked_on"  # the local date on which nothing more was missing


def generator(svc: Services, purpose: str, max_tokens: int, *, thread_id: str, tick: int,
              prefer: str | None = None) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    """A structured model call for a memory builder: prompt + JSON schema → the answer's JSON object ({} when the
    answer holds none; a cut-off answer keeps its complete fields)."""
    def generate(prompt: str, schema: dict[str, Any]) -> dict[str, Any]:
        return json_object(svc.llms.generate(purpose, prompt=prompt, json_schema=schema,
                                             sampling=Sampling(temperature=0.3, max_tokens=max_tokens), prefer=prefer,
                                             tags={"thread_id": thread_id, "tick": tick}).text)
    return generate


def episodes_checked(svc: Services, repos) -> bool:
    """True when today's look for missing summaries found none (nothing to do until tomorrow or the next dream)."""
    return repos.config.get(EPISODES_CHECKED) == svc.clock().astimezone(svc.settings.zone()).date().isoformat()


def write_episode(svc: Services, thread_id: str, generate: Callable[[str, dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """The oldest missing day/week/month summary (memory/episodes.py), one per call, looked for until none is
    missing on this local day."""
    zone = svc.settings.zone()
    today = svc.clock().astimezone(zone).date()
    with svc.db.unit() as repos:
        if episodes_checked(svc, repos):
            return {}
        period = next_due(repos, today, zone, svc.settings.memory.episode_backfill_days)
        if period is None:
            repos.config.set(EPISODES_CHECKED, today.isoformat())
            return {}
    try:
        with svc.db.unit() as repos:
            row = build_episode(repos, period, zone, generate, svc.persona.display_name)
            if row is not None:
                repos.processes.add("memory.episode", f"{period.describe()} summarised from {len(row.sources)} sources",
                                    status="close", thread_id=thread_id)
    except AllLLMsUnavailable as exc:
        log.warning("episode postponed: %s", exc)
        return {"episode": "postponed"}
    svc.sync_memory()
    return {"episode": f"{period.kind} {period.start}"}


def prune_memory(svc: Services, thread_id: str, tick: int) -> dict[str, Any]:
    """The memory manager's pass, every `memory_manager.every` ticks."""
    manager = svc.settings.memory_manager
    if manager.every <= 0 or tick <= 0 or tick % manager.every:
        return {}
    svc.sync_memory()  # the pass compares against the index: it must hold everything written so far
    with svc.db.unit() as repos:
        report = run_pass(repos, svc.memory, manager, thread_id=thread_id)
    svc.sync_memory()
    return {"manager": {"assessed": report.assessed, "archived": len(report.archived),
                        "kept": len(report.decisions) - len(report.archived)}}
