"""Abstracts (HMP): thematic digests with the ids of their sources. One asked for without a text is made from the
recent thoughts after the tick (memory/upkeep/abstracts.py).

Their delivery (HMP "выбор режима предоставления конспектов", auto/manual): `auto` — made on their automatic
triggers (every N ticks, a goal or task closed, a change of mode) and the newest shown in every prompt; `manual` —
made only when the persona or the human asks, and read only when the persona requests them (abstracts.list/read).
`memory.abstracts` sets it for the persona; `abstracts.mode` for one thread (kept in its cycle settings)."""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from memory.models import Abstract
from memory.upkeep.abstracts import Generate, build_abstract, clear_request, pending_request, request_abstract

if TYPE_CHECKING:
    from managers import Managers
    from managers.loop import ThreadCycle


Delivery = Literal["auto", "manual"]
AUTOMATIC_TRIGGERS = frozenset({"every_n", "goal_closed", "mode_change"})  # what manual delivery does not act on


def delivery(cycle: ThreadCycle, settings: Any) -> Delivery:
    """The thread's delivery of abstracts: its own (abstracts.mode), else the persona's `memory.abstracts`."""
    mode = cycle.abstracts_mode or settings.memory.abstracts
    return "manual" if mode == "manual" else "auto"


class AbstractManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    def list(
        self, *, tags: Iterable[str] | None = None, since: datetime | None = None, limit: int = 5
    ) -> builtins.list[Abstract]:
        return self.repos.abstracts.list(tags=tags, since=since, limit=limit)

    def get(self, abstract_id: int) -> Abstract:
        return self.repos.abstracts.get(abstract_id)

    def add(
        self,
        title: str,
        summary: str,
        *,
        tags: Iterable[str] = (),
        sources: Iterable[str] = (),
        thread_id: str | None = None,
    ) -> Abstract:
        return self.repos.abstracts.add(
            title, summary, tags=tags, sources=sources, trigger="manual", thread_id=thread_id
        )

    def request(self, root_thread: str, trigger: str = "requested", what: str = "asked by the persona") -> None:
        """Ask for an abstract of the thread's recent thoughts, made after the tick."""
        request_abstract(self.repos, root_thread, trigger, what)

    def due(self, thread_id: str, tick: int, *, manual: bool) -> dict[str, Any] | None:
        """The abstract the memory upkeep makes after this tick (the request: trigger and what), or None. Every
        `memory.abstract_every` ticks one is asked for; with manual delivery only what was asked for is made — an
        automatic request is dropped, and the process log says so. (Reads the episodes' check with the request, in
        one query: the upkeep asks it next.)"""
        repos, every = self.repos, self.house.deps.settings.memory.abstract_every
        repos.config.preload_memory_upkeep(thread_id)
        if every > 0 and tick > 0 and tick % every == 0 and not manual and pending_request(repos, thread_id) is None:
            request_abstract(repos, thread_id, "every_n", f"tick {tick}")
        request = pending_request(repos, thread_id)
        if request and manual and request.get("trigger") in AUTOMATIC_TRIGGERS:
            clear_request(repos, thread_id)
            repos.processes.add(
                "memory.abstract",
                f"abstract not made: abstracts are manual ({request.get('trigger')}: {request.get('what', '')})",
                status="ok",
                thread_id=thread_id,
            )
            return None
        return request

    def make_requested(
        self, thread_id: str, request: dict[str, Any], generate: Generate, *, author: str, language: str
    ) -> Abstract | None:
        """The requested abstract, made from what is new since the last one (None: too little new), the request
        cleared and the process log told. A model that does not answer raises (the request stays for a later
        tick)."""
        trigger = request.get("trigger", "manual")
        row = build_abstract(self.repos, thread_id, trigger, generate, author, language=language)
        clear_request(self.repos, thread_id)
        message = (
            f"abstract {row.id} '{row.title}' from {len(row.sources)} sources ({request.get('trigger')}: "
            f"{request.get('what', '')})"
            if row
            else f"abstract skipped: too little new ({request.get('trigger')})"
        )
        self.repos.processes.add("memory.abstract", message, status="ok", thread_id=thread_id)
        return row

    def set_delivery(self, thread_id: str, mode: Delivery) -> None:
        self.house.loop.update_cycle(thread_id, abstracts_mode=mode)

    def extend(self, abstract_id: int, text: str, sources: Iterable[str] = (), *, thread_id: str) -> Abstract:
        row = self.repos.abstracts.extend(abstract_id, text, sources)
        self.repos.processes.add("abstracts.update", f"abstract {abstract_id} extended", thread_id=thread_id)
        return row


__all__ = ["AUTOMATIC_TRIGGERS", "AbstractManager", "Delivery", "delivery"]
