"""Which unread notes an auto-mode tick shows (HMP context 6: the filter by tags, priority, time, source and
mentions the persona sets with `cycle.mode`, else config.yaml's `cycle.notes_filter`; managers/notes.py holds the
rules), and the line that tells the persona how many wait outside it."""

from __future__ import annotations

from typing import Any

import i18n
from managers import Managers
from managers.loop import ThreadCycle
from managers.notes import Incoming, notes_filter
from nodes.context import UNREAD, Services
from nodes.reflexes.prompts import HELD_LINE
from nodes.state import TickState

FILTERED = "unread_filtered"  # TickReads: (limit, the filter as JSON) -> Incoming, as prepare_context read it


def unread_for_tick(
    house: Managers, services: Services, state: TickState, cycle: ThreadCycle, limit: int, *, fresh: bool = False
) -> list[Any]:
    """The unread notes this tick shows: all (the drives' step read them already), or those the filter in force
    lets through (the owner's always). `fresh`: read again, not what the tick read before (a thought cut for a note
    that came since)."""
    wanted = notes_filter(cycle, services.settings)
    reads, at = services.reads, (state.thread_id, state.tick)
    if not wanted.active():
        if fresh:
            reads.put(*at, (UNREAD, limit, None), house.notes.unread(limit))
        return reads.get(*at, (UNREAD, limit, None), lambda: house.notes.unread(limit))
    key = (FILTERED, limit, wanted.model_dump_json())
    if fresh:
        reads.put(*at, key, house.notes.incoming(wanted, limit=limit, now=services.clock()))
    found: Incoming = reads.get(*at, key, lambda: house.notes.incoming(wanted, limit=limit, now=services.clock()))
    return list(found.notes)


def held_lines(services: Services, state: TickState, cycle: ThreadCycle, language: str) -> list[str]:
    """One line when the filter keeps unread notes back this tick (none otherwise)."""
    wanted = notes_filter(cycle, services.settings)
    if not wanted.active():
        return []
    limit = services.settings.cycle.notes_limit
    found = services.reads.peek(state.thread_id, state.tick, (FILTERED, limit, wanted.model_dump_json()))
    if not isinstance(found, Incoming) or not found.held:
        return []
    shown = wanted.model_dump(exclude_defaults=True)
    return [
        i18n.text(HELD_LINE, language).format(
            held=found.held, filter=", ".join(f"{key} {value}" for key, value in shown.items())
        )
    ]
