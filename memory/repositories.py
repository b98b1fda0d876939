"""Repositories: the only place that writes SQL. Nodes and handlers use these through `Database.unit()`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import case, delete, func, select, update
from sqlalchemy.orm import Session

from memory import tiers
from memory.models import (
    AntiStagnationMetric,
    ConfigEntry,
    ExecutedCommand,
    LLMCall,
    LLMRegistryEntry,
    MemoryItem,
    MemoryJournal,
    Message,
    Note,
    ProcessLog,
    Session as SessionRow,
    Thread,
    Tick,
    utcnow,
)

INCOMING_SOURCES = ("user", "cli", "system", "llm:task")
HUMAN_SOURCES = ("user", "cli")
OUTGOING_SOURCE = "llm"
# What a thread's history shows, oldest first. Anchors stand for whole child threads.
TIMELINE_KINDS = ("response", "stagnation_record", "step", "stelis_anchor")
# Rendered at read time from another row: never embedded or indexed for retrieval.
NON_INDEXED_KINDS = ("stelis_anchor",)


def anchor_key(child_id: str) -> str:
    return f"stelis_anchor:{child_id}"


class _Repo:
    def __init__(self, session: Session):
        self.s = session

    def _upsert(self, row: Any, model: type, fields: dict[str, Any]) -> Any:
        """Update `row` with `fields`, or add a new `model(**fields)` when there is none."""
        if row is None:
            row = model(**fields)
            self.s.add(row)
        else:
            for name, value in fields.items():
                setattr(row, name, value)
        self.s.flush()
        return row


class ThreadRepo(_Repo):
    def get(self, thread_id: str) -> Thread | None:
        return self.s.get(Thread, thread_id)

    def ensure(self, thread_id: str, **defaults: Any) -> Thread:
        thread = self.s.get(Thread, thread_id)
        if thread is None:
            thread = Thread(id=thread_id, **defaults)
            self.s.add(thread)
            self.s.flush()
        return thread

    def set_tick(self, thread_id: str, tick: int) -> None:
        self.s.execute(update(Thread).where(Thread.id == thread_id).values(tick=tick))

    def all(self) -> Sequence[Thread]:
        return self.s.scalars(select(Thread).order_by(Thread.created_at)).all()

    def lineage(self, thread_id: str) -> list[Thread]:
        """The thread and its ancestors, root first."""
        chain: list[Thread] = []
        current = self.s.get(Thread, thread_id)
        while current is not None and len(chain) < 64:
            chain.append(current)
            current = self.s.get(Thread, current.parent_id) if current.parent_id else None
        return list(reversed(chain))

    def ratio_product(self, thread_id: str) -> float:
        """Π window_ratio of the child threads from the root down to this one (1.0 for a root)."""
        product = 1.0
        for thread in self.lineage(thread_id):
            if thread.parent_id is not None:
                product *= thread.window_ratio or 1.0
        return product

    def create_child(self, thread_id: str, parent: Thread, *, label: str, window_ratio: float, origin: str,
                     owner: str, chronicle_prompt: str | None = None, playbook: str = "") -> Thread:
        child = Thread(id=thread_id, parent_id=parent.id, label=label, playbook=playbook, persona=parent.persona,
                       depth=parent.depth + 1, window_ratio=window_ratio, status="running", origin=origin,
                       owner=owner, chronicle_prompt=chronicle_prompt)
        self.s.add(child)
        self.s.flush()
        return child

    def finish(self, thread_id: str, *, status: str, chronicle: str | None, now: datetime,
               error: str | None = None) -> Thread | None:
        thread = self.s.get(Thread, thread_id)
        if thread is not None:
            thread.status, thread.chronicle, thread.completed_at, thread.error = status, chronicle, now, error
            self.s.flush()
        return thread

    def running_children(self) -> list[Thread]:
        """Every child thread still marked running, deepest first."""
        rows = self.s.scalars(select(Thread).where(Thread.status == "running", Thread.parent_id.is_not(None))).all()
        return sorted(rows, key=lambda t: -t.depth)

    def children(self, thread_id: str) -> list[Thread]:
        return list(self.s.scalars(select(Thread).where(Thread.parent_id == thread_id).order_by(Thread.created_at)).all())


class MessageRepo(_Repo):
    def upsert(self, dedup_key: str, **fields: Any) -> Message:
        """Insert, or update the row with this key (a node re-run after a kill writes once)."""
        row = self.s.scalars(select(Message).where(Message.dedup_key == dedup_key)).first()
        return self._upsert(row, Message, {"dedup_key": dedup_key, **fields})

    def add(self, **fields: Any) -> Message:
        row = Message(**fields)
        self.s.add(row)
        self.s.flush()
        return row

    def recent(self, thread_id: str, limit: int, kinds: Iterable[str] = ("response",)) -> list[Message]:
        """The last `limit` messages of these kinds, oldest first."""
        rows = self.s.scalars(
            select(Message)
            .where(Message.thread_id == thread_id, Message.kind.in_(tuple(kinds)))
            .order_by(Message.id.desc())
            .limit(limit)
        ).all()
        return list(reversed(rows))

    def newest_id(self) -> int:
        return self.s.scalar(select(func.max(Message.id))) or 0

    def log_recent(self, limit: int, kinds: Iterable[str] = ("response",)) -> list[Message]:
        """The last `limit` messages of these kinds across every thread, oldest first."""
        rows = self.s.scalars(select(Message).where(Message.kind.in_(tuple(kinds)))
                              .order_by(Message.id.desc()).limit(limit)).all()
        return list(reversed(rows))

    def since(self, thread_id: str, after_id: int, kinds: Iterable[str]) -> list[Message]:
        return list(
            self.s.scalars(
                select(Message)
                .where(Message.thread_id == thread_id, Message.id > after_id, Message.kind.in_(tuple(kinds)))
                .order_by(Message.id)
            ).all()
        )

    def last_of_kind(self, thread_id: str, kind: str) -> Message | None:
        return self.s.scalars(
            select(Message).where(Message.thread_id == thread_id, Message.kind == kind).order_by(Message.id.desc()).limit(1)
        ).first()

    def count(self, thread_id: str | None = None) -> int:
        q = select(func.count(Message.id))
        if thread_id is not None:
            q = q.where(Message.thread_id == thread_id)
        return self.s.scalar(q) or 0

    def log(self, thread_id: str, upto_id: int | None = None, kinds: Iterable[str] | None = None,
            last: int | None = None) -> list[Message]:
        """A thread's messages oldest first: all of them, or those up to `upto_id`, or the `last` N."""
        q = select(Message).where(Message.thread_id == thread_id)
        if upto_id is not None:
            q = q.where(Message.id <= upto_id)
        if kinds is not None:
            q = q.where(Message.kind.in_(tuple(kinds)))
        if last is not None:
            return list(reversed(self.s.scalars(q.order_by(Message.id.desc()).limit(last)).all()))
        return list(self.s.scalars(q.order_by(Message.id)).all())

    def anchor_for(self, child_id: str) -> Message | None:
        return self.s.scalars(select(Message).where(Message.dedup_key == anchor_key(child_id))).first()

    def indexable(self, thread_id: str | None = None, after_id: int = 0) -> list[Message]:
        """Messages that may be embedded or indexed for retrieval (never Stelis anchors)."""
        q = select(Message).where(Message.id > after_id, Message.kind.not_in(NON_INDEXED_KINDS))
        if thread_id is not None:
            q = q.where(Message.thread_id == thread_id)
        return list(self.s.scalars(q.order_by(Message.id)).all())


