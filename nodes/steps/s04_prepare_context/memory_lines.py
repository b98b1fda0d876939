"""What the memory tiers put in the prompt each tick (the blocks from "recall" to "abstracts" in prepare_context).

`auto_recall` searches every retrievable tier with the incoming notes and the current focus (the last
thought and the active goals); items already visible as recent thoughts are left out. The context mode
(cycle.concentration / cycle.meditation) changes both the recent-thoughts selection and the recall.
Nothing here may break a tick: a failing search is logged and the block stays empty.
"""

from __future__ import annotations

import logging
import re
from datetime import date, timedelta
from typing import Any, NamedTuple

from managers.abstracts import delivery
from managers.loop import ThreadCycle, context_mode
from memory import Repos, provenance
from memory.repositories.messages import MessageLine
from memory.retrieval.emotion_focus import emotions_match
from memory.retrieval.index import Query
from memory.updates import version_note, versions_of, when_label
from memory.upkeep.episodes import Period
from nodes.stelis.history import lineage_ids, render_item, timeline
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


def _plain(tier: str, rows: Any) -> list[str]:
    return [line for _, line in rows]


def _marker(tainted: Tainted | None) -> Any:
    """How lines of rows are shown: a tainted row's fenced with its origin (`Tainted.lines`), or as they are."""
    return tainted.lines if tainted is not None else _plain


