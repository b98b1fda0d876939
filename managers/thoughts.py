"""The persona's own thoughts (HMP `llm_recent_responses`): flagging one as a reasoning error, and the cleanup of
outdated ones.

`self_error` (HMP's logical error level: "the LLM itself marks its reasoning as erroneous"): the persona names a
thought of its — this tick's or an earlier one — and what was wrong with it. Like every error it goes to the process
log (with the task, in a task's sub-cycle: HMP "all errors are written to process_log, with task_id"), where the next
prompt shows it; the thought keeps the mark (`meta.self_error`; the recent thoughts show it beside the thought) and
leaves recall (its memory archived, restorable with memory.restore), so that nothing is built on it later. When the
flagged thought is this tick's, its other commands are not run (nodes/steps/s12_execute_commands.py): they came from
the reasoning the persona itself withdrew.

Cleanup (HMP: "initiate the cleanup of process_log, llm_recent_responses and notes of outdated records"; process
cleanup is managers/processes.py): the own thoughts older than `days` leave recall — their memory items archived,
restorable — except each thread's newest `keep` (the short-term memory HMP keeps: the N last) and what the persona
pinned; the thread's record itself (sessions, exports) is untouched.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from memory.repositories import NotFound

if TYPE_CHECKING:
    from managers import Managers

THOUGHT_KINDS = ("response", "continuation", "stagnation_record")
CLEANUP_MAX = 2000  # thoughts a cleanup sets aside at once (the next one goes on)


@dataclass(frozen=True)
class FlaggedThought:
    message_id: int
    tick: int
    reason: str
    archived: bool  # its memory left recall


class ThoughtManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    def flag_error(
        self, thread_id: str, tick: int, reason: str, *, task_id: int | None = None, flagged_at: int | None = None
    ) -> FlaggedThought:
        """Mark the thread's thought of `tick` as a reasoning error (module doc); NotFound when it has none."""
        found = self.repos.messages.at_ticks(thread_id, [tick], kinds=THOUGHT_KINDS)
        if not found:
            raise NotFound(f"no thought of mine at tick {tick} in this thread")
        message = found[-1]
        now = self.house.deps.clock()
        message.meta = {
            **(message.meta or {}),
            "self_error": {"reason": reason, "at": now.isoformat(), "flagged_at_tick": flagged_at or tick},
        }
        archived = self.repos.archive("message", f"msg:{message.id}", now)
        self.repos.processes.add(
            "self_error",
            f"I flagged my reasoning at tick {tick} as an error: {reason}",
            status="error",
            thread_id=thread_id,
            task_id=task_id,
        )
        return FlaggedThought(message.id, tick, reason, archived)

    def cleanup(self, *, days: float, keep: int) -> int:
        """Set aside the outdated thoughts (module doc): how many left recall."""
        before = self.house.deps.clock() - timedelta(days=days)
        ids = self.repos.messages.outdated(before, keep=keep, limit=CLEANUP_MAX)
        items = self.repos.items.ids_of("message", [f"msg:{i}" for i in ids])
        active = self.repos.items.active_unpinned_of(items)
        return self.repos.items.set_status(active, "archived") if active else 0


__all__ = ["FlaggedThought", "ThoughtManager"]