class NoteRepo(_Repo):
    def add(
        self,
        text: str,
        source: str = "user",
        *,
        priority: int = 0,
        tags: list[str] | None = None,
        thread_id: str | None = None,
        task_id: int | None = None,
        llm_id: str | None = None,
        hidden: bool = False,
        read: bool = False,
        created_at: datetime | None = None,
    ) -> Note:
        note = Note(
            created_at=created_at or utcnow(),
            text=text,
            source=source,
            priority=priority,
            tags=list(tags or []),
            thread_id=thread_id,
            task_id=task_id,
            llm_id=llm_id,
            hidden=hidden,
            read=read,
        )
        self.s.add(note)
        self.s.flush()
        return note

    def get(self, note_id: int) -> Note | None:
        return self.s.get(Note, note_id)

    def newest_id(self) -> int:
        return self.s.scalar(select(func.max(Note.id))) or 0

    def latest_human_at(self) -> datetime | None:
        """When the human last wrote (the drives' and dreams' idle time counts from it)."""
        return self.s.scalar(select(func.max(Note.created_at)).where(Note.source.in_(HUMAN_SOURCES)))

    def human_after(self, note_id: int, *, read: bool | None = None, limit: int = 10) -> list[Note]:
        """The human's notes after `note_id`, oldest first."""
        q = select(Note).where(Note.id > note_id, Note.source.in_(HUMAN_SOURCES))
        if read is not None:
            q = q.where(Note.read.is_(read))
        return list(self.s.scalars(q.order_by(Note.id).limit(limit)).all())

    def between(self, start: datetime, end: datetime | None = None) -> list[Note]:
        q = select(Note).where(Note.created_at >= start)
        if end is not None:
            q = q.where(Note.created_at <= end)
        return list(self.s.scalars(q.order_by(Note.id)).all())

    def latest_incoming_at(self) -> datetime | None:
        """When the last note for the persona (from the human, a task, the system) arrived."""
        return self.s.scalar(select(func.max(Note.created_at)).where(Note.source.in_(INCOMING_SOURCES)))

    def unread_incoming(self, limit: int = 20, min_priority: int | None = None, tags: list[str] | None = None) -> list[Note]:
        """Unread notes for the persona, highest priority first, then oldest first."""
        q = select(Note).where(Note.read.is_(False), Note.source.in_(INCOMING_SOURCES))
        if min_priority is not None:
            q = q.where(Note.priority >= min_priority)
        rows = self.s.scalars(q.order_by(Note.priority.desc(), Note.id).limit(limit if not tags else limit * 5)).all()
        if tags:
            wanted = set(tags)
            rows = [n for n in rows if wanted & set(n.tags or [])][:limit]
        return list(rows)

    def count_unread_by_priority(self) -> dict[int, int]:
        rows = self.s.execute(
            select(Note.priority, func.count(Note.id))
            .where(Note.read.is_(False), Note.source.in_(INCOMING_SOURCES))
            .group_by(Note.priority)
        ).all()
        return {int(p): int(c) for p, c in rows}

    def mark_read(self, ids: Iterable[int], read: bool = True) -> int:
        ids = list(ids)
        if not ids:
            return 0
        result = self.s.execute(
            update(Note).where(Note.id.in_(ids)).values(read=read, read_at=utcnow() if read else None)
        )
        return result.rowcount or 0

    def set_tags(self, note_id: int, tags: list[str]) -> Note | None:
        note = self.s.get(Note, note_id)
        if note is not None:
            note.tags = list(tags)
        return note

    def list(
        self,
        *,
        source: str | None = None,
        unread_only: bool = False,
        limit: int = 20,
        after_id: int | None = None,
        include_hidden: bool = True,
    ) -> list[Note]:
        q = select(Note)
        if source == "incoming":
            q = q.where(Note.source.in_(INCOMING_SOURCES))
        elif source:
            q = q.where(Note.source == source)
        if unread_only:
            q = q.where(Note.read.is_(False))
        if after_id is not None:
            q = q.where(Note.id > after_id)
        if not include_hidden:
            q = q.where(Note.hidden.is_(False))
        if after_id is not None:
            return list(self.s.scalars(q.order_by(Note.id).limit(limit)).all())
        return list(reversed(self.s.scalars(q.order_by(Note.id.desc()).limit(limit)).all()))

    def count(self) -> int:
        return self.s.scalar(select(func.count(Note.id))) or 0


