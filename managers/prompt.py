"""What a tick's prompt shows of the persona's memory, read in the tick's unit of work (nodes/steps/s04_prepare_context
renders it, fences what was written from untrusted text and fits it to the budget).

The resident part — what stands in every private prompt: core memory and the notepad, the leading goals and the open
tasks, the newest abstracts, the episodes, the latest dream's strategy, the model's own notes — is read in one call
(`standing`), only for a tick that answers the owner or nobody. The rest are the reads whose arguments come from
what the tick found on its way (the notes it answers, what it recalled): each names what the prompt does with it.
Nothing here writes, except `shown` (a recalled memory shown counts as a use)."""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from memory.updates import versions_of

if TYPE_CHECKING:
    from managers import Managers
    from memory.models import Entity, Message, Note

Sources = dict[str, builtins.list[dict[str, Any]]]


@dataclass(frozen=True)
class Standing:
    """The resident memory of a private prompt, as read at the start of its assembly.

    `abstract_on_request`: the newest abstract's id when abstracts are delivered on request (then `abstracts` is
    empty); `strategy`: the latest dream's (insight id, strategy) — the id is None when no row was written from
    untrusted text, so none needs its sources."""

    core: str
    notepad: str
    goals: Sequence[Any]  # the leading active goals of each horizon, in priority order
    open_tasks: Sequence[Any]
    task_counts: Mapping[str, int]
    abstracts: Sequence[Any]  # newest first
    abstract_on_request: int | None
    episodes: Mapping[str, Sequence[Any]]
    strategy: tuple[int | None, str] | None
    ideas: Sequence[Any]  # the model's own notes (llm_memory), oldest first


@dataclass(frozen=True)
class Continuation:
    """The growing text of a continuation thread: its last compression (None: none yet) and every chunk since."""

    compression: Message | None
    chunks: Sequence[Message]


