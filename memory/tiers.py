"""Repositories of the memory tiers (DESIGN §5). Retrievable tiers keep their `memory_items` row in step
in the same transaction (see MemoryItemRepo), so search sees every write, update and delete."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, or_, select
from sqlalchemy.orm import Session

from memory.models import (
    Abstract,
    Concept,
    ConceptLink,
    DiaryEntry,
    EmotionLogEntry,
    Entity,
    Episode,
    Goal,
    GoalLink,
    Insight,
    KBDocument,
    LLMMemory,
    MemoryBlock,
    OpenQuestion,
    Task,
    UnverifiedFact,
    utcnow,
)

from memory.text import emotion_score, emotion_strengths

BLOCK_LIMITS = {"core": 2000, "notepad": 3000}
GOAL_STATUSES = ("active", "paused", "completed", "failed")
TASK_STATUSES = ("open", "in_progress", "done", "failed", "cancelled", "frozen")
CLOSED_TASK_STATUSES = ("done", "failed", "cancelled")


class MemoryLimitError(ValueError):
    """A self-edit would take a block over its size limit; nothing is saved."""


class NotFound(LookupError):
    pass


class _TierRepo:
    def __init__(self, session: Session, items):
        self.s, self.items = session, items

    def _get(self, model, row_id: int):
        row = self.s.get(model, int(row_id))
        if row is None:
            raise NotFound(f"no {model.__tablename__.rstrip('s')} {row_id}")
        return row


class BlockRepo(_TierRepo):
    """Core memory and notepad: always injected, edited by the persona, never saved over their limit."""

    def get(self, name: str) -> MemoryBlock:
        block = self.s.get(MemoryBlock, name)
        if block is None:
            block = MemoryBlock(name=name, content="", char_limit=BLOCK_LIMITS.get(name, 2000))
            self.s.add(block)
            self.s.flush()
        return block

    def write(self, name: str, content: str) -> MemoryBlock:
        block = self.get(name)
        if len(content) > block.char_limit:
            raise MemoryLimitError(f"{name} would be {len(content)} chars, over its {block.char_limit}-char limit; "
                                   f"nothing saved — shorten it or replace old text first")
        block.content, block.updated_at = content, utcnow()
        self.s.flush()
        return block

    def append(self, name: str, text: str) -> MemoryBlock:
        current = self.get(name).content
        return self.write(name, f"{current}\n{text}".strip() if current else text)

    def replace(self, name: str, old: str, new: str) -> MemoryBlock:
        current = self.get(name).content
        if old not in current:
            raise NotFound(f"{name} does not contain {old[:60]!r}")
        return self.write(name, current.replace(old, new, 1))


class LLMMemoryRepo(_TierRepo):
    """HMP `llm_memory`: the model's own notepad of ideas; the active entries are searchable like any memory."""

    def _index(self, row: LLMMemory) -> None:
        self.items.put("llm_memory", row.id, row.content, title=row.title, tags=row.tags, thread_id=row.thread_id,
                       importance=0.6, created_at=row.created_at)
        if row.status != "active":
            self.items.set_status_of("llm_memory", row.id, row.status)

    def add(self, content: str, *, title: str = "", tags: Iterable[str] = (), thread_id: str | None = None,
            llm_id: str | None = None) -> LLMMemory:
        row = LLMMemory(content=content, title=title, tags=list(tags), thread_id=thread_id, llm_id=llm_id,
                        status="active")
        self.s.add(row)
        self.s.flush()
        self._index(row)
        return row

    def get(self, entry_id: int) -> LLMMemory:
        return self._get(LLMMemory, entry_id)

    def recent(self, limit: int = 20, include_archived: bool = False) -> list[LLMMemory]:
        q = select(LLMMemory)
        if not include_archived:
            q = q.where(LLMMemory.status == "active")
        return list(reversed(self.s.scalars(q.order_by(LLMMemory.id.desc()).limit(limit)).all()))

    def update(self, entry_id: int, *, content: str | None = None, title: str | None = None,
               tags: list[str] | None = None) -> LLMMemory:
        row = self.get(entry_id)
        if content is not None:
            row.content = content
        if title is not None:
            row.title = title
        if tags is not None:
            row.tags = list(tags)
        row.updated_at = utcnow()
        self._index(row)
        return row

    def delete(self, entry_id: int) -> bool:
        row = self.s.get(LLMMemory, int(entry_id))
        if row is None:
            return False
        self.s.delete(row)
        self.items.remove("llm_memory", entry_id)
        return True