def recent_thoughts(
    repos: Repos,
    thread_id: str,
    k: int,
    cycle: ThreadCycle,
    memory=None,
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
    if (mode == "standard" or not k) and tick is not None and k:
        step = max(1, k // 2)
        rows = timeline(repos, thread_id, last=k + step - 1)
        since = ((tick - 1 - k) // step) * step  # the window shows this thread's ticks after it
        rows = [m for m in rows if m.thread_id != thread_id or m.tick is None or m.tick > since]
    elif mode == "standard" or not k:
        rows = timeline(repos, thread_id, last=k) if k else []
    elif mode == "concentration":
        rows = [m for m in timeline(repos, thread_id, last=k * 5) if _focused(m, cycle)][-k:]
    else:  # meditation: the wider window's ids only; the K chosen are read whole
        rows = repos.messages.lines_by_id(_diverse(timeline(repos, thread_id, last=k * 5, columns=("id",)), k, memory))
    seen = lineage_ids(repos, thread_id)
    render = plain_item if plain else render_item
    return [render(repos, m, thread_id, seen) for m in rows], [m.id for m in rows]


_TICK_REFERENCE = re.compile(r"\s*\bto tick \d+\b")


def plain_item(repos: Repos, message: MessageLine, thread_id: str, seen: set[str]) -> str:
    """A recent thought as a plain list item: its words; a stagnation record without its tick number."""
    if message.kind == "response":
        flagged = (message.meta or {}).get("self_error")
        mark = f" (I flagged this as a reasoning error: {flagged.get('reason')})" if isinstance(flagged, dict) else ""
        return "- " + message.content.strip() + mark
    if message.kind == "stagnation_record":
        return "- " + _TICK_REFERENCE.sub(" to an earlier thought", message.content.strip())
    return render_item(repos, message, thread_id, seen)


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


def _diverse(pool: list[MessageLine], k: int, memory) -> list[int]:
    """The ids of the K most different messages of `pool` (greedy farthest-first over their vectors; meditation),
    in the pool's oldest-first order."""
    if len(pool) <= k or memory is None:
        return [m.id for m in pool[-k:]]
    keys = [f"msg:{m.id}" for m in pool]
    keep = set(memory.diverse(keys, k))
    return [m.id for m, key in zip(pool, keys) if key in keep]


def focus_text(repos: Repos, thread_id: str, notes: list[Any], goals: list[Any] | None = None) -> str:
    """What recall searches with: the notes, the last thought and the three leading active goals (`goals`: the
    active goals in priority order, when the caller has them)."""
    parts = [n.text for n in notes]
    last = next(
        (
            rows[-1].content
            for kind in ("response", "continuation")
            if (rows := repos.messages.recent_lines(thread_id, 1, kinds=(kind,), columns=("content",)))
        ),
        None,
    )
    if last is not None:
        parts.append(last[-FOCUS_CHARS:])
    parts += [g.title for g in (repos.goals.list(status="active", limit=3) if goals is None else goals[:3])]
    return "\n".join(p for p in parts if p and p.strip())


def auto_recall(
    services,
    repos: Repos,
    thread_id: str,
    notes: list[Any],
    shown_message_ids: list[int],
    cycle: ThreadCycle,
    goals: list[Any] | None = None,
    tainted: Tainted | None = None,
    scope: list[str] | None = None,
) -> Recall:
    """The memories recalled for this tick: their lines, item ids, the error if recall failed, and where the
    untrusted ones came from (by item id) — a row written from untrusted text says so on its line. `scope`: the tags
    a memory needs (one of them) when the tick answers someone who may not see everything (managers/audience.py);
    then only their notes are the focus."""
    if services.memory is None:
        return Recall([], [], None, {})
    text = focus_text(repos, thread_id, notes, goals) if scope is None else "\n".join(n.text for n in notes)
    if not text:
        return Recall([], [], None, {})
    mode = context_mode(cycle)
    k = services.settings.memory.recall_k
    shown = repos.items.ids_of(
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
    texts = versions_of(repos, [h.item for h in hits])  # what they replaced, or what replaced them
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
    return provenance.of_tainted_items(tainted.repos.taints.of_keys, items)


def goal_lines(repos: Repos, goals: list[Any] | None = None, tainted: Tainted | None = None) -> list[str]:
    """HMP: pinned tasks first (always handled), by priority; then Nexus Ark's 3 short-term and 2 long-term
    active goals, by priority; then the other open tasks by priority, with the task counts. `goals`: the leading
    active goals of each horizon (`GoalRepo.leading`), when the caller has them. A goal or task written from
    untrusted text is fenced with its origin (only open ones are here: a closed one stops tainting the prompt)."""
    goals = repos.goals.leading(per_horizon=3) if goals is None else goals
    open_tasks = repos.tasks.open_lines(limit=8)
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
    counts = repos.tasks.counts()
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


def _cycle(task) -> str:
    return f", its sub-cycle {task.repl_status}" if task.repl_status else ""


def abstract_lines(
    repos: Repos,
    now,
    tags: list[str] | None,
    days: int = 7,
    *,
    delivery: str = "auto",
    on_request: str = ABSTRACTS_ON_REQUEST,
    tainted: Tainted | None = None,
) -> list[str]:
    """auto: the newest two of the last `days` (those of the focus tags first); manual: only that they wait to be
    asked for (HMP's manual delivery: the persona requests them)."""
    if delivery == "manual":
        newest = repos.abstracts.latest()
        return [on_request.format(id=newest.id)] if newest is not None else []
    rows = repos.abstracts.newest_lines(tags=tags, since=now - timedelta(days=days), limit=2) if tags else []
    rows = rows or repos.abstracts.newest_lines(since=now - timedelta(days=days), limit=2)
    return _marker(tainted)("abstract", [(a.id, f"[abstract {a.id} {a.title}] {a.summary}") for a in reversed(rows)])


def episode_lines(repos: Repos, days: int, tainted: Tainted | None = None) -> list[str]:
    """The last month and week summaries that end before the first day shown, then the last `days` days."""
    latest = repos.episodes.latest({"day": days, "week": 1, "month": 1})
    shown = latest["day"]
    first_day = shown[0].start if shown else "9999"
    rows = [
        (e.id, f"[{period} of {e.start}] {e.summary}")
        for period in ("month", "week")
        for e in latest[period]
        if Period(period, date.fromisoformat(e.start)).end.isoformat() <= first_day
    ]
    return _marker(tainted)("episode", rows + [(e.id, f"[{e.start}] {e.summary}") for e in shown])


def entity_lines(repos: Repos, texts: list[str], limit: int = 3, tainted: Tainted | None = None) -> list[str]:
    joined = "\n".join(texts)
    return (
        _marker(tainted)(
            "entity",
            [
                (e.id, f"[{e.kind} {e.name}] {e.description} {'; '.join(map(str, e.facts or []))}".strip())
                for e in repos.entities.mentioned_in(joined, limit)
            ],
        )
        if joined
        else []
    )


def strategy_line(repos: Repos, tainted: Tainted | None = None) -> list[str]:
    """The latest dream's strategy (a dream that read rows written from untrusted text wrote it tainted)."""
    if tainted is not None and tainted.active:
        latest = repos.insights.latest()
        return tainted.lines("insight", [(latest.id, latest.strategy)]) if latest and latest.strategy else []
    strategy = repos.insights.latest_strategy()
    return [strategy] if strategy else []