class ProcessLogRepo(_Repo):
    def add(self, name: str, value: str = "", status: str = "ok", *, thread_id: str | None = None,
            tags: list[str] | None = None, priority: int = 0, llm_id: str | None = None,
            task_id: int | None = None) -> ProcessLog:
        row = ProcessLog(name=name, value=value, status=status, thread_id=thread_id, tags=list(tags or []),
                         priority=priority, llm_id=llm_id, task_id=task_id)
        self.s.add(row)
        self.s.flush()
        return row

    def open(self, thread_id: str, limit: int = 20) -> list[ProcessLog]:
        return list(
            self.s.scalars(
                select(ProcessLog)
                .where(ProcessLog.thread_id == thread_id, ProcessLog.status != "close")
                .order_by(ProcessLog.priority.desc(), ProcessLog.id)
                .limit(limit)
            ).all()
        )

    def get(self, process_id: int) -> ProcessLog | None:
        return self.s.get(ProcessLog, process_id)

    def latest_named(self, name: str) -> ProcessLog | None:
        return self.s.scalars(select(ProcessLog).where(ProcessLog.name == name).order_by(ProcessLog.id.desc()).limit(1)).first()

    def close(self, ids: Iterable[int]) -> int:
        ids = list(ids)
        if not ids:
            return 0
        return self.s.execute(
            update(ProcessLog)
            .where(ProcessLog.id.in_(ids), ProcessLog.status.notin_(("in_progress", "pending")))
            .values(status="close", updated_at=utcnow())
        ).rowcount or 0

    def time_out_stale(self, thread_id: str, older_than: timedelta, now: datetime) -> list[ProcessLog]:
        """Processes still in progress after `older_than` become `timeout` (HMP status)."""
        cutoff = now - older_than
        rows = self.s.scalars(
            select(ProcessLog).where(
                ProcessLog.thread_id == thread_id,
                ProcessLog.status.in_(("in_progress", "pending")),
                ProcessLog.updated_at < cutoff,
            )
        ).all()
        for row in rows:
            row.status = "timeout"
            row.updated_at = now
        return list(rows)

    def of_thread(self, thread_id: str) -> list[ProcessLog]:
        return list(self.s.scalars(select(ProcessLog).where(ProcessLog.thread_id == thread_id).order_by(ProcessLog.id)).all())

    def recent(self, limit: int = 50) -> list[ProcessLog]:
        return list(reversed(self.s.scalars(select(ProcessLog).order_by(ProcessLog.id.desc()).limit(limit)).all()))