class DiaryRepo(_TierRepo):
    def _index(self, entry: DiaryEntry) -> None:
        self.items.put("diary", entry.id, entry.text, tags=entry.tags,
                       emotions=[name for name, _ in emotion_strengths(entry.emotions)],
                       emotion_score=emotion_score(entry.emotions),
                       importance=min(1.0, 0.5 + 0.1 * entry.priority), pinned=entry.pinned,
                       thread_id=entry.thread_id, created_at=entry.created_at)
        if entry.status == "archived":
            self.items.set_status_of("diary", entry.id, "archived")

    def add(self, text: str, *, tags: Iterable[str] = (), emotions: Iterable[str] = (), priority: int = 0,
            thread_id: str | None = None, tick: int | None = None) -> DiaryEntry:
        entry = DiaryEntry(text=text, tags=list(tags), emotions=list(emotions), priority=priority,
                           thread_id=thread_id, tick=tick)
        self.s.add(entry)
        self.s.flush()
        self._index(entry)
        return entry

    def get(self, entry_id: int) -> DiaryEntry:
        return self._get(DiaryEntry, entry_id)

    def list(self, *, limit: int = 20, tag: str | None = None, include_archived: bool = False,
             pinned_only: bool = False) -> list[DiaryEntry]:
        q = select(DiaryEntry)
        if not include_archived:
            q = q.where(DiaryEntry.status == "active")
        if pinned_only:
            q = q.where(DiaryEntry.pinned.is_(True))
        rows = list(self.s.scalars(q.order_by(DiaryEntry.id.desc()).limit(limit * (5 if tag else 1))).all())
        if tag:
            rows = [r for r in rows if tag in (r.tags or [])][:limit]
        return list(reversed(rows))

    def update(self, entry_id: int, *, text: str | None = None, tags: list[str] | None = None,
               priority: int | None = None) -> DiaryEntry:
        entry = self.get(entry_id)
        if text is not None:
            entry.text = text
        if tags is not None:
            entry.tags = list(tags)
        if priority is not None:
            entry.priority = priority
        entry.updated_at = utcnow()
        self._index(entry)
        return entry

    def set_pinned(self, entry_id: int, pinned: bool) -> DiaryEntry:
        entry = self.get(entry_id)
        entry.pinned = pinned
        self._index(entry)
        return entry

    def delete(self, entry_id: int) -> None:
        self.s.delete(self.get(entry_id))
        self.items.remove("diary", entry_id)


class ConceptRepo(_TierRepo):
    def _index(self, concept: Concept) -> None:
        self.items.put("concept", concept.id, concept.description or concept.name, title=concept.name,
                       tags=concept.tags, pinned=concept.pinned, importance=min(1.0, 0.4 + 0.1 * concept.weight))
        if concept.status == "archived":
            self.items.set_status_of("concept", concept.id, "archived")

    def add(self, name: str, description: str = "", *, tags: Iterable[str] = (), weight: float = 1.0) -> Concept:
        if self.by_name(name) is not None:
            raise ValueError(f"concept {name!r} exists; update it instead")
        concept = Concept(name=name, description=description, tags=list(tags), weight=weight)
        self.s.add(concept)
        self.s.flush()
        self._index(concept)
        return concept

    def get(self, concept_id: int) -> Concept:
        return self._get(Concept, concept_id)

    def by_name(self, name: str) -> Concept | None:
        return self.s.scalars(select(Concept).where(func.lower(Concept.name) == name.lower())).first()

    def resolve(self, ref: int | str) -> Concept:
        if isinstance(ref, int) or str(ref).isdigit():
            return self.get(int(ref))
        concept = self.by_name(str(ref))
        if concept is None:
            raise NotFound(f"no concept {ref!r}")
        return concept

    def list(self, *, limit: int = 50, include_archived: bool = False) -> list[Concept]:
        q = select(Concept)
        if not include_archived:
            q = q.where(Concept.status == "active")
        return list(self.s.scalars(q.order_by(Concept.pinned.desc(), Concept.weight.desc(), Concept.id).limit(limit)).all())

    def update(self, concept_id: int, **fields: Any) -> Concept:
        concept = self.get(concept_id)
        for name in ("name", "description", "tags", "weight", "pinned", "status"):
            if fields.get(name) is not None:
                setattr(concept, name, fields[name])
        concept.updated_at = utcnow()
        self._index(concept)
        return concept

    def delete(self, concept_id: int) -> None:
        self.s.execute(delete(ConceptLink).where(or_(ConceptLink.source_id == concept_id,
                                                     ConceptLink.target_id == concept_id)))
        self.s.delete(self.get(concept_id))
        self.items.remove("concept", concept_id)


