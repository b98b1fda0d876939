"""What the loop did, for the doors that show it (the web's thoughts, controls, inner life and live pages): its ticks
and, per tick, the thoughts, commands, model calls and stagnation metrics; the threads with their share of the
window; the live events the loop journals. Read-only: the loop writes these rows itself."""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memory.repositories.live import journal_notifications  # PostgreSQL's LISTEN on the journal: live pages wake

if TYPE_CHECKING:
    from managers import Managers
    from memory.models import AntiStagnationMetric, ExecutedCommand, LiveEvent, LLMCall, Message, Thread, Tick


@dataclass(frozen=True)
class TickDetails:
    """What happened at some ticks of one thread, each list in the order stored."""

    messages: Sequence[Message]
    commands: Sequence[ExecutedCommand]
    llm_calls: Sequence[LLMCall]
    stagnation: Sequence[AntiStagnationMetric]


@dataclass(frozen=True)
class ThreadShare:
    """A thread with its share of the model window (the product of its lineage's ratios) and its length."""

    thread: Thread
    effective_ratio: float
    messages: int


class JournalManager:
    def __init__(self, house: Managers) -> None:
        self.repos = house.repos

    # -- ticks ---------------------------------------------------------------------------------------------------------

    def ticks(self, limit: int, thread_id: str | None = None, *, before_id: int | None = None) -> builtins.list[Tick]:
        """The newest ticks first (of one thread, before a tick row's id when paging back)."""
        return list(self.repos.ticks.recent(limit, thread_id, before_id=before_id))

    def tick(self, thread_id: str, tick: int) -> Tick | None:
        return self.repos.ticks.get(thread_id, tick)

    def tick_count(self) -> int:
        return self.repos.ticks.count()

    def at_ticks(self, thread_id: str, numbers: Iterable[int], thought_kinds: Sequence[str]) -> TickDetails:
        numbers = list(numbers)
        return TickDetails(
            messages=list(self.repos.messages.at_ticks(thread_id, numbers, thought_kinds)),
            commands=list(self.repos.commands.at_ticks(thread_id, numbers)),
            llm_calls=list(self.repos.llm_calls.at_ticks(thread_id, numbers)),
            stagnation=list(self.repos.stagnation.at_ticks(thread_id, numbers)),
        )

    # -- threads -------------------------------------------------------------------------------------------------------

    def threads(self) -> builtins.list[Thread]:
        return list(self.repos.threads.all())

    def started_at(self) -> datetime | None:
        """When the persona started (boredom's reference while the human never wrote): its first root thread."""
        return next((t.created_at for t in self.repos.threads.all() if t.parent_id is None), None)

    def thread_shares(self) -> builtins.list[ThreadShare]:
        return [
            ThreadShare(t, self.repos.threads.ratio_product(t.id), self.repos.messages.count(t.id))
            for t in self.repos.threads.all()
        ]

    # -- what the charts read ------------------------------------------------------------------------------------------

    def thoughts(self, limit: int, kinds: Sequence[str]) -> builtins.list[Message]:
        return list(self.repos.messages.log_recent(limit, kinds=kinds))

    def human_emotions(self, limit: int) -> builtins.list[Any]:
        """The human's emotions as the reflexes read them, oldest first (plain rows: emotion, strength, when)."""
        return list(self.repos.emotion_log.recent("user", limit))

    def stagnation(self, limit: int) -> builtins.list[AntiStagnationMetric]:
        return list(self.repos.stagnation.recent(limit))

    # -- the live journal (written off the tick's path by graph/loop/journal.py's thread) ---------------------------

    def write_events(self, batch: Sequence[dict[str, Any]]) -> None:
        self.repos.live_events.add_many(list(batch))

    def trim_events(self, keep: int) -> None:
        self.repos.live_events.trim(keep)

    # -- the live events the loop journals -----------------------------------------------------------------------------

    def newest_event_id(self) -> int:
        return self.repos.live_events.newest_id()

    def events_after(self, cursor: int, limit: int, kinds: Iterable[str] | None = None) -> builtins.list[LiveEvent]:
        return list(self.repos.live_events.after(cursor, limit, kinds))

    def newest_events(self, limit: int, kinds: Sequence[str]) -> builtins.list[LiveEvent]:
        return list(self.repos.live_events.newest(limit, kinds=list(kinds)))


__all__ = ["JournalManager", "ThreadShare", "TickDetails", "journal_notifications"]
