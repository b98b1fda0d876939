"""Memory upkeep after the thought is stored: abstracts (every N ticks, goal/task closed, context mode changed,
or asked for), the episodic summaries of past days, weeks and months (memory/episodes.py), and the memory
manager's pruning pass (memory/manager.py) on its schedule.

A request is durable (a `config` row written with its cause), so an abstract asked for in one tick is built
in the next tick's upkeep even if the process died in between. Every decision goes to process_log.
"""

from __future__ import annotations

import logging
from typing import Any

from langgraph.runtime import Runtime

from llm import AllLLMsUnavailable, Sampling
from memory.abstracts import build_abstract, clear_request, pending_request, request_abstract
from memory.episodes import build_episode, next_due, persona_zone
from memory.manager import ManagerConfig, run_pass
from memory.settings import persona_setting
from nodes.context import AnimaContext, services_of
from nodes.state import TickState

log = logging.getLogger(__name__)
DEFAULT_ABSTRACT_EVERY = 20
EPISODES_CHECKED = "memory/episodes_checked_on"  # the local date on which nothing more was missing


def manage_memory(state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None) -> dict:
    svc = services_of(runtime)
    thread_id, tick = state["thread_id"], state["tick"]
    if state.get("degraded"):
        return {"memory_upkeep": {}}
    done: dict[str, Any] = {}
    with svc.db.unit() as repos:
        every = int(persona_setting(repos, svc.persona.config, "memory.abstract_every", DEFAULT_ABSTRACT_EVERY))
        if every > 0 and tick > 0 and tick % every == 0 and pending_request(repos, thread_id) is None:
            request_abstract(repos, thread_id, "every_n", f"tick {tick}")
        request = pending_request(repos, thread_id)
    if request:
        generate = _generator(svc, state, "abstract", 320)
        try:
            with svc.db.unit() as repos:
                row = build_abstract(repos, thread_id, request.get("trigger", "manual"), generate, svc.persona.display_name)
                clear_request(repos, thread_id)
                message = (f"abstract {row.id} '{row.title}' from {len(row.sources)} sources ({request.get('trigger')}: "
                           f"{request.get('what', '')})" if row else f"abstract skipped: too little new ({request.get('trigger')})")
                repos.processes.add("memory.abstract", message, status="ok", thread_id=thread_id)
                done["abstract"] = row.id if row else None
        except AllLLMsUnavailable as exc:  # keep the request for a later tick
            log.warning("abstract postponed: %s", exc)
            done["abstract"] = "postponed"
        svc.sync_memory()
    with svc.db.unit() as repos:
        child = _is_child(repos, thread_id)
    if not child:  # memory is the persona's: Stelis children leave episodes and pruning to their root
        done.update(write_episode(svc, thread_id, _generator(svc, state, "episode", 360)))
        done.update(prune_memory(svc, thread_id, tick))
    return {"memory_upkeep": done}  # also clears the last tick's report


def _generator(svc, state: TickState, purpose: str, max_tokens: int):
    def generate(prompt: str, schema: dict[str, Any]) -> str:
        return svc.llms.generate(purpose, prompt=prompt, json_schema=schema,
                                 sampling=Sampling(temperature=0.3, max_tokens=max_tokens),
                                 prefer=(state.get("llm") or {}).get("llm_id"),
                                 tags={"thread_id": state["thread_id"], "tick": state["tick"]}).text
    return generate


def _is_child(repos, thread_id: str) -> bool:
    thread = repos.threads.get(thread_id)
    return thread is not None and thread.parent_id is not None


def write_episode(svc, thread_id: str, generate) -> dict[str, Any]:
    """The oldest missing day/week/month summary (memory/episodes.py), one per tick, looked for until none is
    missing on this local day."""
    with svc.db.unit() as repos:
        try:
            zone = persona_zone(svc.persona.config)
        except ValueError as exc:
            if repos.config.get(EPISODES_CHECKED) != svc.clock().date().isoformat():  # reported once a day
                repos.config.set(EPISODES_CHECKED, svc.clock().date().isoformat())
                repos.processes.add("memory.episode", f"not built: {exc}", status="error", thread_id=thread_id)
            return {"episode": f"error: {exc}"}
        today = svc.clock().astimezone(zone).date()
        if repos.config.get(EPISODES_CHECKED) == today.isoformat():
            return {}
        backfill = int(persona_setting(repos, svc.persona.config, "memory.episode_backfill_days", 7))
        period = next_due(repos, today, zone, backfill)
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


def prune_memory(svc, thread_id: str, tick: int) -> dict[str, Any]:
    """The memory manager's pass, every `memory_manager.every` ticks; the settings are read only when it is due."""
    with svc.db.unit() as repos:
        try:
            every = int(persona_setting(repos, svc.persona.config, "memory_manager.every", ManagerConfig.every))
            if every <= 0 or tick <= 0 or tick % every:
                return {}
            config = ManagerConfig.load(repos, svc.persona.config)
        except (TypeError, ValueError) as exc:
            repos.processes.add("memory.manager", f"not run: bad memory_manager settings: {exc}", status="error",
                                thread_id=thread_id)
            return {"manager": f"error: {exc}"}
    svc.sync_memory()  # the pass compares against the index: it must hold everything written so far
    with svc.db.unit() as repos:
        report = run_pass(repos, svc.memory, config, thread_id=thread_id)
    svc.sync_memory()
    return {"manager": {"assessed": report.assessed, "archived": len(report.archived),
                        "kept": len(report.decisions) - len(report.archived)}}