class LinkRepo(_TierRepo):
    def add(self, source_id: int, target_id: int, relation: str = "related_to", *, weight: float = 1.0,
            tags: Iterable[str] = ()) -> ConceptLink:
        for concept_id in (source_id, target_id):
            self._get(Concept, concept_id)
        link = ConceptLink(source_id=source_id, target_id=target_id, relation=relation, weight=weight, tags=list(tags))
        self.s.add(link)
        self.s.flush()
        return link

    def get(self, link_id: int) -> ConceptLink:
        return self._get(ConceptLink, link_id)

    def list(self, concept_id: int | None = None, limit: int = 50) -> list[ConceptLink]:
        q = select(ConceptLink).where(ConceptLink.status == "active")
        if concept_id is not None:
            q = q.where(or_(ConceptLink.source_id == concept_id, ConceptLink.target_id == concept_id))
        return list(self.s.scalars(q.order_by(ConceptLink.id).limit(limit)).all())

    def update(self, link_id: int, **fields: Any) -> ConceptLink:
        link = self.get(link_id)
        for name in ("relation", "weight", "tags", "status"):
            if fields.get(name) is not None:
                setattr(link, name, fields[name])
        link.updated_at = utcnow()
        return link

    def delete(self, link_id: int) -> None:
        self.s.delete(self.get(link_id))


class AbstractRepo(_TierRepo):
    def add(self, title: str, summary: str, *, tags: Iterable[str] = (), sources: Iterable[str] = (),
            trigger: str = "manual", thread_id: str | None = None) -> Abstract:
        row = Abstract(title=title, summary=summary, tags=list(tags), sources=list(sources), trigger=trigger,
                       thread_id=thread_id)
        self.s.add(row)
        self.s.flush()
        self.items.put("abstract", row.id, summary, title=title, tags=row.tags, importance=0.6, thread_id=thread_id)
        return row

    def get(self, abstract_id: int) -> Abstract:
        return self._get(Abstract, abstract_id)

    def extend(self, abstract_id: int, text: str, sources: Iterable[str] = ()) -> Abstract:
        row = self.get(abstract_id)
        row.summary = f"{row.summary}\n{text}".strip()
        row.sources = list(dict.fromkeys([*row.sources, *sources]))
        row.updated_at = utcnow()
        self.items.put("abstract", row.id, row.summary, title=row.title, tags=row.tags, importance=0.6)
        return row

    def list(self, *, tags: Iterable[str] | None = None, since: datetime | None = None, limit: int = 5) -> list[Abstract]:
        q = select(Abstract)
        if since is not None:
            q = q.where(Abstract.created_at >= since)
        rows = list(self.s.scalars(q.order_by(Abstract.id.desc()).limit(limit * 10 if tags else limit)).all())
        if tags:
            wanted = {t.lower() for t in tags}
            rows = [r for r in rows if wanted & {str(t).lower() for t in r.tags or []}][:limit]
        return rows

    def latest(self) -> Abstract | None:
        return self.s.scalars(select(Abstract).order_by(Abstract.id.desc()).limit(1)).first()


