"""Dreaming (Nexus Ark's sleep-time reflection): when, how deep, on what, and applying what the dream decided.

- When (`dream_due`): in quiet hours (default 00:00–07:00 local) or after `after_idle_minutes` without the
  human, at most once per local day, only if something happened since the last dream, and never before the
  persona has met its human (`has_met_human`: a first note, or `awake_until_met_ticks` ticks). While it dreams
  the loop reports "dreaming"; the human's "Wake up" (Controls) or a note ends the dream (graph/loop/autonomy.py).
- How deep (`choose_level`): level 3 when 30 days passed since the last level-3 dream (or the first dream),
  else level 2 when 7 days passed since the last level ≥ 2, else level 1.
- On what (`gather_material`): the recent log (level 1: the last day; 2: the week's day summaries; 3: the
  month's week summaries), memories recalled for it, the active goals and the open questions — and which rows
  those were (`read`), so what the dream writes keeps the provenance of what it read (memory/taint.py).
- Applying (`apply_dream`): the one structured answer is validated against DREAM_SCHEMA item by item (invalid
  items are dropped and reported), then insight, entity updates, goal updates, open questions and resolved
  questions are written in the caller's single transaction.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, tzinfo
from typing import Any

from jsonschema import Draft202012Validator

import i18n
from memory import Repos
from memory.note_kinds import HUMAN_SOURCES
from memory.taint import item_key
from persona.prompts import DREAM_LEVELS, DREAM_PROMPT, DREAM_SCHEMA
from persona.prose import is_prose
from persona.quiet_hours import in_quiet_hours
from persona.settings import DreamSettings

LOG_ITEM_CHARS = 240


@dataclass
class DreamOutcome:
    level: int
    insight_id: int | None = None
    insight: str = ""
    strategy: str = ""
    entities: list[str] = field(default_factory=list)
    goals: list[str] = field(default_factory=list)  # "new 4", "progress 2", "completed 1", "abandoned 3"
    questions_added: list[int] = field(default_factory=list)
    questions_resolved: list[int] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # items that failed validation or named unknown ids
    status: str = "applied"  # applied | empty

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _aware(value: datetime, like: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=like.tzinfo)


def choose_level(repos: Repos, now: datetime, settings: DreamSettings) -> int:
    first = repos.insights.first()
    if first is None:
        return 1
    last3 = repos.insights.last_at_level(3)
    if now - _aware((last3 or first).created_at, now) >= timedelta(days=settings.monthly_days):
        return 3
    last2 = repos.insights.last_at_level(2)
    if now - _aware((last2 or first).created_at, now) >= timedelta(days=settings.weekly_days):
        return 2
    return 1


def has_met_human(repos: Repos, settings: DreamSettings) -> bool:
    """The human has written at least once, or the persona has been up `awake_until_met_ticks` ticks."""
    return repos.notes.latest_human_at() is not None or repos.ticks.count() >= settings.awake_until_met_ticks


def dream_due(
    repos: Repos,
    now: datetime,
    zone: tzinfo,
    settings: DreamSettings,
    started: datetime | None = None,
    talking_minutes: float = 0.0,
) -> str | None:
    """Why the persona should dream now, or None. Never while a conversation goes on (DESIGN.md §9): a human's note
    waits unanswered, or one came within `talking_minutes` (`conversation.active_minutes`) — quiet hours or not."""
    if not settings.enabled:
        return None
    if repos.notes.unread_human_ids(limit=1):
        return None
    last_heard = repos.notes.latest_human_at()
    if last_heard is not None and now - _aware(last_heard, now) < timedelta(minutes=talking_minutes):
        return None
    today = now.astimezone(zone).date()
    last = repos.insights.latest()
    if last is not None and _aware(last.created_at, now).astimezone(zone).date() == today:
        return None  # at most once per local day…
    attempt = repos.config.last_dream_attempt
    if attempt and _aware(datetime.fromisoformat(attempt), now).astimezone(zone).date() == today:
        return None  # …even when that dream applied nothing (a rejected dream is not retried until tomorrow)
    newest = repos.messages.newest_id()
    if newest <= repos.config.last_dream_message:
        return None  # nothing happened since the last dream
    if not has_met_human(repos, settings):
        return None  # a new persona stays awake until its human has written (or it has been up a while)
    if in_quiet_hours(now, zone, settings.quiet_hours):
        return f"quiet hours ({settings.quiet_hours})"
    since = repos.notes.latest_human_at() or started
    if since is not None:
        idle = (now - _aware(since, now)).total_seconds() / 60
        if idle >= settings.after_idle_minutes:
            return f"idle for {idle:.0f} min"
    return None


def _who_wrote(note: Any, authors: dict[int, tuple[str, str]]) -> str:
    """ "my human wrote" for the owner (by any door), "<name> (guest) wrote" for anyone else."""
    name, role = authors.get(note.author_id, ("", "owner")) if note.author_id is not None else ("", "owner")
    return "my human wrote" if role == "owner" else f"{name} ({role}) wrote"


def gather_material(
    repos: Repos, memory: Any, level: int, now: datetime, zone: tzinfo, settings: DreamSettings
) -> dict[str, Any]:
    """The dream's material as prompt text, with the topic it started from and what it read (`read`: the rows, as
    [tier, ref])."""
    sections: list[str] = []
    recent = recent_rows(repos, settings)
    read: list[tuple[str, str]] = [("message", str(m.id)) for m in recent]
    notes = repos.notes.list(source="incoming", limit=10)
    lines = [
        f"- [{m.created_at.astimezone(zone):%m-%d %H:%M}] {'my human' if m.role == 'user' else 'I'}: "
        f"{m.content[:LOG_ITEM_CHARS]}"
        for m in recent
    ]
    authors = repos.people.names([n.author_id for n in notes if n.author_id is not None])
    lines += [
        f"- [{n.created_at.astimezone(zone):%m-%d %H:%M}] {_who_wrote(n, authors)}: {n.text[:LOG_ITEM_CHARS]}"
        for n in notes
        if n.source in HUMAN_SOURCES
    ]
    if lines:
        sections.append("What happened recently:\n" + "\n".join(lines[-settings.log_items :]))
    if level >= 2:
        days = repos.episodes.recent("day", 7)
        if days:
            sections.append("The last days:\n" + "\n".join(f"- {d.start}: {d.summary[:300]}" for d in days))
            read += [("episode", str(d.id)) for d in days]
    if level >= 3:
        weeks = repos.episodes.recent("week", 4) + repos.episodes.recent("month", 1)
        if weeks:
            sections.append(
                "The last weeks and month:\n"
                + "\n".join(f"- {w.period} of {w.start}: {w.summary[:300]}" for w in weeks)
            )
            read += [("episode", str(w.id)) for w in weeks]
    topic = (recent[-1].content if recent else (notes[-1].text if notes else "my life so far"))[:200]
    recalled: list[str] = []
    if memory is not None and settings.recall_k > 0:
        from memory.retrieval.index import Query

        try:
            hits = memory.search(
                Query(
                    text="\n".join(lines[-5:]) or topic,
                    k=settings.recall_k,
                    tiers=["message", "diary", "abstract", "episode", "insight", "llm_memory"],
                )
            )
            recalled = [f"- [{h.item.tier} {h.item.created_at:%Y-%m-%d}] {h.item.text[:LOG_ITEM_CHARS]}" for h in hits]
            read += [key for h in hits if (key := item_key(h.item.tier, h.item.ref)) is not None]
        except Exception as exc:  # recall is an aid; the dream goes on without it
            recalled = [f"- (recall failed: {type(exc).__name__})"]
    if recalled:
        sections.append("Memories that came back:\n" + "\n".join(recalled))
    goals = repos.goals.list(status="active", limit=10)
    horizon = "long" if level >= 3 else None
    shown = [g for g in goals if horizon is None or g.horizon == horizon] or goals
    if shown:
        sections.append(
            "My active goals:\n"
            + "\n".join(f"- id {g.id} ({g.horizon}, priority {g.priority}): {g.title}" for g in shown)
        )
        read += [("goal", str(g.id)) for g in shown]
    questions = repos.questions.open(limit=10)
    if questions:
        sections.append("My open questions:\n" + "\n".join(f"- id {q.id}: {q.topic}" for q in questions))
        read += [("question", str(q.id)) for q in questions]
    latest = repos.insights.latest()
    if latest is not None:
        sections.append(f"My last dream's strategy: {latest.strategy}")
        read.append(("insight", str(latest.id)))
    return {
        "text": "\n\n".join(sections) or "(a quiet time: nothing new happened)",
        "topic": topic,
        "newest_message_id": repos.messages.newest_id(),
        "recalled": len(recalled),
        "read": [list(key) for key in dict.fromkeys(read)],
    }


def recent_rows(repos: Repos, settings: DreamSettings) -> list[Any]:
    """The recent log a dream reads: thoughts and the human's turns."""
    return repos.messages.log_recent(settings.log_items, kinds=("response", "continuation", "human"))


