"""Stelis threads: child threads with a window_ratio budget, a chronicle and an anchor in the parent.

Lifecycle (used by the playbook `stelis_start`/`stelis_end` nodes, the `stelis.*` commands and start-up):

- `open_thread` checks depth and budget, creates the child row (status running, owner = this process)
  and, in the same transaction, the parent's `stelis_anchor` message (the rules: managers/threads.py).
- `write_chronicle` reads the child's whole log and summarises it hierarchically (never truncated).
- `finish_thread` marks it completed or aborted with the chronicle.
- `recover_orphans` finds children left running by a dead process, aborts them with whatever chronicle
  can be written, and makes sure their anchors exist; a persona never stays stuck inside a child.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import i18n
from llm import AllLLMsUnavailable
from managers import Managers  # the thread rules (managers/threads.py); its names are re-exported here
from managers.owners import owner_alive, process_token
from managers.threads import ThreadManager
from memory import Repos
from memory.models import Thread
from nodes.context import Services
from nodes.stelis.history import render_item
from nodes.stelis.prompts import CHRONICLE_FALLBACK, CHRONICLE_INSTRUCTION, CHRONICLE_MERGE_PROMPT, CHRONICLE_PROMPT
from nodes.summarise import summarise

log = logging.getLogger(__name__)

CHRONICLE_TOKENS = 768  # at most per summariser call…
# …and at most half of the part of the log the anchor does not already show in full (its last messages),
# so that an anchor costs the parent less than the log it stands for. The chronicle still reads everything.
CHRONICLE_SHARE = 0.5


@dataclass
class StelisResult:
    thread_id: str | None
    label: str
    status: str  # completed | aborted | refused | running
    chronicle: str = ""
    error: str | None = None
    depth: int = 0
    window_tokens: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of(cls, thread: Thread, window_tokens: int = 0) -> StelisResult:
        return cls(
            thread.id, thread.label, thread.status, thread.chronicle or "", thread.error, thread.depth, window_tokens
        )


# -- ids and budget -------------------------------------------------------------------------------


def child_thread_id(parent_id: str, label: str, key: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")[:40] or "thread"
    return f"{parent_id[:60]}/{slug}-{key[:10]}"


def thread_window(services: Services, repos: Repos, thread_id: str, thread: Any = None) -> int:
    """The thread's window: the model's × Π window_ratio of its lineage. `thread`: its row when the caller has it;
    a root's lineage is itself (1.0), so then no lineage query."""
    if thread is not None and thread.parent_id is None:
        return services.window_tokens(1.0)
    return services.window_tokens(services.managers.over(repos).threads.ratio(thread_id))


# -- active thread of a root (threads the persona opened with `stelis.start`) -------------------


def active_thread(services: Services, repos: Repos, root_id: str) -> str:
    """The thread a root's REPL ticks run in: the innermost running command-opened child, else the root."""
    return services.managers.over(repos).threads.active(root_id)


def set_active_thread(services: Services, repos: Repos, root_id: str, thread_id: str) -> None:
    services.managers.over(repos).threads.set_active(root_id, thread_id)


# -- lifecycle ------------------------------------------------------------------------------------


def managers_of(services: Services, repos: Repos) -> Managers:
    """The managers over `repos` with what the tick's services hold (settings, clock, models, memory)."""
    return services.managers.over(repos)


def open_thread(
    services: Services,
    repos: Repos,
    *,
    parent_id: str,
    child_id: str,
    label: str,
    window_ratio: float,
    max_depth: int,
    origin: str,
    tick: int = 0,
    chronicle_prompt: str | None = None,
    playbook: str = "",
) -> tuple[Thread, int, bool]:
    """(child, its window in tokens, whether it already existed). Raises StelisRefused (managers/threads.py)."""
    return managers_of(services, repos).threads.open_child(
        parent_id=parent_id,
        child_id=child_id,
        label=label,
        window_ratio=window_ratio,
        max_depth=max_depth,
        origin=origin,
        persona=services.persona.name,
        owner=process_token(),
        tick=tick,
        chronicle_prompt=chronicle_prompt,
        playbook=playbook,
    )