class PromptManager:
    def __init__(self, house: Managers) -> None:
        self.repos = house.repos

    # -- the resident memory ---------------------------------------------------------------------------------------

    def standing(
        self,
        now: datetime,
        *,
        focus_tags: Sequence[str] | None,
        delivery: str,
        episode_days: int,
        tainted: bool,
        abstract_days: int = 7,
        ideas: int = 20,
    ) -> Standing:
        """What a private prompt shows of the persona's own memory (Standing). Abstracts: on request (`delivery`
        manual) only that the newest waits; else the newest two of the last `abstract_days`, the focus tags' first.
        `tainted`: some row is tainted now, so the strategy's row is read with its id."""
        repos = self.repos
        blocks = repos.blocks.contents("core", "notepad")
        goals = repos.goals.leading(per_horizon=3)
        open_tasks = repos.tasks.open_lines(limit=8)
        counts = repos.tasks.counts()
        on_request: int | None = None
        abstracts: Sequence[Any] = []
        if delivery == "manual":
            newest = repos.abstracts.latest()
            on_request = newest.id if newest is not None else None
        else:
            since = now - timedelta(days=abstract_days)
            abstracts = repos.abstracts.newest_lines(tags=list(focus_tags), since=since, limit=2) if focus_tags else []
            abstracts = abstracts or repos.abstracts.newest_lines(since=since, limit=2)
        episodes = repos.episodes.latest({"day": episode_days, "week": 1, "month": 1})
        strategy: tuple[int | None, str] | None
        if tainted:
            latest = repos.insights.latest()
            strategy = (latest.id, latest.strategy) if latest is not None and latest.strategy else None
        else:
            text = repos.insights.latest_strategy()
            strategy = (None, text) if text else None
        return Standing(
            core=blocks["core"],
            notepad=blocks["notepad"],
            goals=goals,
            open_tasks=open_tasks,
            task_counts=counts,
            abstracts=abstracts,
            abstract_on_request=on_request,
            episodes=episodes,
            strategy=strategy,
            ideas=repos.llm_memory.recent_lines(ideas),
        )

    # -- what the tick found on its way ----------------------------------------------------------------------------

    def notes_seen_by_kept_answer(self, thread_id: str, tick: int) -> builtins.list[int] | None:
        """The notes the model's call saw when this tick ran before and was killed after its answer was kept (s05
        keeps them with the answer); None when no answer was kept, or it kept none."""
        kept = self.repos.ticks.kept_answer(thread_id, tick)
        seen = (kept or {}).get("incoming_note_ids")
        return None if seen is None else [int(i) for i in seen]

    def unread_counts(self) -> dict[int, int]:
        """How many unread notes wait, by priority (a manual-notes tick shows only that)."""
        return self.repos.notes.count_unread_by_priority()

    def notes(self, ids: Iterable[int]) -> builtins.list[Note]:
        """These notes, read or not by now."""
        return self.repos.notes.many(list(ids))

    def open_results(self, thread_id: str) -> builtins.list[Any]:
        """The results of the thread's commands the model has not seen yet (the next step closes them as seen)."""
        return self.repos.processes.open(thread_id)

    def last_thought(self, thread_id: str) -> str | None:
        """The thread's last thought — its last response, else its last continuation chunk — for recall's focus."""
        for kind in ("response", "continuation"):
            rows = self.repos.messages.recent_lines(thread_id, 1, kinds=(kind,), columns=("content",))
            if rows:
                return str(rows[-1].content)
        return None

    def active_goals(self, limit: int) -> builtins.list[Any]:
        """The active goals in priority order (recall's focus, when the tick did not read the leading ones)."""
        return self.repos.goals.list(status="active", limit=limit)

    def open_questions(self, limit: int) -> builtins.list[Any]:
        """The open questions the persona's full internal state lists (a tick it may reach out unprompted)."""
        return self.repos.questions.open_lines(limit)

    def memories_shown(self, tier: str, refs: Iterable[str]) -> set[int]:
        """The memory items of these rows (what the prompt shows already: recall leaves them out)."""
        return self.repos.items.ids_of(tier, refs)

    def versions(self, items: Iterable[Any]) -> dict[int, str]:
        """The texts of the memories these recalled ones replaced or were replaced by, by id."""
        return versions_of(self.repos, items)

    def shown(self, item_ids: Iterable[int], now: datetime) -> None:
        """Recalled memories the prompt kept: shown counts as a use (their least-recently-used order)."""
        self.repos.items.touch(list(item_ids), now)

    def entities(self, text: str, limit: int) -> builtins.list[Entity]:
        """The entities the text mentions, at most `limit`."""
        return self.repos.entities.mentioned_in(text, limit) if text else []

    def continuation(self, thread_id: str) -> Continuation:
        """The growing text of a continuation thread since its last compression."""
        compression = self.repos.messages.last_of_kind(thread_id, "compression")
        chunks = self.repos.messages.since(thread_id, compression.id if compression else 0, ("continuation", "human"))
        return Continuation(compression, chunks)

    def author_language(self, person_id: int) -> str | None:
        """The language a person's record names (None: no record, or none named)."""
        person = self.repos.people.get(person_id)
        return person.language if person is not None else None

    def owner_languages(self) -> builtins.list[str | None]:
        return self.repos.people.owner_languages()

    def mesh_queued(self) -> int:
        """How many containers wait in the mesh's outbox (Isolated Mode's line)."""
        return self.repos.mesh.outbox_count()

    # -- rows written from untrusted text ----------------------------------------------------------------------------

    def any_tainted(self) -> bool:
        """Whether any row is tainted now (the prompt skips its look-ups when none is)."""
        return self.repos.taints.any_active()

    def taints(self, tier: str, refs: Iterable[Any]) -> Sources:
        """The sources of the tainted rows among `refs` of one tier, by ref."""
        return self.repos.taints.of(tier, refs)

    def taints_of(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], builtins.list[dict[str, Any]]]:
        """The sources of the tainted rows among (tier, ref) keys."""
        return self.repos.taints.of_keys(keys)


__all__ = ["Continuation", "PromptManager", "Standing"]
