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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from memory.repositories import NotFound
from memory.repositories.messages import MessageLine
from memory.store import record_turn

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

    # -- the tick's thought --------------------------------------------------------------------------------------------

    def recent_lines(
        self,
        thread_id: str,
        limit: int,
        *,
        kinds: Iterable[str] = ("response",),
        columns: tuple[str, ...] | None = None,
    ) -> list[MessageLine]:
        """The thread's last `limit` messages of these kinds, oldest first, as plain rows (`columns`: only these)."""
        return self.repos.messages.recent_lines(thread_id, limit, kinds, columns=columns)

    def validations(self, limit: int) -> list[MessageLine]:
        """How the validators rated the last `limit` outputs across every thread, oldest first (the validator
        metrics are computed from them)."""
        return self.repos.messages.validations(limit)

    def record_tick(
        self,
        *,
        thread_id: str,
        tick: int,
        key: str,
        first: bool,
        kind: str,
        content: str,
        fields: dict[str, Any],
        human_turns: Sequence[str],
        answered: Sequence[int],
        metrics: dict[str, Any] | None,
        facts: list[dict[str, Any]],
        author: str,
        tags: Sequence[str],
        emotions: Sequence[tuple[str, int]],
        feel: bool,
        novelty: float | None,
    ) -> int:
        """What a tick stores of its thought, in its unit of work; the thought's row id. Rows carry a dedup key
        (`key`:…), so a step run again after a kill updates them (`first`: no earlier run of the tick stored
        anything, so each is inserted without looking): the human's turns of a continuation, the thought with its
        reflex `fields`, its anti-stagnation `metrics` row, the `facts` it left unchecked (checked above
        `reflexes.factcheck_threshold`), its conversation memory — not for a `stagnation_record`: a repeat is not
        remembered twice —, the persona's `emotions` in the emotion log (`feel`: a fresh rating, logged once per
        tick); a note it answered (`answered`) that came by another path than the conversation is remembered now,
        and all of them are marked read."""
        repos = self.repos

        def write(dedup_key: str, **row: Any) -> int:
            if first:
                return repos.messages.add_keyed(dedup_key, **row)
            return repos.messages.upsert(dedup_key, **row).id

        for position, turn in enumerate(human_turns):
            write(f"{key}:human:{position}", thread_id=thread_id, tick=tick, kind="human", role="user", content=turn)
        if answered:
            self.house.conversation.remember_unrecorded_of(answered)
        row_id = write(
            f"{key}:response", thread_id=thread_id, tick=tick, kind=kind, role="assistant", content=content, **fields
        )
        if metrics is not None:
            repos.stagnation.add(thread_id=thread_id, tick=tick, message_id=row_id, **metrics)
        if facts:
            repos.facts.register(row_id, facts, self.house.deps.settings.reflexes.factcheck_threshold)
        strongest = max((s for _, s in emotions), default=0)
        if kind != "stagnation_record":
            record_turn(
                repos,
                ref=f"msg:{row_id}",
                text=content,
                author=author,
                episode=thread_id,
                thread_id=thread_id,
                tags=tags,
                emotions=[n for n, _ in emotions],
                importance=min(1.0, 0.4 + 0.1 * strongest),
                emotion_score=strongest / 5,
                novelty=None if novelty is None else novelty / 100,
            )
        logged = [] if first else repos.emotion_log.recent("persona", thread_id=thread_id, tick=tick)  # a re-run
        for name, strength in emotions if feel and not logged else []:
            repos.emotion_log.add(
                name, strength, subject="persona", snippet=content[:200], thread_id=thread_id, tick=tick
            )
        repos.notes.mark_read(answered)
        return row_id

    def cleanup(self, *, days: float, keep: int) -> int:
        """Set aside the outdated thoughts (module doc): how many left recall."""
        before = self.house.deps.clock() - timedelta(days=days)
        ids = self.repos.messages.outdated(before, keep=keep, limit=CLEANUP_MAX)
        items = self.repos.items.ids_of("message", [f"msg:{i}" for i in ids])
        active = self.repos.items.active_unpinned_of(items)
        return self.repos.items.set_status(active, "archived") if active else 0


__all__ = ["FlaggedThought", "MessageLine", "ThoughtManager"]