def dream_prompt(name: str, identity: str, level: int, material: str, language: str = "en") -> str:
    return i18n.text(DREAM_PROMPT, language).format(
        name=name,
        level_text=i18n.text(DREAM_LEVELS[level], language),
        identity=identity.strip()[:1500],
        material=material,
    )


def _valid_items(data: dict[str, Any], key: str, dropped: list[str]) -> list[dict[str, Any]]:
    validator = Draft202012Validator(DREAM_SCHEMA["properties"][key]["items"])
    items = data.get(key) or []
    if not isinstance(items, list):
        dropped.append(f"{key}: not a list")
        return []
    valid = []
    for item in items:
        error = next(iter(validator.iter_errors(item)), None)
        if error is None:
            valid.append(item)
        else:
            dropped.append(f"{key} item {json.dumps(item, ensure_ascii=False)[:120]}: {error.message[:120]}")
    return valid


def unusable_dream(data: dict[str, Any]) -> str | None:
    """Why a dream answer cannot be applied (no insight, or insight/strategy not in plain words), or None."""
    insight = str(data.get("insight") or "").strip()
    strategy = str(data.get("strategy") or "").strip()
    if not insight:
        return "no insight"
    if not is_prose(insight, min_words=5):
        return f"the insight is not prose ({insight[:80]!r})"
    if strategy and not is_prose(strategy):
        return f"the strategy is not prose ({strategy[:80]!r})"
    return None


