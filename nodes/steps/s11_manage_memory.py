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
from managers.abstracts import delivery
from nodes.attention import waiting
from nodes.context import CYCLE, AnimaContext, services_of
from nodes.state import MemoryUpkeep, TickState, UpkeepUpdate
from nodes.upkeep import generator, prune_memory, today, write_episode

log = logging.getLogger(__name__)


def manage_memory(
    state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None
) -> UpkeepUpdate:
    services = services_of(runtime)
    thread_id, tick = state.thread_id, state.tick
    done: MemoryUpkeep = {}
    with services.managers.unit() as house:
        cycle = services.reads.get(thread_id, tick, CYCLE, lambda: house.loop.context_cycle(thread_id))
        request = house.abstracts.due(thread_id, tick, manual=delivery(cycle, services.settings) == "manual")
        thread = services.reads.get(thread_id, tick, ("thread", thread_id), lambda: house.threads.get(thread_id))
        child = thread is not None and thread.parent_id is not None
        # today's look for missing summaries found none: nothing to do until tomorrow or the next dream
        episodes_due = not child and not house.dreams.summaries_checked(today(services))
    every_pass = services.settings.memory_manager.every
    pass_due = not child and every_pass > 0 and tick > 0 and tick % every_pass == 0
    if (request or episodes_due or pass_due) and waiting(services, state.incoming_note_ids, (thread_id, tick)):
        # the upkeep asks models and reads the whole index: it waits (its requests kept) while a human does
        return {"memory_upkeep": {"manager": "held: a human's note waits"}}
    prefer = state.llm.get("llm_id")
    if request:
        generate = generator(services, "abstract", 320, thread_id=thread_id, tick=tick, prefer=prefer)
        try:
            with services.managers.unit() as house:
                row = house.abstracts.make_requested(
                    thread_id,
                    request,
                    generate,
                    author=services.persona.display_name,
                    language=services.settings.prompt_language,
                )
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