class GoalRepo(_TierRepo):
    def add(self, title: str, *, description: str = "", horizon: str = "short", priority: int = 1,
            constraints: Iterable[str] = (), success_criteria: Iterable[str] = (), tags: Iterable[str] = (),
            parent_id: int | None = None) -> Goal:
        if horizon not in ("short", "long"):
            raise ValueError(f"horizon must be short or long, not {horizon!r}")
        goal = Goal(title=title, description=description, horizon=horizon, priority=priority,
                    constraints=list(constraints), success_criteria=list(success_criteria), tags=list(tags))
        self.s.add(goal)
        self.s.flush()
        if parent_id is not None:
            self.link(parent_id, goal.id)
        return goal

    def get(self, goal_id: int) -> Goal:
        return self._get(Goal, goal_id)

    def list(self, *, status: str | None = None, horizon: str | None = None, limit: int = 50) -> list[Goal]:
        q = select(Goal)
        if status:
            q = q.where(Goal.status == status)
        if horizon:
            q = q.where(Goal.horizon == horizon)
        return list(self.s.scalars(q.order_by(Goal.priority.desc(), Goal.id).limit(limit)).all())

    def set_status(self, goal_id: int, status: str, reason: str | None = None) -> Goal:
        if status not in GOAL_STATUSES:
            raise ValueError(f"goal status must be one of {', '.join(GOAL_STATUSES)}, not {status!r}")
        goal = self.get(goal_id)
        goal.status, goal.updated_at = status, utcnow()
        if reason:
            goal.reason = reason
        goal.completed_at = utcnow() if status in ("completed", "failed") else None
        return goal

    def update(self, goal_id: int, **fields: Any) -> Goal:
        goal = self.get(goal_id)
        if fields.get("status") is not None:
            self.set_status(goal_id, fields.pop("status"), fields.get("reason"))
        for name in ("title", "description", "horizon", "priority", "constraints", "success_criteria", "tags", "reason"):
            if fields.get(name) is not None:
                setattr(goal, name, fields[name])
        if fields.get("progress"):
            goal.progress_notes = [*goal.progress_notes, str(fields["progress"])]
        goal.updated_at = utcnow()
        return goal

    def delete(self, goal_id: int) -> None:
        self.s.execute(delete(GoalLink).where(or_(GoalLink.parent_goal_id == goal_id, GoalLink.child_goal_id == goal_id)))
        self.s.delete(self.get(goal_id))

    def link(self, parent_id: int, child_id: int, relation: str = "subgoal") -> GoalLink:
        self.get(parent_id), self.get(child_id)
        if parent_id == child_id or parent_id in {g.id for g in self.subgoals(child_id, deep=True)}:
            raise ValueError(f"goal {child_id} cannot be a subgoal of {parent_id}: that makes a cycle")
        link = GoalLink(parent_goal_id=parent_id, child_goal_id=child_id, relation_type=relation)
        self.s.add(link)
        self.s.flush()
        return link

    def subgoals(self, goal_id: int, deep: bool = False) -> list[Goal]:
        found: list[Goal] = []
        frontier = [goal_id]
        while frontier:
            children = list(self.s.scalars(select(Goal).join(GoalLink, GoalLink.child_goal_id == Goal.id)
                                           .where(GoalLink.parent_goal_id.in_(frontier))).all())
            found.extend(children)
            frontier = [c.id for c in children] if deep else []
        return found

    def parents(self, goal_id: int) -> list[Goal]:
        return list(self.s.scalars(select(Goal).join(GoalLink, GoalLink.parent_goal_id == Goal.id)
                                   .where(GoalLink.child_goal_id == goal_id)).all())

    def progress(self, goal_id: int) -> dict[str, Any]:
        """HMP metric: completed share of the goal's tasks."""
        statuses = self.s.scalars(select(Task.status).where(Task.goal_id == goal_id)).all()
        total, done = len(statuses), sum(1 for s in statuses if s == "done")
        return {"tasks": int(total), "done": int(done), "completion_rate": round(100.0 * done / total, 2) if total else 0.0}