class TickRepo(_Repo):
    def start(self, thread_id: str, tick: int, mode: str) -> Tick:
        row = self.s.scalars(select(Tick).where(Tick.thread_id == thread_id, Tick.tick == tick)).first()
        if row is None:
            row = Tick(thread_id=thread_id, tick=tick, mode=mode)
            self.s.add(row)
            self.s.flush()
        return row

    def finish(self, thread_id: str, tick: int, *, status: str, summary: dict[str, Any],
               llm_calls: int, prompt_tokens: int, completion_tokens: int, llm_ms: float) -> None:
        self.s.execute(
            update(Tick)
            .where(Tick.thread_id == thread_id, Tick.tick == tick)
            .values(status=status, summary=summary, llm_calls=llm_calls, prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens, llm_ms=llm_ms, finished_at=utcnow())
        )

    def recent(self, limit: int = 20, thread_id: str | None = None) -> list[Tick]:
        q = select(Tick)
        if thread_id:
            q = q.where(Tick.thread_id == thread_id)
        return list(reversed(self.s.scalars(q.order_by(Tick.id.desc()).limit(limit)).all()))

    def count(self) -> int:
        return self.s.scalar(select(func.count(Tick.id))) or 0


class ConfigRepo(_Repo):
    def get(self, key: str, default: Any = None) -> Any:
        row = self.s.get(ConfigEntry, key)
        return default if row is None else row.value

    def set(self, key: str, value: Any) -> None:
        row = self.s.get(ConfigEntry, key)
        if row is None:
            self.s.add(ConfigEntry(key=key, value=value))
        else:
            row.value = value
            row.updated_at = utcnow()
        self.s.flush()

    def all(self) -> dict[str, Any]:
        return {row.key: row.value for row in self.s.scalars(select(ConfigEntry)).all()}