def chronicle_source(threads: ThreadManager, thread_id: str) -> tuple[Thread | None, str, int, str]:
    """The child's row, its whole log — every message (anchors to its own children expanded) and command result —,
    how many messages it has, and the last ones its anchor shows in full."""
    source = threads.chronicle_source(thread_id)
    seen = set(source.lineage)
    entries = [(m.created_at, m.id, render_item(threads, m, thread_id, seen)) for m in source.messages]
    entries += [(p.created_at, p.id, f"[result of {p.name}: {p.status}] {p.value}") for p in source.results]
    entries.sort(key=lambda e: (e[0].replace(tzinfo=None).isoformat() if e[0] else "", e[1]))
    shown = "\n\n".join(m.content for m in source.shown)
    return source.thread, "\n\n".join(text for _, _, text in entries), source.count, shown


def write_chronicle(services: Services, thread_id: str, *, use_llm: bool = True) -> str:
    """The chronicle of everything in the thread. Falls back to a plain record when no model answers."""
    with services.managers.unit() as house:
        thread, text, count, shown = chronicle_source(house.threads, thread_id)
    if thread is None:
        return ""
    if not text.strip():
        return "(The thread ended before it wrote anything.)"
    language = services.settings.prompt_language
    fallback = i18n.text(CHRONICLE_FALLBACK, language)
    if not use_llm:
        return fallback.format(reason="the run was interrupted", count=count, thread_id=thread_id)
    tokens = services.llms.primary().count_tokens
    budget = max(64, min(CHRONICLE_TOKENS, int((tokens(text) - tokens(shown)) * CHRONICLE_SHARE)))
    try:
        result = summarise(
            text,
            services.llms,
            i18n.text(CHRONICLE_PROMPT, language),
            merge_prompt=i18n.text(CHRONICLE_MERGE_PROMPT, language),
            purpose="chronicle",
            max_tokens=budget,
            tags={"thread_id": thread_id, "tick": thread.tick},
            name=services.persona.display_name,
            label=thread.label,
            instruction=thread.chronicle_prompt or i18n.text(CHRONICLE_INSTRUCTION, language),
        )
    except AllLLMsUnavailable as exc:
        return fallback.format(reason=str(exc), count=count, thread_id=thread_id)
    log.info(
        "chronicle of %s: %s chars from %s chars in %s call(s)", thread_id, len(result.text), len(text), result.calls
    )
    return result.text or fallback.format(reason="the model returned nothing", count=count, thread_id=thread_id)


def finish_thread(
    services: Services, repos: Repos, thread_id: str, *, status: str, chronicle: str | None, error: str | None = None
) -> StelisResult:
    thread = managers_of(services, repos).threads.finish(thread_id, status=status, chronicle=chronicle, error=error)
    return StelisResult.of(thread, thread_window(services, repos, thread_id))


def close_thread(
    services: Services,
    thread_id: str,
    *,
    status: str,
    error: str | None = None,
    generate: bool = True,
    use_llm: bool = True,
) -> StelisResult:
    chronicle = write_chronicle(services, thread_id, use_llm=use_llm) if generate else None
    with services.db.unit() as repos:
        return finish_thread(services, repos, thread_id, status=status, chronicle=chronicle, error=error)


def recover_orphans(services: Services, notify: Callable[[str], None] | None = None) -> list[StelisResult]:
    """Abort every child thread left running by a process that is gone; chronicle and anchor each one."""
    with services.managers.reading() as house:
        orphans = house.threads.orphans(process_token(), owner_alive)
    results = []
    for orphan in orphans:
        thread_id = orphan.id
        if notify:
            notify(f"aborting Stelis thread {thread_id} left running by a stopped process; writing its chronicle")
        reason = f"the process running it ({orphan.owner or 'unknown'}) stopped before it finished"
        chronicle = write_chronicle(services, thread_id)
        with services.db.unit() as repos:
            result = finish_thread(services, repos, thread_id, status="aborted", chronicle=chronicle, error=reason)
            services.managers.over(repos).threads.aborted(orphan, reason)
        log.warning("aborted orphaned Stelis thread %s: %s", thread_id, reason)
        results.append(result)
    return results


__all__ = [
    "CHRONICLE_SHARE",
    "CHRONICLE_TOKENS",
    "StelisResult",
    "active_thread",
    "child_thread_id",
    "chronicle_source",
    "close_thread",
    "finish_thread",
    "managers_of",
    "open_thread",
    "process_token",
    "recover_orphans",
    "set_active_thread",
    "thread_window",
    "write_chronicle",
]