class TaskRepo(_TierRepo):
    def add(self, title: str, *, goal_id: int | None = None, description: str = "", priority: int = 1,
            pinned: bool = False, kind: str = "task", tags: Iterable[str] = ()) -> Task:
        if goal_id is not None:
            self._get(Goal, goal_id)
        task = Task(title=title, goal_id=goal_id, description=description, priority=priority, pinned=pinned,
                    kind=kind, tags=list(tags))
        self.s.add(task)
        self.s.flush()
        return task

    def get(self, task_id: int) -> Task:
        return self._get(Task, task_id)

    def list(self, *, status: str | None = None, goal_id: int | None = None, open_only: bool = False,
             limit: int = 50) -> list[Task]:
        q = select(Task)
        if status:
            q = q.where(Task.status == status)
        if open_only:
            q = q.where(Task.status.notin_(CLOSED_TASK_STATUSES))
        if goal_id is not None:
            q = q.where(Task.goal_id == goal_id)
        return list(self.s.scalars(q.order_by(Task.pinned.desc(), Task.priority.desc(), Task.id).limit(limit)).all())

    def update(self, task_id: int, **fields: Any) -> Task:
        task = self.get(task_id)
        status = fields.get("status")
        if status is not None:
            if status not in TASK_STATUSES:
                raise ValueError(f"task status must be one of {', '.join(TASK_STATUSES)}, not {status!r}")
            task.status = status
            task.completed_at = utcnow() if status in CLOSED_TASK_STATUSES else None
        for name in ("title", "description", "priority", "pinned", "tags", "goal_id"):
            if fields.get(name) is not None:
                setattr(task, name, fields[name])
        task.updated_at = utcnow()
        return task

    def delete(self, task_id: int) -> None:
        self.s.delete(self.get(task_id))

    def set_repl(self, task_id: int, **fields: Any) -> Task:
        """The task's auxiliary cycle: repl_mode, repl_status, repl_config, repl_thread, repl_error."""
        task = self.get(task_id)
        for name in ("repl_mode", "repl_status", "repl_config", "repl_thread", "repl_error"):
            if name in fields:
                setattr(task, name, fields[name])
        task.updated_at = utcnow()
        return task

    def by_repl_thread(self, thread_id: str) -> Task | None:
        return self.s.scalars(select(Task).where(Task.repl_thread == thread_id).limit(1)).first()

    def running_cycles(self) -> list[Task]:
        return self.with_repl_status("running")

    def with_repl_status(self, status: str) -> list[Task]:
        return list(self.s.scalars(select(Task).where(Task.repl_status == status).order_by(Task.id)).all())

    def counts(self) -> dict[str, int]:
        rows = self.s.execute(select(Task.status, func.count(Task.id)).group_by(Task.status)).all()
        return {status: int(n) for status, n in rows}


class EpisodeRepo(_TierRepo):
    def upsert(self, period: str, start: str, summary: str, *, key_events: Iterable[str] = (),
               emotional_tone: str = "neutral", sources: Iterable[str] = ()) -> Episode:
        row = self.s.scalars(select(Episode).where(Episode.period == period, Episode.start == start)).first()
        if row is None:
            row = Episode(period=period, start=start, summary=summary)
            self.s.add(row)
        row.summary, row.key_events, row.emotional_tone = summary, list(key_events), emotional_tone
        row.sources = list(sources)
        self.s.flush()
        self.items.put("episode", row.id, summary, title=f"{period} of {start}", tags=[period],
                       created_at=datetime.fromisoformat(start).replace(tzinfo=utcnow().tzinfo), importance=0.6)
        return row

    def recent(self, period: str = "day", limit: int = 3) -> list[Episode]:
        rows = self.s.scalars(select(Episode).where(Episode.period == period)
                              .order_by(Episode.start.desc()).limit(limit)).all()
        return list(reversed(rows))

    def get(self, period: str, start: str) -> Episode | None:
        return self.s.scalars(select(Episode).where(Episode.period == period, Episode.start == start)).first()

    def between(self, period: str, first: str, last: str) -> list[Episode]:
        return list(self.s.scalars(select(Episode).where(Episode.period == period, Episode.start >= first,
                                                         Episode.start <= last).order_by(Episode.start)).all())