def apply_dream(
    repos: Repos, data: dict[str, Any], *, level: int, now: datetime, topic: str, newest_message_id: int
) -> DreamOutcome:
    """Write everything the dream decided, in the caller's transaction. Nothing is written without an insight
    and a strategy in plain words (a small model's dream can be markup or digits: it must not reach the prompt)."""
    outcome = DreamOutcome(level=level)
    insight = str(data.get("insight") or "").strip()
    strategy = str(data.get("strategy") or "").strip()
    problem = unusable_dream(data)
    if problem:
        outcome.status = "empty"
        outcome.dropped.append(f"{problem}: nothing applied")
        return outcome
    row = repos.insights.add(
        insight,
        strategy=strategy,
        log_entry=str(data.get("log_entry") or "").strip(),
        trigger_topic=topic,
        level=level,
        created_at=now,
    )
    outcome.insight_id, outcome.insight, outcome.strategy = row.id, insight, strategy
    for item in _valid_items(data, "entity_updates", outcome.dropped):
        name = item["name"].strip()
        if name:
            repos.entities.merge(name, kind=item["kind"], facts=[f.strip() for f in item["facts"] if f.strip()])
            outcome.entities.append(name)
    for item in _valid_items(data, "goal_updates", outcome.dropped):
        _apply_goal(repos, item, outcome)
    open_ids = {q.id for q in repos.questions.open()}
    for item in _valid_items(data, "resolved_questions", outcome.dropped):
        if item["id"] in open_ids and item["answer"].strip():
            repos.questions.resolve(item["id"], item["answer"], now)
            outcome.questions_resolved.append(item["id"])
        else:
            outcome.dropped.append(f"resolved_questions: no open question {item['id']}")
    for item in _valid_items(data, "open_questions", outcome.dropped):
        if item["topic"].strip():
            q = repos.questions.add(
                item["topic"],
                context=str(item.get("context") or ""),
                priority=float(item["priority"]),
                source="dream",
                created_at=now,
            )
            outcome.questions_added.append(q.id)
    repos.config.last_dream_message = newest_message_id
    return outcome


def _apply_goal(repos: Repos, item: dict[str, Any], outcome: DreamOutcome) -> None:
    action, note = item["action"], str(item.get("note") or "").strip()
    if action == "new":
        title = str(item.get("title") or "").strip()
        if not title:
            outcome.dropped.append("goal_updates: a new goal without a title")
            return
        existing = [g for g in repos.goals.list(status="active") if g.title.strip().lower() == title.lower()]
        if existing:
            outcome.dropped.append(f"goal_updates: goal {existing[0].id} already has this title")
            return
        added = repos.goals.add(
            title, horizon=item.get("horizon") or "short", priority=int(item.get("priority") or 1), description=note
        )
        outcome.goals.append(f"new {added.id}")
        return
    goal_id = item.get("id")
    try:
        goal = repos.goals.get(goal_id) if goal_id is not None else None
    except LookupError:
        goal = None
    if goal is None or goal.status not in ("active", "paused"):
        outcome.dropped.append(f"goal_updates: {action} of goal {goal_id}, which is not active")
        return
    if action == "progress":
        repos.goals.update(goal.id, progress=note or "progress noted in a dream")
    elif action == "completed":
        repos.goals.update(goal.id, status="completed", progress=note or None)
    else:  # abandoned: HMP's failed, with the reason
        repos.goals.update(goal.id, status="failed", reason=f"abandoned in a dream: {note or 'no reason given'}")
    outcome.goals.append(f"{action} {goal.id}")
