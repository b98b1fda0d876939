"""What the memory tiers put in the prompt each tick (the blocks from "recall" to "abstracts" in prepare_context).

`auto_recall` searches every retrievable tier with the incoming notes and the current focus (the last
thought and the active goals); items already visible as recent thoughts are left out. The context mode
(cycle.concentration / cycle.meditation) changes both the recent-thoughts selection and the recall.
Nothing here may break a tick: a failing search is logged and the block stays empty.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import date
from typing import Any, NamedTuple

from managers import Managers
from managers.abstracts import delivery
from managers.loop import ThreadCycle, context_mode
from managers.prompt import Standing
from managers.threads import MessageLine, ThreadManager
from memory import provenance
from memory.retrieval.emotion_focus import emotions_match
from memory.retrieval.index import Query
from memory.updates import version_note, when_label
from memory.upkeep.episodes import Period
from nodes.stelis.history import render_item
from nodes.steps.prompts import ABSTRACTS_ON_REQUEST
from nodes.steps.s04_prepare_context.untrusted import WRITTEN_FROM, Tainted

log = logging.getLogger(__name__)

FOCUS_CHARS = 400


class Recall(NamedTuple):
    lines: list[str]
    ids: list[int]
    error: str | None
    # the untrusted ones (knowledge base, what arrived from outside, rows written from it), by item id
    sources: dict[int, list[provenance.Source]]


Marker = Callable[[str, Iterable[tuple[Any, str]]], list[str]]  # a tier's (ref, line) rows -> the lines shown


def _plain(tier: str, rows: Iterable[tuple[Any, str]]) -> list[str]:
    return [line for _, line in rows]


def _marker(tainted: Tainted | None) -> Marker:
    """How lines of rows are shown: a tainted row's fenced with its origin (`Tainted.lines`), or as they are."""
    return tainted.lines if tainted is not None else _plain