class LLMRegistryRepo(_Repo):
    def upsert(self, entry_id: str, **fields: Any) -> LLMRegistryEntry:
        return self._upsert(self.s.get(LLMRegistryEntry, entry_id), LLMRegistryEntry, {"id": entry_id, **fields})

    def enabled(self) -> list[LLMRegistryEntry]:
        return list(
            self.s.scalars(
                select(LLMRegistryEntry).where(LLMRegistryEntry.enabled.is_(True))
                .order_by(LLMRegistryEntry.priority.desc(), LLMRegistryEntry.id)
            ).all()
        )

    def all(self) -> list[LLMRegistryEntry]:
        return list(self.s.scalars(select(LLMRegistryEntry).order_by(LLMRegistryEntry.priority.desc())).all())

    def disable_missing(self, keep_ids: Iterable[str]) -> None:
        keep = list(keep_ids)
        self.s.execute(update(LLMRegistryEntry).where(LLMRegistryEntry.id.notin_(keep)).values(enabled=False))


class CommandRepo(_Repo):
    def get(self, cmd_key: str) -> ExecutedCommand | None:
        return self.s.scalars(select(ExecutedCommand).where(ExecutedCommand.cmd_key == cmd_key)).first()

    def record(self, **fields: Any) -> ExecutedCommand:
        row = ExecutedCommand(**fields)
        self.s.add(row)
        self.s.flush()  # raises IntegrityError on a duplicate cmd_key
        return row

    def recent(self, limit: int = 50, thread_id: str | None = None) -> list[ExecutedCommand]:
        q = select(ExecutedCommand)
        if thread_id:
            q = q.where(ExecutedCommand.thread_id == thread_id)
        return list(reversed(self.s.scalars(q.order_by(ExecutedCommand.id.desc()).limit(limit)).all()))


class LLMCallRepo(_Repo):
    def add(self, **fields: Any) -> LLMCall:
        row = LLMCall(**fields)
        self.s.add(row)
        self.s.flush()
        return row

    def totals(self, thread_id: str | None = None, tick: int | None = None) -> dict[str, float]:
        q = select(
            func.count(LLMCall.id),
            func.coalesce(func.sum(LLMCall.prompt_tokens), 0),
            func.coalesce(func.sum(LLMCall.completion_tokens), 0),
            func.coalesce(func.sum(LLMCall.latency_ms), 0.0),
        )
        if thread_id is not None:
            q = q.where(LLMCall.thread_id == thread_id)
        if tick is not None:
            q = q.where(LLMCall.tick == tick)
        calls, prompt, completion, ms = self.s.execute(q).one()
        return {"calls": int(calls), "prompt_tokens": int(prompt), "completion_tokens": int(completion),
                "latency_ms": float(ms)}

    def by_model(self) -> list[dict[str, Any]]:
        rows = self.s.execute(
            select(LLMCall.llm_id, LLMCall.provider, LLMCall.model, LLMCall.purpose, func.count(LLMCall.id),
                   func.sum(LLMCall.prompt_tokens), func.sum(LLMCall.completion_tokens), func.sum(LLMCall.latency_ms),
                   func.sum(case((LLMCall.ok.is_(False), 1), else_=0)))
            .group_by(LLMCall.llm_id, LLMCall.provider, LLMCall.model, LLMCall.purpose)
        ).all()
        return [
            {"llm_id": r[0], "provider": r[1], "model": r[2], "purpose": r[3], "calls": int(r[4]),
             "prompt_tokens": int(r[5] or 0), "completion_tokens": int(r[6] or 0),
             "latency_ms": round(float(r[7] or 0), 1), "failed": int(r[8] or 0)}
            for r in rows
        ]

    def recent(self, limit: int = 20) -> list[LLMCall]:
        return list(reversed(self.s.scalars(select(LLMCall).order_by(LLMCall.id.desc()).limit(limit)).all()))


