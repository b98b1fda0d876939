"""Thoughts: the ticks as cards (what the persona thought, what it tried to do and what came of it, what its reflexes
said, what it cost, which model answered and which failed) and the tree of its Stelis threads."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from i18n import N_
from managers import Managers
from memory.clock import as_utc
from web.errors import NotFoundError
from web.schemas.thoughts import (
    CommandOutcome,
    EmotionRating,
    FailedCall,
    ReflexVerdicts,
    ThreadNode,
    ThreadTree,
    TickCard,
    TickPage,
    TickTokens,
)

if TYPE_CHECKING:
    from managers.journal import CommandView, LLMCallView, StagnationView, ThoughtView, TickView

THOUGHT_KINDS = ("response", "continuation", "stagnation_record")
RAN = {"executed"}
EMOTION_TEXT = re.compile(r"^\s*([^:]+?)\s*:\s*([1-5])\s*(?:\((.*)\))?\s*$", re.DOTALL)
QUARANTINE_PREVIEW = 2000


def emotion_ratings(emotions: list[Any]) -> list[EmotionRating]:
    """The stored `["joy:4 (why)", …]` (or dicts) as ratings; what cannot be read is passed over."""
    ratings = []
    for item in emotions or []:
        if isinstance(item, dict) and item.get("emotion"):
            name, strength, reason = str(item["emotion"]), item.get("strength") or 3, str(item.get("reason") or "")
        elif match := EMOTION_TEXT.match(str(item)):
            name, strength, reason = match.group(1), int(match.group(2)), match.group(3) or ""
        else:
            continue
        try:
            ratings.append(
                EmotionRating(
                    emotion=name.strip().lower()[:40],
                    strength=min(5, max(1, int(strength))),
                    reason=reason.strip()[:200],
                )
            )
        except (TypeError, ValueError):
            continue
    return ratings


def _quarantined(summary: dict[str, Any]) -> str | None:
    answer = summary.get("quarantined")
    if answer is None:
        return None
    text = answer.get("response") if isinstance(answer, dict) else answer
    return str(text or "")[:QUARANTINE_PREVIEW]


def _cards(house: Managers, ticks: list[TickView]) -> list[TickCard]:
    """Cards for these tick rows, newest first: a handful of queries per thread, not per tick."""
    by_thread: dict[str, list[int]] = defaultdict(list)
    for row in ticks:
        by_thread[row.thread_id].append(row.tick)
    thoughts: dict[tuple[str, int | None], ThoughtView] = {}
    commands: defaultdict[tuple[str, int | None], list[CommandView]] = defaultdict(list)
    calls: defaultdict[tuple[str, int | None], list[LLMCallView]] = defaultdict(list)
    metrics: dict[tuple[str, int | None], StagnationView] = {}
    for thread_id, numbers in by_thread.items():
        details = house.journal.at_ticks(thread_id, numbers, THOUGHT_KINDS)
        for message in details.messages:
            thoughts.setdefault((thread_id, message.tick), message)  # the first is the thought; a record follows it
        for command in details.commands:
            commands[(thread_id, command.tick)].append(command)
        for call in details.llm_calls:
            calls[(thread_id, call.tick)].append(call)
        for metric in details.stagnation:
            metrics[(thread_id, metric.tick)] = metric
    cards = []
    for row in sorted(ticks, key=lambda t: t.id, reverse=True):
        key = (row.thread_id, row.tick)
        cards.append(_card(row, thoughts.get(key), commands[key], calls[key], metrics.get(key)))
    return cards


def _card(
    row: TickView,
    message: ThoughtView | None,
    commands: list[CommandView],
    calls: list[LLMCallView],
    metric: StagnationView | None,
) -> TickCard:
    summary = dict(row.summary or {})
    started, finished = as_utc(row.started_at), as_utc(row.finished_at)
    answered_by = next((c.llm_id for c in calls if c.ok and c.purpose == "think"), None)
    novelty = metric.novelty_score if metric is not None else (message.novelty_score if message else None)
    reflexes = ReflexVerdicts(
        emotions=emotion_ratings(message.emotions if message else summary.get("emotions") or []),
        novelty_score=novelty if novelty is not None else summary.get("novelty"),
        stagnation_flag=bool(
            metric.stagnation_flag
            if metric is not None
            else (message.stagnation_flag if message else summary.get("stagnation"))
        ),
        stagnation_reason=(metric.reason if metric is not None else None)
        or (message.stagnation_reason if message else None),
        streak=metric.streak if metric is not None else None,
        mechanisms=list(metric.mechanisms or []) if metric is not None else [],
        rating=message.rating if message else summary.get("rating"),
        auto_pass=message.auto_pass if message else summary.get("auto_pass"),
        confidence=message.confidence if message else None,
    )
    context = summary.get("context") or {}
    return TickCard(
        id=row.id,
        thread=row.thread_id,
        tick=row.tick,
        status=row.status,
        mode=row.mode,
        started_at=started,
        finished_at=finished,
        duration_s=round((finished - started).total_seconds(), 3) if finished and started else None,
        llm_id=(message.llm_id if message else None) or answered_by,
        thought=message.content if message else None,
        thought_kind=message.kind if message else None,
        commands=[
            CommandOutcome(
                cmd_id=c.cmd_id,
                type=c.type,
                args=dict(c.args or {}),
                status=c.status,
                result=c.result or "",
                ran=c.status in RAN,
            )
            for c in commands
        ],
        parse_errors=[str(e) for e in summary.get("parse_errors") or []],
        failovers=[
            FailedCall(llm_id=c.llm_id, purpose=c.purpose, error=c.error, at=as_utc(c.created_at))
            for c in calls
            if not c.ok
        ],
        reflexes=reflexes,
        tokens=TickTokens(
            prompt=row.prompt_tokens or 0,
            completion=row.completion_tokens or 0,
            llm_calls=row.llm_calls or 0,
            llm_ms=round(row.llm_ms or 0.0, 1),
        ),
        dropped=[str(d) for d in context.get("dropped") or []],
        error=summary.get("error"),
        failed_step=summary.get("step"),
        quarantined=_quarantined(summary),
        attempts=int(summary.get("attempts") or 1),
    )


def tick_page(house: Managers, *, limit: int = 20, before: int | None = None, thread_id: str | None = None) -> TickPage:
    rows = house.journal.ticks(limit, thread_id, before_id=before)
    cards = _cards(house, rows)
    older = bool(rows) and bool(house.journal.ticks(1, thread_id, before_id=min(r.id for r in rows)))
    return TickPage(ticks=cards, next_before=cards[-1].id if cards and older else None)


def tick_card(house: Managers, thread_id: str, tick: int) -> TickCard:
    row = house.journal.tick(thread_id, tick)
    if row is None:
        raise NotFoundError(
            N_("no tick %(tick)s in thread %(thread_id)r"), tick=tick, thread_id=thread_id, field="tick"
        )
    return _cards(house, [row])[0]


def latest_card(house: Managers, thread_id: str | None, tick: int | None) -> TickCard | None:
    """The card a journal event is about: its own tick, else the newest (a Stelis child ticks under its root's
    journal)."""
    row = house.journal.tick(thread_id, int(tick)) if thread_id and tick is not None else None
    if row is None:
        newest = house.journal.ticks(1)
        row = newest[0] if newest else None
    return _cards(house, [row])[0] if row is not None else None


def _window(house: Managers, thread_id: str) -> dict[str, Any]:
    last = house.journal.ticks(1, thread_id)
    return ((last[0].summary or {}).get("context") or {}) if last else {}


def thread_tree(house: Managers) -> ThreadTree:
    shares = house.journal.thread_shares()
    threads = [share.thread for share in shares]
    nodes: dict[str, ThreadNode] = {}
    for share in shares:
        t = share.thread
        window = _window(house, t.id)
        nodes[t.id] = ThreadNode(
            id=t.id,
            parent_id=t.parent_id,
            label=t.label or "",
            status=t.status,
            origin=t.origin,
            playbook=t.playbook or "",
            depth=t.depth,
            tick=t.tick,
            window_ratio=t.window_ratio or 1.0,
            effective_ratio=round(share.effective_ratio, 4),
            window_tokens=window.get("window_tokens"),
            budget_tokens=window.get("budget_tokens"),
            messages=share.messages,
            chronicle=t.chronicle,
            error=t.error,
            created_at=as_utc(t.created_at),
            completed_at=as_utc(t.completed_at),
        )
    roots: list[ThreadNode] = []
    for t in threads:
        parent = nodes.get(t.parent_id) if t.parent_id else None
        (parent.children if parent is not None else roots).append(nodes[t.id])
    return ThreadTree(roots=roots, count=len(nodes))