def entity_key(name: str) -> str:
    return re.sub(r"\s+", " ", name.strip().lower())


class EntityRepo(_TierRepo):
    def find(self, name: str) -> Entity | None:
        key = entity_key(name)
        row = self.s.scalars(select(Entity).where(Entity.key == key)).first()
        if row is not None:
            return row
        for candidate in self.s.scalars(select(Entity)).all():  # aliases are few; entities are not millions
            if key in {entity_key(a) for a in candidate.aliases or []}:
                return candidate
        return None

    def merge(self, name: str, *, kind: str | None = None, description: str = "", facts: Iterable[str] = (),
              aliases: Iterable[str] = ()) -> Entity:
        """One record per person/thing: a second mention adds what is new instead of making a duplicate."""
        row = self.find(name)
        if row is None:
            row = Entity(key=entity_key(name), name=name.strip(), kind=kind or "thing", description="",
                         aliases=[], facts=[])
            self.s.add(row)
        if kind:
            row.kind = kind
        if description and description not in (row.description or ""):
            row.description = f"{row.description}\n{description}".strip()
        row.facts = list(dict.fromkeys([*(row.facts or []), *[str(f) for f in facts if str(f).strip()]]))
        extra = [a for a in aliases if entity_key(a) != row.key]
        row.aliases = list(dict.fromkeys([*(row.aliases or []), *extra]))
        row.updated_at = utcnow()
        self.s.flush()
        body = "\n".join([row.description, *[f"- {f}" for f in row.facts]]).strip() or row.name
        self.items.put("entity", row.id, body, title=row.name, author="", tags=[row.kind], importance=0.6)
        return row

    def get(self, entity_id: int) -> Entity:
        return self._get(Entity, entity_id)

    def all(self, limit: int = 500) -> list[Entity]:
        return list(self.s.scalars(select(Entity).order_by(Entity.name).limit(limit)).all())

    def mentioned_in(self, text: str, limit: int = 3) -> list[Entity]:
        lowered = text.lower()
        found = []
        for row in self.all():
            names = [row.name, *(row.aliases or [])]
            if any(re.search(rf"\b{re.escape(n.lower())}\b", lowered) for n in names if n):
                found.append(row)
        return found[:limit]


class InsightRepo(_TierRepo):
    def add(self, insight: str, *, strategy: str = "", log_entry: str = "", trigger_topic: str = "",
            level: int = 1, created_at: datetime | None = None) -> Insight:
        row = Insight(insight=insight, strategy=strategy, log_entry=log_entry, trigger_topic=trigger_topic, level=level,
                      created_at=created_at or utcnow())
        self.s.add(row)
        self.s.flush()
        self.items.put("insight", row.id, f"{insight}\nStrategy: {strategy}".strip(), title=trigger_topic,
                       importance=0.7)
        return row

    def latest(self) -> Insight | None:
        return self.s.scalars(select(Insight).order_by(Insight.id.desc()).limit(1)).first()

    def recent(self, limit: int = 10) -> list[Insight]:
        return list(self.s.scalars(select(Insight).order_by(Insight.id.desc()).limit(limit)).all())

    def last_at_level(self, level: int) -> Insight | None:
        """The latest dream of at least this level."""
        return self.s.scalars(select(Insight).where(Insight.level >= level).order_by(Insight.id.desc()).limit(1)).first()

    def first(self) -> Insight | None:
        return self.s.scalars(select(Insight).order_by(Insight.id).limit(1)).first()


