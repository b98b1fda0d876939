"""What the loop did, for the doors that show it (the web's thoughts, controls, inner life and live pages): its ticks
and, per tick, the thoughts, commands, model calls and stagnation metrics; the threads with their share of the
window; the live events the loop journals. Read-only: the loop writes these rows itself."""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from managers.views import frozen, frozen_all
from memory.repositories.live import journal_notifications  # PostgreSQL's LISTEN on the journal: live pages wake

if TYPE_CHECKING:
    from managers import Managers


@dataclass(frozen=True)
class TickView:
    """One tick of a thread as it was journaled: its status, its model use and its summary."""

    id: int
    thread_id: str
    tick: int
    status: str
    mode: str
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    llm_ms: float
    summary: dict[str, Any]
    started_at: datetime
    finished_at: datetime | None


@dataclass(frozen=True)
class ThoughtView:
    """One of a thread's own outputs with the reflexes' verdicts shown beside it (not their deferred details)."""

    id: int
    thread_id: str
    tick: int
    kind: str
    content: str
    llm_id: str | None
    novelty_score: float | None
    emotions: list[Any]
    rating: float | None
    auto_pass: bool
    confidence: float | None
    stagnation_flag: bool
    stagnation_reason: str | None
    created_at: datetime


@dataclass(frozen=True)
class CommandView:
    """A command a tick asked for, and what became of it."""

    id: int
    cmd_key: str
    thread_id: str
    tick: int
    cmd_id: str
    type: str
    args: dict[str, Any]
    description: str
    status: str
    result: str
    created_at: datetime


@dataclass(frozen=True)
class LLMCallView:
    """One model call: which model, what for, its tokens and latency, and whether it answered."""

    id: int
    thread_id: str | None
    tick: int | None
    purpose: str
    llm_id: str
    provider: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    latency_ms: float
    ok: bool
    error: str | None
    created_at: datetime


@dataclass(frozen=True)
class StagnationView:
    """One tick's novelty check, and what the anti-stagnation reflex did about it."""

    id: int
    thread_id: str
    tick: int
    novelty_score: float | None
    method: str
    stagnation_flag: bool
    reason: str | None
    streak: int
    diagnosis: str | None
    mechanisms: list[Any]
    novelty_after: float | None
    created_at: datetime


@dataclass(frozen=True)
class EmotionView:
    """An emotion the reflexes read in the human's words."""

    emotion: str
    strength: int
    created_at: datetime


@dataclass(frozen=True)
class ThreadView:
    """A thread (the main one or a Stelis child) as the thread tree shows it."""

    id: str
    parent_id: str | None
    label: str
    playbook: str
    depth: int
    window_ratio: float
    status: str
    tick: int
    chronicle: str | None
    created_at: datetime
    completed_at: datetime | None
    origin: str
    error: str | None


@dataclass(frozen=True)
class LiveEventView:
    """A step of the running loop, as the live pages and /api/events stream it."""

    id: int
    at: datetime
    thread_id: str | None
    tick: int | None
    kind: str
    node: str | None
    data: dict[str, Any]


@dataclass(frozen=True)
class TickDetails:
    """What happened at some ticks of one thread, each list in the order stored."""

    messages: Sequence[ThoughtView]
    commands: Sequence[CommandView]
    llm_calls: Sequence[LLMCallView]
    stagnation: Sequence[StagnationView]


@dataclass(frozen=True)
class ThreadShare:
    """A thread with its share of the model window (the product of its lineage's ratios) and its length."""

    thread: ThreadView
    effective_ratio: float
    messages: int


class JournalManager:
    def __init__(self, house: Managers) -> None:
        self.repos = house.repos

    # -- ticks ---------------------------------------------------------------------------------------------------------

    def ticks(
        self, limit: int, thread_id: str | None = None, *, before_id: int | None = None
    ) -> builtins.list[TickView]:
        """The newest ticks first (of one thread, before a tick row's id when paging back)."""
        return frozen_all(TickView, self.repos.ticks.recent(limit, thread_id, before_id=before_id))

    def tick(self, thread_id: str, tick: int) -> TickView | None:
        row = self.repos.ticks.get(thread_id, tick)
        return frozen(TickView, row) if row is not None else None

    def tick_count(self) -> int:
        return self.repos.ticks.count()

    def at_ticks(self, thread_id: str, numbers: Iterable[int], thought_kinds: Sequence[str]) -> TickDetails:
        numbers = list(numbers)
        return TickDetails(
            messages=frozen_all(ThoughtView, self.repos.messages.at_ticks(thread_id, numbers, thought_kinds)),
            commands=frozen_all(CommandView, self.repos.commands.at_ticks(thread_id, numbers)),
            llm_calls=frozen_all(LLMCallView, self.repos.llm_calls.at_ticks(thread_id, numbers)),
            stagnation=frozen_all(StagnationView, self.repos.stagnation.at_ticks(thread_id, numbers)),
        )

    # -- threads -------------------------------------------------------------------------------------------------------

    def threads(self) -> builtins.list[ThreadView]:
        return frozen_all(ThreadView, self.repos.threads.all())

    def started_at(self) -> datetime | None:
        """When the persona started (boredom's reference while the human never wrote): its first root thread."""
        return next((t.created_at for t in self.repos.threads.all() if t.parent_id is None), None)

    def thread_shares(self) -> builtins.list[ThreadShare]:
        return [
            ThreadShare(frozen(ThreadView, t), self.repos.threads.ratio_product(t.id), self.repos.messages.count(t.id))
            for t in self.repos.threads.all()
        ]

    # -- what the charts read ------------------------------------------------------------------------------------------

    def thoughts(self, limit: int, kinds: Sequence[str]) -> builtins.list[ThoughtView]:
        return frozen_all(ThoughtView, self.repos.messages.log_recent(limit, kinds=kinds))

    def human_emotions(self, limit: int) -> builtins.list[EmotionView]:
        """The human's emotions as the reflexes read them, oldest first."""
        return frozen_all(EmotionView, self.repos.emotion_log.recent("user", limit))

    def stagnation(self, limit: int) -> builtins.list[StagnationView]:
        return frozen_all(StagnationView, self.repos.stagnation.recent(limit))

    # -- the live journal (written off the tick's path by graph/loop/journal.py's thread) ---------------------------

    def write_events(self, batch: Sequence[dict[str, Any]]) -> None:
        self.repos.live_events.add_many(list(batch))

    def trim_events(self, keep: int) -> None:
        self.repos.live_events.trim(keep)

    # -- the live events the loop journals -----------------------------------------------------------------------------

    def newest_event_id(self) -> int:
        return self.repos.live_events.newest_id()

    def events_after(self, cursor: int, limit: int, kinds: Iterable[str] | None = None) -> builtins.list[LiveEventView]:
        return frozen_all(LiveEventView, self.repos.live_events.after(cursor, limit, kinds))

    def newest_events(self, limit: int, kinds: Sequence[str]) -> builtins.list[LiveEventView]:
        return frozen_all(LiveEventView, self.repos.live_events.newest(limit, kinds=list(kinds)))


__all__ = [
    "CommandView",
    "EmotionView",
    "JournalManager",
    "LLMCallView",
    "LiveEventView",
    "StagnationView",
    "ThoughtView",
    "ThreadShare",
    "ThreadView",
    "TickDetails",
    "TickView",
    "journal_notifications",
]