class Repos:
    """Every repository bound to one session (one transaction)."""

    def __init__(self, session: Session):
        self.session = session
        self.threads = ThreadRepo(session)
        self.messages = MessageRepo(session)
        self.notes = NoteRepo(session)
        self.processes = ProcessLogRepo(session)
        self.ticks = TickRepo(session)
        self.config = ConfigRepo(session)
        self.llm_registry = LLMRegistryRepo(session)
        self.commands = CommandRepo(session)
        self.llm_calls = LLMCallRepo(session)
        self.items = MemoryItemRepo(session)
        self.llm_memory = tiers.LLMMemoryRepo(session, self.items)
        self.blocks = tiers.BlockRepo(session, self.items)
        self.diary = tiers.DiaryRepo(session, self.items)
        self.concepts = tiers.ConceptRepo(session, self.items)
        self.links = tiers.LinkRepo(session, self.items)
        self.abstracts = tiers.AbstractRepo(session, self.items)
        self.goals = tiers.GoalRepo(session, self.items)
        self.tasks = tiers.TaskRepo(session, self.items)
        self.episodes = tiers.EpisodeRepo(session, self.items)
        self.entities = tiers.EntityRepo(session, self.items)
        self.insights = tiers.InsightRepo(session, self.items)
        self.facts = tiers.UnverifiedFactRepo(session, self.items)
        self.emotion_log = tiers.EmotionLogRepo(session, self.items)
        self.kb = tiers.KnowledgeBaseRepo(session, self.items)
        self.stagnation = AntiStagnationRepo(session)
        self.questions = tiers.QuestionRepo(session, self.items)
        self.sessions = SessionRepo(session)


class SessionRepo(_Repo):
    def start(self, thread_id: str, *, playbook: str, persona: str, owner: str, tick: int, first_message_id: int,
              now: datetime, revived_from: int | None = None) -> SessionRow:
        row = SessionRow(thread_id=thread_id, playbook=playbook, persona=persona, owner=owner, first_tick=tick,
                         last_tick=tick, first_message_id=first_message_id, started_at=now, revived_from=revived_from)
        self.s.add(row)
        self.s.flush()
        return row

    def get(self, session_id: int) -> SessionRow | None:
        return self.s.get(SessionRow, session_id)

    def list(self, limit: int = 50, thread_id: str | None = None) -> list[SessionRow]:
        q = select(SessionRow)
        if thread_id is not None:
            q = q.where(SessionRow.thread_id == thread_id)
        return list(self.s.scalars(q.order_by(SessionRow.id.desc()).limit(limit)).all())

    def running(self) -> list[SessionRow]:
        return list(self.s.scalars(select(SessionRow).where(SessionRow.status == "running")).all())

    def last_of(self, thread_id: str) -> SessionRow | None:
        return self.s.scalars(select(SessionRow).where(SessionRow.thread_id == thread_id)
                              .order_by(SessionRow.id.desc()).limit(1)).first()