def recent_thoughts(
    house: Managers,
    thread_id: str,
    k: int,
    cycle: ThreadCycle,
    memory: Any = None,
    plain: bool = False,
    tick: int | None = None,
) -> tuple[list[str], list[int]]:
    """The K recent own responses: the last K (standard), those matching the focus tags/emotions with and/or
    logic (concentration), or the most diverse K of a wider window (meditation). Returns (lines, message ids).
    `plain` (`voice.plain_recent`): each thought as `- its words`, without the `[tick N]` and the reflex scores a
    small model copies into the thought it continues.
    Given the `tick` being prepared, the standard window moves in steps of K/2 ticks: it shows the thread's thoughts
    since a tick that stays the same for K/2 ticks (K to 3K/2 − 1 of them), so a new thought is added at its end and
    the prompt before it opens as the last one did (a prompt cache serves that opening); a window moving by one
    would change the prompt right after its title every tick."""
    mode = context_mode(cycle)
    threads = house.threads
    timeline = threads.timeline
    if (mode == "standard" or not k) and tick is not None and k:
        step = max(1, k // 2)
        rows = timeline(thread_id, last=k + step - 1)
        since = ((tick - 1 - k) // step) * step  # the window shows this thread's ticks after it
        rows = [m for m in rows if m.thread_id != thread_id or m.tick is None or m.tick > since]
    elif mode == "standard" or not k:
        rows = timeline(thread_id, last=k) if k else []
    elif mode == "concentration":
        rows = [m for m in timeline(thread_id, last=k * 5) if _focused(m, cycle)][-k:]
    else:  # meditation: the wider window's ids only; the K chosen are read whole
        rows = threads.messages(_diverse(timeline(thread_id, last=k * 5, columns=("id",)), k, memory))
    seen = threads.lineage_ids(thread_id)
    render = plain_item if plain else render_item
    return [render(threads, m, thread_id, seen) for m in rows], [m.id for m in rows]


_TICK_REFERENCE = re.compile(r"\s*\bto tick \d+\b")


def plain_item(threads: ThreadManager, message: MessageLine, thread_id: str, seen: set[str]) -> str:
    """A recent thought as a plain list item: its words; a stagnation record without its tick number."""
    if message.kind == "response":
        flagged = (message.meta or {}).get("self_error")
        mark = f" (I flagged this as a reasoning error: {flagged.get('reason')})" if isinstance(flagged, dict) else ""
        return "- " + str(message.content).strip() + mark
    if message.kind == "stagnation_record":
        return "- " + _TICK_REFERENCE.sub(" to an earlier thought", str(message.content).strip())
    return render_item(threads, message, thread_id, seen)


def _focused(message: MessageLine, cycle: ThreadCycle) -> bool:
    tags = {t.lower() for t in cycle.focus_tags}
    emotions = list(cycle.focus_emotions)
    have_tags = {str(t).lower() for t in message.tags or []}
    checks = []
    if tags:
        checks.append(tags <= have_tags if cycle.focus_logic == "and" else bool(tags & have_tags))
    if emotions:
        checks.append(emotions_match(emotions, message.emotions or [], cycle.focus_logic))
    if not checks:
        return True
    return all(checks) if cycle.focus_logic == "and" else any(checks)


def _diverse(pool: list[MessageLine], k: int, memory: Any) -> list[int]:
    """The ids of the K most different messages of `pool` (greedy farthest-first over their vectors; meditation),
    in the pool's oldest-first order."""
    if len(pool) <= k or memory is None:
        return [m.id for m in pool[-k:]]
    keys = [f"msg:{m.id}" for m in pool]
    keep = set(memory.diverse(keys, k))
    return [m.id for m, key in zip(pool, keys) if key in keep]


def focus_text(house: Managers, thread_id: str, notes: list[Any], goals: Sequence[Any] | None = None) -> str:
    """What recall searches with: the notes, the last thought and the three leading active goals (`goals`: the
    active goals in priority order, when the caller has them)."""
    parts = [n.text for n in notes]
    last = house.prompt.last_thought(thread_id)
    if last is not None:
        parts.append(last[-FOCUS_CHARS:])
    parts += [g.title for g in (house.prompt.active_goals(3) if goals is None else goals[:3])]
    return "\n".join(p for p in parts if p and p.strip())


def auto_recall(
    services: Any,
    house: Managers,
    thread_id: str,
    notes: list[Any],
    shown_message_ids: list[int],
    cycle: ThreadCycle,
    goals: Sequence[Any] | None = None,
    tainted: Tainted | None = None,
    scope: list[str] | None = None,
) -> Recall:
    """The memories recalled for this tick: their lines, item ids, the error if recall failed, and where the
    untrusted ones came from (by item id) — a row written from untrusted text says so on its line. `scope`: the tags
    a memory needs (one of them) when the tick answers someone who may not see everything (managers/audience.py);
    then only their notes are the focus."""
    if services.memory is None:
        return Recall([], [], None, {})
    text = focus_text(house, thread_id, notes, goals) if scope is None else "\n".join(n.text for n in notes)
    if not text:
        return Recall([], [], None, {})
    mode = context_mode(cycle)
    k = services.settings.memory.recall_k
    shown = house.prompt.memories_shown(
        "message",
        [f"msg:{i}" for i in shown_message_ids]  # already in the prompt:
        + [f"note:{n.id}" for n in notes],
    )  # the thoughts shown, the notes (their turns)
    try:
        diversity = cycle.diversity_boost
        lam = max(0.05, min(0.95, 1 - float(diversity))) if mode == "meditation" and diversity is not None else None
        hits = services.memory.search(
            Query(
                text=text,
                k=k,
                mode=mode,
                exclude=shown,
                mmr_lambda=lam,
                tags=scope if scope is not None else (cycle.focus_tags or None) if mode == "concentration" else None,
                emotions=(cycle.focus_emotions or None) if mode == "concentration" else None,
                tags_mode="or" if scope is not None else cycle.focus_logic,
            )
        )
    except Exception as exc:  # recall is an aid: a broken index must not stop the persona thinking
        log.exception("auto_recall failed")
        return Recall([], [], f"{type(exc).__name__}: {exc}", {})
    if delivery(cycle, services.settings) == "manual":  # abstracts are read only when requested
        hits = [hit for hit in hits if hit.item.tier != "abstract"]
    sources: dict[int, list[provenance.Source]] = {
        h.item.id: [src] for h in hits if (src := provenance.of_item(h.item)) is not None
    }
    for item_id, found in _tainted_items(tainted, [h.item for h in hits]).items():
        sources[item_id] = provenance.merged(sources.get(item_id), found)
    lines = []
    texts = house.prompt.versions([h.item for h in hits])  # what they replaced, or what replaced them
    for hit in reversed(hits):  # most relevant last: closest to the thought it feeds; trimmed first if needed
        item = hit.item
        who = f"{item.author}: " if item.author else ""
        title = f" {item.title}" if item.title else ""
        origin = (
            f" · {WRITTEN_FROM}{provenance.origins(sources[item.id])}"
            if item.id in sources and item.tier != "kb"
            else ""
        )
        lines.append(f"[{item.tier}{title} · {when_label(item)}{origin}] {who}{item.text}{version_note(item, texts)}")
    return Recall(lines, [h.item.id for h in hits], None, sources)


def _tainted_items(tainted: Tainted | None, items: list[Any]) -> dict[int, list[provenance.Source]]:
    """The sources of the recalled memories that are rows written from untrusted text, by item id."""
    if tainted is None or not tainted.active:
        return {}
    return provenance.of_tainted_items(tainted.reader.taints_of, items)


def goal_lines(standing: Standing, tainted: Tainted | None = None) -> list[str]:
    """HMP: pinned tasks first (always handled), by priority; then Nexus Ark's 3 short-term and 2 long-term
    active goals, by priority; then the other open tasks by priority, with the task counts. A goal or task written
    from untrusted text is fenced with its origin (only open ones are here: a closed one stops tainting the prompt)."""
    goals, open_tasks = standing.goals, standing.open_tasks
    pinned = [t for t in open_tasks if t.pinned]
    mark = _marker(tainted)
    lines = mark("task", [(t.id, f"[task {t.id} pinned, priority {t.priority}{_cycle(t)}] {t.title}") for t in pinned])
    lines += mark(
        "goal",
        [(g.id, f"[goal {g.id} short, priority {g.priority}] {g.title}") for g in goals if g.horizon == "short"][:3],
    )
    lines += mark(
        "goal",
        [
            (g.id, f"[goal {g.id} long, priority {g.priority}{_values(g)}] {g.title}")
            for g in goals
            if g.horizon == "long"
        ][:2],
    )
    counts = standing.task_counts
    if counts:
        lines.append("tasks: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())))
    lines += mark(
        "task",
        [
            (t.id, f"[task {t.id} {t.status}, priority {t.priority}{_cycle(t)}] {t.title}")
            for t in open_tasks
            if not t.pinned
        ][:5],
    )
    return lines


def _values(goal: Any) -> str:
    """Nexus Ark: a long-term goal names the values it serves."""
    return f"; serves {', '.join(map(str, goal.related_values))}" if goal.related_values else ""


def _cycle(task: Any) -> str:
    return f", its sub-cycle {task.repl_status}" if task.repl_status else ""


def abstract_lines(
    standing: Standing, *, on_request: str = ABSTRACTS_ON_REQUEST, tainted: Tainted | None = None
) -> list[str]:
    """auto: the newest two of the last days (those of the focus tags first); manual: only that they wait to be
    asked for (HMP's manual delivery: the persona requests them). `PromptManager.standing` read which."""
    if standing.abstract_on_request is not None:
        return [on_request.format(id=standing.abstract_on_request)]
    rows = standing.abstracts
    return _marker(tainted)("abstract", [(a.id, f"[abstract {a.id} {a.title}] {a.summary}") for a in reversed(rows)])


def episode_lines(standing: Standing, tainted: Tainted | None = None) -> list[str]:
    """The last month and week summaries that end before the first day shown, then the last days'."""
    latest = standing.episodes
    shown = latest["day"]
    first_day = shown[0].start if shown else "9999"
    rows = [
        (e.id, f"[{period} of {e.start}] {e.summary}")
        for period in ("month", "week")
        for e in latest[period]
        if Period(period, date.fromisoformat(e.start)).end.isoformat() <= first_day
    ]
    return _marker(tainted)("episode", rows + [(e.id, f"[{e.start}] {e.summary}") for e in shown])


def entity_lines(house: Managers, texts: list[str], limit: int = 3, tainted: Tainted | None = None) -> list[str]:
    joined = "\n".join(texts)
    return (
        _marker(tainted)(
            "entity",
            [
                (e.id, f"[{e.kind} {e.name}] {e.description} {'; '.join(map(str, e.facts or []))}".strip())
                for e in house.prompt.entities(joined, limit)
            ],
        )
        if joined
        else []
    )


def strategy_line(standing: Standing, tainted: Tainted | None = None) -> list[str]:
    """The latest dream's strategy (a dream that read rows written from untrusted text wrote it tainted)."""
    if standing.strategy is None:
        return []
    row, strategy = standing.strategy
    if tainted is not None and tainted.active and row is not None:
        return tainted.lines("insight", [(row, strategy)])
    return [strategy]
