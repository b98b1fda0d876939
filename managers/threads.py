"""Stelis threads: child threads with a window_ratio budget, an anchor in the parent and, when they end, a chronicle.

The rules of their lifecycle that need only the transaction live here: how deep a child may be and how small its
window, its row and its parent's `stelis_anchor` written together, how it ends, which thread a root's ticks run in.
Writing the chronicle (a model summarises the child's whole log) and rendering a thread's history for a prompt live
with the tick (nodes/stelis/); the playbook's `stelis_start`/`stelis_end` nodes, the `stelis.*` commands, the task
cycles and start-up all come here through nodes/stelis/threads.py or `Managers.threads`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from managers.errors import Refused
from memory.repositories import NotFound, anchor_key

if TYPE_CHECKING:
    from managers import Managers
    from memory import Repos
    from memory.models import Message, Thread

DEFAULT_WINDOW_RATIO = 0.8
SIMULATION = "simulation"  # the origin of a thread the anti-stagnation escalation moved a task into, to rehearse it
MIN_CHILD_WINDOW = 1024  # tokens; a smaller window cannot hold a useful prompt
# how an anchor reads to a viewer: (repos, anchor, viewer id, the viewer's lineage) -> text (nodes/stelis/history.py)
AnchorRenderer = Callable[["Repos", "Message", str, set[str]], str]


class StelisRefused(RuntimeError):
    """Opening the child would break a limit (depth, budget): the caller carries on without it."""


@dataclass(frozen=True)
class RehearsalEnd:
    """A rehearsal (a thread of origin `simulation`) that has had its thoughts: it closes, and its parent resumes."""

    thread_id: str
    parent_id: str
    label: str


class ThreadManager:
    def __init__(self, house: Managers) -> None:
        self.repos = house.repos
        self.deps = house.deps

    def window(self, ratio: float = 1.0) -> int:
        """A thread's share of the model window: window × run ratio × `ratio` (Π window_ratio of its lineage)."""
        llms = self.deps.need_llms("a thread's window")
        return self.deps.settings.window_tokens(llms.primary().context_window, ratio)

    def next_tick(self, thread_id: str) -> int:
        """The number the thread's next tick will have (1 for a thread that never ran)."""
        row = self.repos.threads.get(thread_id)
        return (row.tick if row is not None else 0) + 1

    def thread_window(self, thread_id: str) -> int:
        return self.window(self.repos.threads.ratio_product(thread_id))

    def open_child(
        self,
        *,
        parent_id: str,
        child_id: str,
        label: str,
        window_ratio: float,
        max_depth: int,
        origin: str,
        persona: str,
        owner: str,
        tick: int = 0,
        chronicle_prompt: str | None = None,
        playbook: str = "",
    ) -> tuple[Thread, int, bool]:
        """(child, its window in tokens, whether it already existed). The child row (running, owned by `owner`)
        and the parent's anchor are written together. Raises StelisRefused over `max_depth` or under the minimum
        window."""
        existing = self.repos.threads.get(child_id)
        if existing is not None:
            return existing, self.thread_window(child_id), True
        parent = self.repos.threads.ensure(parent_id, persona=persona, origin="root")
        depth = parent.depth + 1
        if depth > max_depth:
            raise StelisRefused(
                f"Stelis thread {label!r} refused: it would be at depth {depth}, over max_depth {max_depth}"
            )
        if not 0 < window_ratio <= 1:
            raise StelisRefused(f"Stelis thread {label!r} refused: window_ratio must be in (0, 1], got {window_ratio}")
        window = self.window(self.repos.threads.ratio_product(parent_id) * window_ratio)
        if window < MIN_CHILD_WINDOW:
            raise StelisRefused(
                f"Stelis thread {label!r} refused: its window would be {window} tokens, "
                f"under the minimum of {MIN_CHILD_WINDOW}"
            )
        child = self.repos.threads.create_child(
            child_id,
            parent,
            label=label,
            window_ratio=window_ratio,
            origin=origin,
            owner=owner,
            chronicle_prompt=chronicle_prompt,
            playbook=playbook,
        )
        self.repos.messages.upsert(
            anchor_key(child_id),
            thread_id=parent_id,
            tick=tick,
            kind="stelis_anchor",
            role="system",
            content=f'Stelis thread "{label}" ({child_id})',
            meta={"child": child_id, "label": label},
        )
        return child, window, False

    def finish(self, thread_id: str, *, status: str, chronicle: str | None, error: str | None = None) -> Thread:
        """Mark the thread completed or aborted with its chronicle (KeyError: no such thread)."""
        thread = self.repos.threads.finish(
            thread_id, status=status, chronicle=chronicle, now=self.deps.clock(), error=error
        )
        if thread is None:
            raise KeyError(f"no thread {thread_id!r}")
        return thread

    def get(self, thread_id: str) -> Thread | None:
        return self.repos.threads.get(thread_id)

    def ensure_root(self, thread_id: str, *, persona: str, playbook: str) -> Thread:
        """The root thread a playbook runs in (made when first used)."""
        return self.repos.threads.ensure(thread_id, persona=persona, playbook=playbook, origin="root")

    def record_step(
        self,
        key: str,
        *,
        thread_id: str,
        tick: int,
        role: str,
        content: str,
        meta: dict[str, Any],
        llm_id: str | None = None,
    ) -> None:
        """What a playbook node did, in its thread's log (once per node run: `key`)."""
        self.repos.messages.upsert(
            key, thread_id=thread_id, tick=tick, kind="step", role=role, content=content, llm_id=llm_id, meta=meta
        )

    def active(self, root_id: str) -> str:
        """The thread a root's REPL ticks run in: the innermost running command-opened child, else the root."""
        current = self.repos.config.active_thread(root_id) or root_id
        while current != root_id:
            thread = self.repos.threads.get(current)
            if thread is not None and thread.status == "running":
                return current
            current = thread.parent_id if thread is not None and thread.parent_id else root_id
        return root_id

    def ratio(self, thread_id: str) -> float:
        """Π window_ratio of the thread's lineage: its share of the model's window."""
        return self.repos.threads.ratio_product(thread_id)

    def orphans(self, token: str, alive: Callable[[str | None], bool]) -> list[Thread]:
        """Child threads left running by a process that is gone (a task's sub-cycle is not one: it resumes from its
        checkpoint, managers/task_cycles.py)."""
        return [
            t
            for t in self.repos.threads.running_children()
            if t.origin != "task" and t.owner != token and not alive(t.owner)
        ]

    def aborted(self, thread: Thread, reason: str) -> None:
        """An orphan, finished as aborted: its anchor in the parent (if it had none yet) and a process-log line."""
        if self.repos.messages.anchor_for(thread.id) is None:
            self.repos.messages.upsert(
                anchor_key(thread.id),
                thread_id=thread.parent_id,
                tick=thread.tick,
                kind="stelis_anchor",
                role="system",
                content=f'Stelis thread "{thread.label}" ({thread.id})',
                meta={"child": thread.id, "label": thread.label},
            )
        self.repos.processes.add(
            "stelis",
            f'Stelis thread "{thread.label}" ({thread.id}) was aborted: {reason}.',
            status="warning",
            thread_id=thread.parent_id,
        )

    def rehearsal_done(self, thread_id: str, thoughts: int) -> RehearsalEnd | None:
        """The thread, when it is a running rehearsal that has had `thoughts` thoughts (then it ends), else None."""
        thread = self.repos.threads.get(thread_id)
        if thread is None or thread.origin != SIMULATION or thread.status != "running" or thread.parent_id is None:
            return None
        if self.repos.messages.count(thread.id) < thoughts:
            return None
        return RehearsalEnd(thread.id, thread.parent_id, thread.label)

    def back_from_rehearsal(self, ended: RehearsalEnd, *, root_id: str, thoughts: int) -> None:
        """A closed rehearsal's ticks return to its parent, whose process log says where its chronicle is."""
        self.set_active(root_id, ended.parent_id)
        self.repos.processes.add(
            "stelis.simulation",
            f"the rehearsal “{ended.label}” ended after {thoughts} thoughts; its chronicle is in {ended.parent_id}",
            status="ok",
            thread_id=ended.parent_id,
        )

    def set_active(self, root_id: str, thread_id: str) -> None:
        """Make `thread_id` the thread the root's ticks run in (the root itself: no override)."""
        self.repos.config.set_active_thread(root_id, thread_id if thread_id != root_id else None)

    def opened_by_command(self, thread_id: str) -> Thread:
        """The thread, when it is a Stelis child the persona opened itself; Refused otherwise."""
        thread = self.repos.threads.get(thread_id)
        if thread is None or thread.parent_id is None or thread.origin != "command":
            raise Refused(f"{thread_id} is not a Stelis thread the persona opened itself")
        return thread

    def show(self, thread_id: str, *, viewer_id: str, render: AnchorRenderer) -> str:
        """The Stelis thread as its anchor shows it to `viewer_id` (NotFound when there is none)."""
        anchor = self.repos.messages.anchor_for(thread_id)
        if anchor is None:
            raise NotFound(f"no Stelis thread {thread_id!r}")
        lineage = {t.id for t in self.repos.threads.lineage(viewer_id)}
        return render(self.repos, anchor, viewer_id, lineage)


__all__ = [
    "DEFAULT_WINDOW_RATIO",
    "MIN_CHILD_WINDOW",
    "SIMULATION",
    "AnchorRenderer",
    "RehearsalEnd",
    "StelisRefused",
    "ThreadManager",
]