class QuestionRepo(_TierRepo):
    """Open questions (the curiosity drive's source). A resolved question stays visible for a while, then goes."""

    def add(self, topic: str, *, context: str = "", priority: float = 0.5, source: str = "dream",
            created_at: datetime | None = None) -> OpenQuestion:
        existing = self.s.scalars(select(OpenQuestion).where(OpenQuestion.status == "open",
                                                             func.lower(OpenQuestion.topic) == topic.strip().lower())).first()
        if existing is not None:  # asked again: it matters more, and it is fresh again
            existing.priority = max(existing.priority, float(priority))
            existing.created_at = created_at or utcnow()
            return existing
        row = OpenQuestion(topic=topic.strip(), context=context.strip(), priority=min(1.0, max(0.0, float(priority))),
                           source=source, created_at=created_at or utcnow())
        self.s.add(row)
        self.s.flush()
        return row

    def get(self, question_id: int) -> OpenQuestion:
        return self._get(OpenQuestion, question_id)

    def open(self, limit: int | None = None) -> list[OpenQuestion]:
        q = select(OpenQuestion).where(OpenQuestion.status == "open").order_by(OpenQuestion.priority.desc(),
                                                                               OpenQuestion.id.desc())
        return list(self.s.scalars(q.limit(limit) if limit else q).all())

    def list(self, limit: int = 50) -> list[OpenQuestion]:
        return list(self.s.scalars(select(OpenQuestion).order_by(OpenQuestion.id.desc()).limit(limit)).all())

    def resolve(self, question_id: int, resolution: str, now: datetime) -> OpenQuestion:
        row = self.get(question_id)
        row.status, row.resolution, row.resolved_at = "resolved", resolution.strip()[:1000], now
        return row

    def purge_resolved(self, before: datetime) -> int:
        rows = self.s.scalars(select(OpenQuestion).where(OpenQuestion.status == "resolved",
                                                         OpenQuestion.resolved_at < before)).all()
        for row in rows:
            self.s.delete(row)
        return len(rows)


class UnverifiedFactRepo(_TierRepo):
    def add(self, claim: str, *, confidence: float, context: str = "", sources: Iterable[str] = (),
            why_unverified: str = "", priority: int = 0, message_id: int | None = None,
            task_id: int | None = None) -> UnverifiedFact:
        row = UnverifiedFact(claim=claim, confidence=confidence, context=context, sources=list(sources),
                             why_unverified=why_unverified, priority=priority, message_id=message_id, task_id=task_id)
        self.s.add(row)
        self.s.flush()
        return row

    def get(self, fact_id: int) -> UnverifiedFact:
        return self._get(UnverifiedFact, fact_id)

    def register(self, message_id: int, facts: list[dict[str, Any]], threshold: float = 0.7) -> list[UnverifiedFact]:
        """The facts of one output (idempotent per message). Below `threshold` a fact is `pending` with a
        fact-check task: its own when its priority is 2 or more, else one task shared by the message's others."""
        existing = self.of_message(message_id)
        if existing:
            return existing
        rows, shared = [], None
        for fact in facts:
            row = self.add(fact["claim"], confidence=float(fact.get("confidence", 0.5)), context=fact.get("context", ""),
                           sources=fact.get("sources") or [], why_unverified=fact.get("why_unverified", ""),
                           priority=int(fact.get("priority") or 0), message_id=message_id)
            if row.confidence < threshold:
                row.status = "pending"
                if row.priority >= 2:
                    task = Task(title=f"fact-check: {row.claim[:200]}", kind="fact-check", priority=row.priority,
                                description=f"confidence {row.confidence:.2f}; {row.why_unverified}".strip("; "))
                    self.s.add(task)
                    self.s.flush()
                else:
                    if shared is None:
                        shared = Task(title=f"fact-check claims of message {message_id}", kind="fact-check", priority=1)
                        self.s.add(shared)
                        self.s.flush()
                    task = shared
                    task.description = "; ".join(filter(None, [task.description, f"{row.claim[:160]} ({row.confidence:.2f})"]))
                row.task_id = task.id
            rows.append(row)
        return rows

    def of_message(self, message_id: int) -> list[UnverifiedFact]:
        return list(self.s.scalars(select(UnverifiedFact).where(UnverifiedFact.message_id == message_id)
                                   .order_by(UnverifiedFact.id)).all())

    def list(self, *, status: str | None = None, limit: int = 20) -> list[UnverifiedFact]:
        q = select(UnverifiedFact)
        if status:
            q = q.where(UnverifiedFact.status == status)
        return list(self.s.scalars(q.order_by(UnverifiedFact.priority.desc(), UnverifiedFact.id).limit(limit)).all())

    def resolve(self, fact_id: int, status: str, resolution: str = "") -> UnverifiedFact:
        """verified | rejected; the fact-check task closes with it (done / failed)."""
        if status not in ("verified", "rejected"):
            raise ValueError(f"a fact is resolved as verified or rejected, not {status!r}")
        fact = self.get(fact_id)
        fact.status, fact.resolution = status, resolution or None
        if fact.task_id is not None and (task := self.s.get(Task, fact.task_id)) is not None \
                and task.status not in CLOSED_TASK_STATUSES:
            open_facts = [f for f in self.s.scalars(select(UnverifiedFact).where(UnverifiedFact.task_id == task.id)).all()
                          if f.status in ("open", "pending")]
            if not open_facts:
                task.status, task.completed_at, task.updated_at = "done", utcnow(), utcnow()
        return fact