class AntiStagnationRepo(_Repo):
    def add(self, **fields: Any) -> AntiStagnationMetric:
        """One tick's row; a re-run of the same tick (after a kill) replaces its row instead of adding one."""
        row = self.s.scalars(select(AntiStagnationMetric).where(
            AntiStagnationMetric.thread_id == fields["thread_id"], AntiStagnationMetric.tick == fields["tick"])).first()
        return self._upsert(row, AntiStagnationMetric, fields)

    def record_after(self, thread_id: str, tick: int, novelty_score: float | None) -> None:
        """The previous tick's row learns how novel the output after its reflex was."""
        row = self.s.scalars(select(AntiStagnationMetric).where(
            AntiStagnationMetric.thread_id == thread_id, AntiStagnationMetric.tick < tick)
            .order_by(AntiStagnationMetric.tick.desc()).limit(1)).first()
        if row is not None and row.novelty_after is None and (row.triggered_actions or row.mechanisms):
            row.novelty_after = novelty_score

    def recent(self, limit: int = 20, thread_id: str | None = None) -> list[AntiStagnationMetric]:
        q = select(AntiStagnationMetric)
        if thread_id is not None:
            q = q.where(AntiStagnationMetric.thread_id == thread_id)
        return list(reversed(self.s.scalars(q.order_by(AntiStagnationMetric.id.desc()).limit(limit)).all()))


