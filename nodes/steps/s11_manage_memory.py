"""Step 11: memory upkeep after the thought is stored — abstracts (every N ticks, goal/task closed, context mode
changed, or asked for), the episodic summaries of past days, weeks and months, and the memory manager's
pruning pass on its schedule (nodes/upkeep.py).

A request is durable (a `config` row written with its cause), so an abstract asked for in one tick is built
in the next tick's upkeep even if the process died in between. Every decision goes to process_log.
"""

from __future__ import annotations

import logging
from typing import Any

from langgraph.runtime import Runtime

from llm import AllLLMsUnavailable
from managers.abstracts import AUTOMATIC_TRIGGERS, delivery
from memory.upkeep.abstracts import build_abstract, clear_request, pending_request, request_abstract
from nodes.attention import waiting
from nodes.context import CYCLE, AnimaContext, services_of
from nodes.state import MemoryUpkeep, TickState, UpkeepUpdate
from nodes.upkeep import episodes_checked, generator, prune_memory, write_episode

log = logging.getLogger(__name__)


def manage_memory(
    state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None
) -> UpkeepUpdate:
    services = services_of(runtime)
    thread_id, tick = state.thread_id, state.tick
    done: MemoryUpkeep = {}
    every = services.settings.memory.abstract_every
    with services.db.unit() as repos:
        repos.config.preload_memory_upkeep(thread_id)
        cycle = services.reads.get(
            thread_id, tick, CYCLE, lambda: services.managers.over(repos).loop.context_cycle(thread_id)
        )
        manual = delivery(cycle, services.settings) == "manual"
        if every > 0 and tick > 0 and tick % every == 0 and not manual and pending_request(repos, thread_id) is None:
            request_abstract(repos, thread_id, "every_n", f"tick {tick}")
        request = pending_request(repos, thread_id)
        if request and manual and request.get("trigger") in AUTOMATIC_TRIGGERS:  # manual: only what was asked for
            clear_request(repos, thread_id)
            repos.processes.add(
                "memory.abstract",
                f"abstract not made: abstracts are manual ({request.get('trigger')}: {request.get('what', '')})",
                status="ok",
                thread_id=thread_id,
            )
            request = None
        thread = services.reads.get(thread_id, tick, ("thread", thread_id), lambda: repos.threads.get(thread_id))
        child = thread is not None and thread.parent_id is not None
        episodes_due = not child and not episodes_checked(services, repos)
    every_pass = services.settings.memory_manager.every
    pass_due = not child and every_pass > 0 and tick > 0 and tick % every_pass == 0
    if (request or episodes_due or pass_due) and waiting(services, state.incoming_note_ids, (thread_id, tick)):
        # the upkeep asks models and reads the whole index: it waits (its requests kept) while a human does
        return {"memory_upkeep": {"manager": "held: a human's note waits"}}
    prefer = state.llm.get("llm_id")
    if request:
        generate = generator(services, "abstract", 320, thread_id=thread_id, tick=tick, prefer=prefer)
        try:
            with services.db.unit() as repos:
                row = build_abstract(
                    repos,
                    thread_id,
                    request.get("trigger", "manual"),
                    generate,
                    services.persona.display_name,
                    language=services.settings.prompt_language,
                )
                clear_request(repos, thread_id)
                message = (
                    f"abstract {row.id} '{row.title}' from {len(row.sources)} sources ({request.get('trigger')}: "
                    f"{request.get('what', '')})"
                    if row
                    else f"abstract skipped: too little new ({request.get('trigger')})"
                )
                repos.processes.add("memory.abstract", message, status="ok", thread_id=thread_id)
                done["abstract"] = row.id if row else None
        except AllLLMsUnavailable as exc:  # keep the request for a later tick
            log.warning("abstract postponed: %s", exc)
            done["abstract"] = "postponed"
        services.sync_memory()
    if episodes_due:  # memory is the persona's: Stelis children leave episodes and pruning to their root
        done.update(
            write_episode(
                services, thread_id, generator(services, "episode", 360, thread_id=thread_id, tick=tick, prefer=prefer)
            )
        )
    if not child:
        done.update(prune_memory(services, thread_id, tick))
    return {"memory_upkeep": done}