class EmotionLogRepo(_TierRepo):
    def add(self, emotion: str, strength: int = 3, *, subject: str = "user", snippet: str = "",
            thread_id: str | None = None, tick: int | None = None, created_at: datetime | None = None) -> EmotionLogEntry:
        row = EmotionLogEntry(emotion=emotion, strength=strength, subject=subject, snippet=snippet[:200],
                              thread_id=thread_id, tick=tick, created_at=created_at or utcnow())
        self.s.add(row)
        self.s.flush()
        return row

    def recent(self, subject: str | None = None, limit: int = 20, *, thread_id: str | None = None,
               tick: int | None = None, since: datetime | None = None) -> list[EmotionLogEntry]:
        q = select(EmotionLogEntry)
        if subject:
            q = q.where(EmotionLogEntry.subject == subject)
        if thread_id is not None:
            q = q.where(EmotionLogEntry.thread_id == thread_id)
        if tick is not None:
            q = q.where(EmotionLogEntry.tick == tick)
        if since is not None:
            q = q.where(EmotionLogEntry.created_at >= since)
        return list(reversed(self.s.scalars(q.order_by(EmotionLogEntry.id.desc()).limit(limit)).all()))


class KnowledgeBaseRepo(_TierRepo):
    def by_hash(self, sha256: str) -> KBDocument | None:
        return self.s.scalars(select(KBDocument).where(KBDocument.sha256 == sha256)).first()

    def add(self, path: str, title: str, sha256: str, pieces: Sequence[str]) -> KBDocument:
        doc = KBDocument(path=path, title=title, sha256=sha256, chunks=len(pieces), chars=sum(map(len, pieces)))
        self.s.add(doc)
        self.s.flush()
        for number, piece in enumerate(pieces):
            self.items.put("kb", f"{doc.id}:{number}", piece, title=title, episode=f"kb:{doc.id}", seq=number,
                           importance=0.5, meta={"path": path})
        return doc

    def list(self) -> list[KBDocument]:
        return list(self.s.scalars(select(KBDocument).order_by(KBDocument.id)).all())

    def remove(self, doc_id: int) -> KBDocument:
        doc = self._get(KBDocument, doc_id)
        for number in range(doc.chunks):
            self.items.remove("kb", f"{doc.id}:{number}")
        self.s.delete(doc)
        return doc


def tag_stats(session: Session, source: str = "all") -> dict[str, int]:
    """HMP `tags stats`: how often each tag is used in diary, concepts, links, goals and tasks."""
    models = {"diary": DiaryEntry, "concepts": Concept, "links": ConceptLink, "goals": Goal, "tasks": Task}
    if source != "all" and source not in models:
        raise ValueError(f"source must be one of all, {', '.join(models)}; not {source!r}")
    counts: Counter[str] = Counter()
    for name, model in models.items():
        if source in ("all", name):
            for tags in session.scalars(select(model.tags)).all():
                counts.update(str(t) for t in tags or [])
    return dict(counts.most_common())