class MemoryItemRepo(_Repo):
    """The retrieval catalogue. Every change appends to `memory_journal` in the same transaction, so the
    vector and BM25 indexes (memory/index.py) catch up after a crash instead of drifting out of sync."""

    def _journal(self, item_id: int, op: str) -> None:
        self.s.add(MemoryJournal(item_id=item_id, op=op))

    def get(self, item_id: int) -> MemoryItem | None:
        return self.s.get(MemoryItem, item_id)

    def find(self, tier: str, ref: str | int) -> MemoryItem | None:
        return self.s.scalars(select(MemoryItem).where(MemoryItem.tier == tier, MemoryItem.ref == str(ref))).first()

    def put(self, tier: str, ref: str | int, text: str, *, author: str = "", episode: str | None = None,
            seq: int | None = None, title: str = "", thread_id: str | None = None, tags: Iterable[str] = (),
            emotions: Iterable[str] = (), importance: float = 0.5, emotion_score: float = 0.0,
            novelty: float | None = None, pinned: bool = False, created_at: datetime | None = None,
            context_before: str | None = None, meta: dict[str, Any] | None = None) -> MemoryItem:
        """Insert or update the item standing for `tier`/`ref`. In an episode, the item learns the text
        before it, and the item before it learns this one (both are re-indexed)."""
        item = self.find(tier, ref)
        if item is None:
            item = MemoryItem(tier=tier, ref=str(ref), text=text)
            self.s.add(item)
        if episode is not None and seq is None:
            seq = item.seq if item.seq is not None and item.episode == episode else self.next_seq(episode)
        rendered = f"{author}: {text}" if author else text
        if episode is not None and context_before is None:
            previous = self.at(episode, seq - 1) if seq is not None else None
            if previous is not None:
                context_before = f"{previous.author}: {previous.text}" if previous.author else previous.text
                if previous.context_after != rendered:
                    previous.context_after = rendered
                    previous.updated_at = utcnow()
                    self.s.flush()
                    self._journal(previous.id, "upsert")
        item.text, item.author, item.episode, item.seq, item.title = text, author, episode, seq, title
        item.thread_id, item.tags, item.emotions = thread_id, list(tags), list(emotions)
        item.importance, item.emotion_score, item.novelty, item.pinned = importance, emotion_score, novelty, pinned
        item.context_before = context_before or ""
        if item.status == "deleted":
            item.status = "active"
        if created_at is not None:
            item.created_at = created_at
        item.updated_at = utcnow()
        if meta is not None:
            item.meta = dict(meta)
        self.s.flush()
        self._journal(item.id, "upsert")
        return item

    def next_seq(self, episode: str) -> int:
        current = self.s.scalar(select(func.max(MemoryItem.seq)).where(MemoryItem.episode == episode))
        return 0 if current is None else current + 1

    def at(self, episode: str, seq: int) -> MemoryItem | None:
        return self.s.scalars(select(MemoryItem).where(MemoryItem.episode == episode, MemoryItem.seq == seq)).first()

    def remove(self, tier: str, ref: str | int) -> bool:
        item = self.find(tier, ref)
        if item is None or item.status == "deleted":
            return False
        item.status, item.updated_at = "deleted", utcnow()
        self.s.flush()
        self._journal(item.id, "delete")
        return True

    def set_status(self, item_ids: Iterable[int], status: str) -> int:
        changed = 0
        for item in self.s.scalars(select(MemoryItem).where(MemoryItem.id.in_(list(item_ids)))).all():
            if item.status != status and item.status != "deleted":
                item.status, item.updated_at = status, utcnow()
                self.s.flush()
                self._journal(item.id, "upsert")
                changed += 1
        return changed

    def set_status_of(self, tier: str, ref: str | int, status: str) -> bool:
        item = self.find(tier, ref)
        return bool(item) and self.set_status([item.id], status) > 0

    def archived(self, limit: int = 10) -> list[MemoryItem]:
        return list(self.s.scalars(select(MemoryItem).where(MemoryItem.status == "archived")
                                   .order_by(MemoryItem.updated_at.desc(), MemoryItem.id.desc()).limit(limit)).all())

    def many(self, item_ids: Iterable[int]) -> dict[int, MemoryItem]:
        ids = list(item_ids)
        if not ids:
            return {}
        return {row.id: row for row in self.s.scalars(select(MemoryItem).where(MemoryItem.id.in_(ids))).all()}

    def touch(self, item_ids: Iterable[int], now: datetime) -> None:
        ids = list(item_ids)
        if ids:
            self.s.execute(update(MemoryItem).where(MemoryItem.id.in_(ids))
                           .values(access_count=MemoryItem.access_count + 1, last_accessed_at=now))

    def indexed(self, after_id: int = 0, limit: int | None = 5000) -> list[MemoryItem]:
        """Items that belong in the indexes (not deleted), by id, for building them from scratch."""
        q = select(MemoryItem).where(MemoryItem.id > after_id, MemoryItem.status != "deleted").order_by(MemoryItem.id)
        return list(self.s.scalars(q.limit(limit) if limit else q).all())

    def ids_of(self, tier: str, refs: Iterable[str]) -> set[int]:
        refs = list(refs)
        if not refs:
            return set()
        return set(self.s.scalars(select(MemoryItem.id).where(MemoryItem.tier == tier, MemoryItem.ref.in_(refs))).all())

    def journal_head(self) -> int:
        return self.s.scalar(select(func.max(MemoryJournal.id))) or 0

    def changed_since(self, journal_id: int, upto: int) -> list[int]:
        return list(self.s.scalars(select(MemoryJournal.item_id).where(MemoryJournal.id > journal_id,
                                                                       MemoryJournal.id <= upto).distinct()).all())

    def sample(self, tiers: Iterable[str], limit: int = 50, exclude_thread: str | None = None) -> list[MemoryItem]:
        """A random handful of active items of these tiers (flashbacks, knowledge-base stimuli)."""
        q = select(MemoryItem).where(MemoryItem.tier.in_(list(tiers)), MemoryItem.status == "active")
        if exclude_thread is not None:
            q = q.where((MemoryItem.thread_id.is_(None)) | (MemoryItem.thread_id != exclude_thread))
        return list(self.s.scalars(q.order_by(func.random()).limit(limit)).all())

    def of_tier(self, tier: str, status: str | None = "active", limit: int | None = None) -> list[MemoryItem]:
        q = select(MemoryItem).where(MemoryItem.tier == tier)
        if status:
            q = q.where(MemoryItem.status == status)
        q = q.order_by(MemoryItem.id)
        return list(self.s.scalars(q.limit(limit) if limit else q).all())
