"""Episodic memory (Nexus Ark): one summary per day, rolled up per week (Mon–Sun) and per month.

After a day ends, its memories (conversation, thoughts, diary, abstracts) are summarised into a `day`
episode; after a week or a month ends, its day summaries are rolled up. The persona's days are local days
(the `timezone` setting, an IANA name, given to `zone_of`; else the machine's zone). `next_due` finds the oldest missing
summary within `backfill_days`; the manage_memory step builds at most one per tick, so a long absence never
stalls a tick, and a dead LLM only postpones it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import i18n
from memory.models import Episode, MemoryItem
from memory.repositories import Repos
from memory.upkeep.prompts import EPISODE_PROMPT, EPISODE_SCHEMA

Generate = Callable[[str, dict[str, Any]], dict[str, Any]]  # (prompt, json schema) -> the model's JSON object
DAY_TIERS = ("message", "diary", "abstract", "llm_memory")
MAX_DAY_ITEMS = 60
ITEM_CHARS = 300
ROLLUP_CHARS = {"week": 600, "month": 250}


@dataclass(frozen=True)
class Period:
    kind: str  # day | week | month
    start: date

    @property
    def end(self) -> date:  # exclusive
        if self.kind == "day":
            return self.start + timedelta(days=1)
        if self.kind == "week":
            return self.start + timedelta(days=7)
        return (self.start.replace(day=28) + timedelta(days=4)).replace(day=1)

    def describe(self) -> str:
        if self.kind == "day":
            return f"the day {self.start:%A %Y-%m-%d}"
        if self.kind == "week":
            return f"the week {self.start} to {self.end - timedelta(days=1)}"
        return f"the month {self.start:%B %Y}"


def zone_of(name: str | None) -> tzinfo:
    """The zone of an IANA name; the machine's zone when there is none."""
    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"timezone {name!r} is not a known IANA zone") from exc
    return datetime.now().astimezone().tzinfo or UTC


def _bounds(period: Period, zone: tzinfo) -> tuple[datetime, datetime]:
    return (
        datetime.combine(period.start, time(), zone).astimezone(UTC),
        datetime.combine(period.end, time(), zone).astimezone(UTC),
    )


def next_due(repos: Repos, today: date, zone: tzinfo, backfill_days: int = 7) -> Period | None:
    """The oldest summary that should exist by `today` and does not: days first, then weeks, then months."""
    for back in range(backfill_days, 0, -1):
        day = Period("day", today - timedelta(days=back))
        if repos.episodes.get("day", day.start.isoformat()) is None and repos.items.any_written_between(
            DAY_TIERS, *_bounds(day, zone)
        ):
            return day
    this_week = today - timedelta(days=today.weekday())
    for back in (4, 3, 2, 1):
        week = Period("week", this_week - timedelta(weeks=back))
        if repos.episodes.get("week", week.start.isoformat()) is None and _days_in(repos, week):
            return week
    this_month = today.replace(day=1)
    for back in (2, 1):
        start = this_month
        for _ in range(back):
            start = (start - timedelta(days=1)).replace(day=1)
        month = Period("month", start)
        if repos.episodes.get("month", month.start.isoformat()) is None and _days_in(repos, month):
            return month
    return None


def _days_in(repos: Repos, period: Period) -> list[Episode]:
    return repos.episodes.between("day", period.start.isoformat(), (period.end - timedelta(days=1)).isoformat())


def _sample(items: list[MemoryItem], limit: int) -> list[MemoryItem]:
    """Abstracts first, then an even spread of the rest, in time order."""
    if len(items) <= limit:
        return items
    abstracts = [i for i in items if i.tier == "abstract"][: limit // 3]
    rest = [i for i in items if i.tier != "abstract"]
    room = limit - len(abstracts)
    step = len(rest) / room
    chosen = {id(x) for x in abstracts} | {id(rest[int(n * step)]) for n in range(room)}
    return [i for i in items if id(i) in chosen]


def build_episode(
    repos: Repos, period: Period, zone: tzinfo, generate: Generate, persona_name: str, language: str = "en"
) -> Episode | None:
    """Summarise one period into its Episode row (updated if it exists). None when it has nothing to tell."""
    if period.kind == "day":
        items = repos.items.written_between(DAY_TIERS, *_bounds(period, zone))
        if not items:
            return None
        chosen = _sample(items, MAX_DAY_ITEMS)
        lines = [
            f"- {i.created_at.astimezone(zone):%H:%M} [{i.tier}] {i.author + ': ' if i.author else ''}"
            f"{i.text[:ITEM_CHARS]}"
            for i in chosen
        ]
        sources = [f"{i.tier}:{i.ref}" for i in items]
    else:
        days = _days_in(repos, period)
        if not days:
            return None
        cap = ROLLUP_CHARS[period.kind]
        lines = [f"- {d.start}: {d.summary[:cap]}" for d in days]
        sources = [f"day:{d.start}" for d in days]
    data = generate(
        i18n.text(EPISODE_PROMPT, language).format(
            name=persona_name, period_text=period.describe(), items="\n".join(lines)
        ),
        EPISODE_SCHEMA,
    )
    summary = str(data.get("summary") or "").strip()
    if not summary:  # the model gave nothing usable: keep the period's own words
        summary = " / ".join(line[2:][:160] for line in lines[:5])
    events = [str(e).strip() for e in data.get("key_events") or [] if str(e).strip()][:5]
    tone = str(data.get("emotional_tone") or "neutral").strip().lower() or "neutral"
    return repos.episodes.upsert(
        period.kind, period.start.isoformat(), summary, key_events=events, emotional_tone=tone, sources=sources
    )
