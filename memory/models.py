"""SQLAlchemy 2 models: every table the tick needs.

Column names follow HMP's `db_structure.sql` where HMP has one (notes, process_log, llm_memory,
llm_registry, config, llm_recent_responses → `messages`). Only portable types are used
(JSON, not JSONB; no SQLite-only SQL) so the same models run on SQLite and PostgreSQL.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from memory.clock import utcnow


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


def table_of(model: type[Base]) -> Table:
    """A mapped class's table (declarative types `__table__` as any FROM clause; every model here maps a Table)."""
    table = model.__table__
    assert isinstance(table, Table)
    return table


class SchemaVersion(Base):
    __tablename__ = "schema_version"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer)
    applied_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Thread(Base):
    """A conversation/thought thread: the persona's main thread or a (Stelis) child."""

    __tablename__ = "threads"
    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    parent_id: Mapped[str | None] = mapped_column(ForeignKey("threads.id"), index=True)
    label: Mapped[str] = mapped_column(String(200), default="")
    playbook: Mapped[str] = mapped_column(String(200), default="")
    persona: Mapped[str] = mapped_column(String(200), default="")
    depth: Mapped[int] = mapped_column(Integer, default=0)
    window_ratio: Mapped[float] = mapped_column(Float, default=1.0)
    status: Mapped[str] = mapped_column(String(20), default="running")  # running|completed|aborted
    tick: Mapped[int] = mapped_column(Integer, default=0)
    chronicle_prompt: Mapped[str | None] = mapped_column(Text)
    chronicle: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # v2: Stelis bookkeeping
    origin: Mapped[str] = mapped_column(String(20), default="root")  # root | playbook | command
    owner: Mapped[str | None] = mapped_column(String(200))  # host:pid:start of the process running it
    error: Mapped[str | None] = mapped_column(Text)  # why it was aborted


class Message(Base):
    """A thread's own outputs (HMP `llm_recent_responses`) with every reflex column."""

    __tablename__ = "messages"
    __table_args__ = (Index("ix_messages_thread_id_desc", "thread_id", "id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    thread_id: Mapped[str] = mapped_column(ForeignKey("threads.id"))
    tick: Mapped[int] = mapped_column(Integer, default=0)
    # response | stagnation_record | continuation | compression | human | step (an `llm` node's output)
    # | stelis_anchor (points at a child thread through meta.child; rendered at read time, never indexed)
    kind: Mapped[str] = mapped_column(String(32), default="response")
    role: Mapped[str] = mapped_column(String(16), default="assistant")
    content: Mapped[str] = mapped_column(Text, default="")
    # Idempotency key: a re-run node (after a kill) updates its row instead of adding a second one.
    dedup_key: Mapped[str | None] = mapped_column(String(200), unique=True)
    llm_id: Mapped[str | None] = mapped_column(String(200))
    # the reflexes' details load when read (inspect, export), not with every query for recent thoughts
    reflection: Mapped[str | None] = mapped_column(Text, deferred=True, deferred_group="reflex_detail")
    novelty_score: Mapped[float | None] = mapped_column(Float)
    new_ideas: Mapped[list[Any]] = mapped_column(default=list, deferred=True, deferred_group="reflex_detail")
    refined_ideas: Mapped[list[Any]] = mapped_column(default=list, deferred=True, deferred_group="reflex_detail")
    discarded_ideas: Mapped[list[Any]] = mapped_column(default=list, deferred=True, deferred_group="reflex_detail")
    tags: Mapped[list[Any]] = mapped_column(default=list)
    emotions: Mapped[list[Any]] = mapped_column(default=list)
    rating: Mapped[float | None] = mapped_column(Float)
    distribution: Mapped[dict[str, Any]] = mapped_column(default=dict, deferred=True, deferred_group="reflex_detail")
    validators: Mapped[list[Any]] = mapped_column(default=list, deferred=True, deferred_group="reflex_detail")
    auto_pass: Mapped[bool] = mapped_column(Boolean, default=False)
    self_validation: Mapped[bool] = mapped_column(Boolean, default=False)
    confidence: Mapped[float | None] = mapped_column(Float)
    unverified_facts_json: Mapped[list[Any]] = mapped_column(
        default=list, deferred=True, deferred_group="reflex_detail"
    )
    stagnation_flag: Mapped[bool] = mapped_column(Boolean, default=False)
    stagnation_reason: Mapped[str | None] = mapped_column(Text)
    triggered_actions: Mapped[list[Any]] = mapped_column(default=list, deferred=True, deferred_group="reflex_detail")
    meta: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Note(Base):
    """HMP `notes`: messages between the human, the persona, tasks and the system."""

    __tablename__ = "notes"
    __table_args__ = (
        Index("ix_notes_unread", "read", "source", "id"),
        Index("ix_notes_source_created", "source", "created_at"),  # "when did the human last write"
        Index("ix_notes_person", "person_id", "id"),
    )  # a person's conversation, newest first
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    text: Mapped[str] = mapped_column(Text)
    tags: Mapped[list[Any]] = mapped_column(default=list)
    user_did: Mapped[str] = mapped_column(String(200), default="ALL")
    source: Mapped[str] = mapped_column(String(32), default="user")  # memory/note_kinds.py NoteSource
    links: Mapped[str] = mapped_column(Text, default="")
    read: Mapped[bool] = mapped_column(Boolean, default=False)
    hidden: Mapped[bool] = mapped_column(Boolean, default=False)
    priority: Mapped[int] = mapped_column(Integer, default=0)
    task_id: Mapped[int | None] = mapped_column(Integer)
    thread_id: Mapped[str | None] = mapped_column(String(128), index=True)
    llm_id: Mapped[str | None] = mapped_column(String(200))
    read_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    author_id: Mapped[int | None] = mapped_column(
        Integer
    )  # people.id of the human who wrote it (None: the persona, the system)
    # the conversation it belongs to: the person who wrote it, or the person the persona's message went to
    person_id: Mapped[int | None] = mapped_column(Integer)
    door: Mapped[str | None] = mapped_column(String(16))  # how it came or went (memory/note_kinds.py Door)


class ProcessLog(Base):
    """HMP `process_log`: results of commands and external processes, shown until `close`."""

    __tablename__ = "process_log"
    __table_args__ = (Index("ix_process_log_open", "thread_id", "status"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200))
    value: Mapped[str] = mapped_column(Text, default="")
    tags: Mapped[list[Any]] = mapped_column(default=list)
    status: Mapped[str] = mapped_column(String(20), default="ok")  # ok|warning|error|timeout|offline|close|in_progress
    priority: Mapped[int] = mapped_column(Integer, default=0)
    thread_id: Mapped[str | None] = mapped_column(String(128))
    task_id: Mapped[int | None] = mapped_column(Integer)
    llm_id: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # the untrusted text the value holds (memory/provenance.py): a knowledge-base chunk, a search result, a tool's
    # answer
    sources: Mapped[list[Any]] = mapped_column(default=list)


class Tick(Base):
    """HMP `agent_log`: one row per tick of a thread."""

    __tablename__ = "ticks"
    __table_args__ = (UniqueConstraint("thread_id", "tick", name="uq_ticks_thread_tick"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    thread_id: Mapped[str] = mapped_column(ForeignKey("threads.id"))
    tick: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(20), default="running")  # running|ok|degraded|failed
    mode: Mapped[str] = mapped_column(String(20), default="chat")
    llm_calls: Mapped[int] = mapped_column(Integer, default=0)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    llm_ms: Mapped[float] = mapped_column(Float, default=0.0)
    summary: Mapped[dict[str, Any]] = mapped_column(default=dict)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class ConfigEntry(Base):
    __tablename__ = "config"
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    value: Mapped[Any] = mapped_column(JSON)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class LLMRegistryEntry(Base):
    __tablename__ = "llm_registry"
    id: Mapped[str] = mapped_column(String(200), primary_key=True)
    provider: Mapped[str] = mapped_column(String(32))  # llamacpp | openai | fake
    model: Mapped[str] = mapped_column(String(200), default="")
    priority: Mapped[int] = mapped_column(Integer, default=0)  # higher = preferred
    is_validator: Mapped[bool] = mapped_column(Boolean, default=False)
    trust_score: Mapped[float] = mapped_column(Float, default=1.0)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    config: Mapped[dict[str, Any]] = mapped_column(default=dict)
    description: Mapped[str] = mapped_column(Text, default="")
    registered_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ExecutedCommand(Base):
    """One row per command seen; `cmd_key` is unique, so a command's effect commits at most once."""

    __tablename__ = "executed_commands"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    cmd_key: Mapped[str] = mapped_column(String(300), unique=True)
    thread_id: Mapped[str] = mapped_column(String(128), index=True)
    tick: Mapped[int] = mapped_column(Integer)
    cmd_id: Mapped[str] = mapped_column(String(200))
    type: Mapped[str] = mapped_column(String(100))
    args: Mapped[dict[str, Any]] = mapped_column(default=dict)
    description: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(20))  # executed|failed|unvalidated|unknown
    result: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class LLMCall(Base):
    """Accounting: every LLM call with provider, model, tokens and latency."""

    __tablename__ = "llm_calls"
    __table_args__ = (Index("ix_llm_calls_thread_tick", "thread_id", "tick"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    thread_id: Mapped[str | None] = mapped_column(String(128))
    tick: Mapped[int | None] = mapped_column(Integer)
    purpose: Mapped[str] = mapped_column(String(40), default="think")
    llm_id: Mapped[str] = mapped_column(String(200))
    provider: Mapped[str] = mapped_column(String(32))
    model: Mapped[str] = mapped_column(String(200))
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cached_tokens: Mapped[int] = mapped_column(Integer, default=0)  # of prompt_tokens, served from a prompt cache
    latency_ms: Mapped[float] = mapped_column(Float, default=0.0)
    ok: Mapped[bool] = mapped_column(Boolean, default=True)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class LLMMemory(Base):
    """HMP `llm_memory`: the model's own notepad of ideas, hypotheses and plans."""

    __tablename__ = "llm_memory"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    title: Mapped[str] = mapped_column(String(300), default="")
    content: Mapped[str] = mapped_column(Text)
    tags: Mapped[list[Any]] = mapped_column(default=list)
    thread_id: Mapped[str | None] = mapped_column(String(128))
    llm_id: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16), default="active")  # active | archived (v4)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


# ---- v3: memory tiers -------------------------------------------------------------------------------------


class MemoryItem(Base):
    """The retrieval catalogue: one row per retrievable thing of any tier, the unit BM25 and Chroma index.

    `tier` + `ref` point at the row it stands for (a diary entry, a message, a KB chunk, …). `episode` and
    `seq` place it in a sequence (a conversation, a document) so retrieval can use its neighbours;
    `context_before`/`context_after` are the neighbouring texts, indexed lexically at half weight.
    """

    __tablename__ = "memory_items"
    __table_args__ = (
        UniqueConstraint("tier", "ref", name="uq_memory_items_tier_ref"),
        Index("ix_memory_items_episode_seq", "episode", "seq"),
        Index("ix_memory_items_status_tier", "status", "tier"),
        Index("ix_memory_items_event_at", "event_at"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tier: Mapped[str] = mapped_column(String(32))
    ref: Mapped[str] = mapped_column(String(200))
    thread_id: Mapped[str | None] = mapped_column(String(128))
    author: Mapped[str] = mapped_column(String(200), default="")
    episode: Mapped[str | None] = mapped_column(String(200))
    seq: Mapped[int | None] = mapped_column(Integer)
    title: Mapped[str] = mapped_column(String(300), default="")
    text: Mapped[str] = mapped_column(Text)
    context_before: Mapped[str] = mapped_column(Text, default="")
    context_after: Mapped[str] = mapped_column(Text, default="")
    tags: Mapped[list[Any]] = mapped_column(default=list)
    emotions: Mapped[list[Any]] = mapped_column(default=list)
    importance: Mapped[float] = mapped_column(Float, default=0.5)  # 0..1
    emotion_score: Mapped[float] = mapped_column(Float, default=0.0)  # 0..1, strongest emotion / 5
    novelty: Mapped[float | None] = mapped_column(Float)
    pinned: Mapped[bool] = mapped_column(Boolean, default=False)
    status: Mapped[str] = mapped_column(String(16), default="active")  # active | archived | deleted
    access_count: Mapped[int] = mapped_column(Integer, default=0)
    last_accessed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)  # record time
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # event time: when what it tells happened, when its text or its source says (memory/event_time.py); record
    # time is `created_at`
    event_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    meta: Mapped[dict[str, Any]] = mapped_column(default=dict)


class MemoryJournal(Base):
    """Outbox of catalogue changes, written in the same transaction; the indexes replay it (crash-safe sync)."""

    __tablename__ = "memory_journal"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    item_id: Mapped[int] = mapped_column(Integer, index=True)
    op: Mapped[str] = mapped_column(String(8))  # upsert | delete
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class MemoryVector(Base):
    """A memory's vectors, for re-scoring its candidates: row 0 its whole text, then one per sentence chunk, as
    float16 bytes. Chroma's nearest-neighbour index holds only row 0 (memory/retrieval/index.py): a quarter of the
    records to insert and to load after a restart. `texts_key` is a digest of the texts they were made from, so an
    unchanged memory is never embedded again; `embedder` names the model (another model's rows count as missing)."""

    __tablename__ = "memory_vectors"
    item_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    embedder: Mapped[str] = mapped_column(String(200))
    texts_key: Mapped[str] = mapped_column(String(32))
    parts: Mapped[int] = mapped_column(Integer)
    vectors: Mapped[bytes] = mapped_column(LargeBinary)


class MemoryBlock(Base):
    """Core memory and notepad (Nexus Ark): always-injected text the persona edits itself, with a size limit."""

    __tablename__ = "memory_blocks"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)  # core | notepad
    content: Mapped[str] = mapped_column(Text, default="")
    char_limit: Mapped[int] = mapped_column(Integer, default=2000)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class MemoryBlockVersion(Base):
    """What a core-memory or notepad rewrite (or clear) replaced: kept so the change can be undone."""

    __tablename__ = "memory_block_versions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64), index=True)
    content: Mapped[str] = mapped_column(Text)
    replaced_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class _Lifecycle:
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class DiaryEntry(_Lifecycle, Base):
    """HMP `diary_entries`: the cognitive diary, written only by explicit commands."""

    __tablename__ = "diary_entries"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    text: Mapped[str] = mapped_column(Text)
    tags: Mapped[list[Any]] = mapped_column(default=list)
    emotions: Mapped[list[Any]] = mapped_column(default=list)
    priority: Mapped[int] = mapped_column(Integer, default=0)
    pinned: Mapped[bool] = mapped_column(Boolean, default=False)
    status: Mapped[str] = mapped_column(String(16), default="active")  # active | archived
    thread_id: Mapped[str | None] = mapped_column(String(128))
    tick: Mapped[int | None] = mapped_column(Integer)


class Concept(_Lifecycle, Base):
    """HMP `concepts`: nodes of the semantic graph."""

    __tablename__ = "concepts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    tags: Mapped[list[Any]] = mapped_column(default=list)
    weight: Mapped[float] = mapped_column(Float, default=1.0)
    pinned: Mapped[bool] = mapped_column(Boolean, default=False)
    status: Mapped[str] = mapped_column(String(16), default="active")


class ConceptLink(_Lifecycle, Base):
    """HMP `links`: typed, weighted edges between concepts."""

    __tablename__ = "links"
    __table_args__ = (UniqueConstraint("source_id", "target_id", "relation", name="uq_links_edge"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    source_id: Mapped[int] = mapped_column(ForeignKey("concepts.id", ondelete="CASCADE"), index=True)
    target_id: Mapped[int] = mapped_column(ForeignKey("concepts.id", ondelete="CASCADE"), index=True)
    relation: Mapped[str] = mapped_column(String(100), default="related_to")
    weight: Mapped[float] = mapped_column(Float, default=1.0)
    tags: Mapped[list[Any]] = mapped_column(default=list)
    status: Mapped[str] = mapped_column(String(16), default="active")


class Abstract(_Lifecycle, Base):
    """HMP `abstracts`: periodic thematic digests with the ids of what they were made from."""

    __tablename__ = "abstracts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    title: Mapped[str] = mapped_column(String(300))
    summary: Mapped[str] = mapped_column(Text)
    tags: Mapped[list[Any]] = mapped_column(default=list)
    sources: Mapped[list[Any]] = mapped_column(default=list)  # ["message:12", "diary:3", …]
    trigger: Mapped[str] = mapped_column(String(40), default="manual")  # every_n | goal_closed | mode_change | manual
    thread_id: Mapped[str | None] = mapped_column(String(128))


class Goal(_Lifecycle, Base):
    """HMP goals: the why. Nexus Ark's horizons: short goals (3 injected) and long ones (2 injected)."""

    __tablename__ = "goals"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    title: Mapped[str] = mapped_column(String(300))
    description: Mapped[str] = mapped_column(Text, default="")
    horizon: Mapped[str] = mapped_column(String(8), default="short")  # short | long
    status: Mapped[str] = mapped_column(String(16), default="active")  # active | paused | completed | failed
    priority: Mapped[int] = mapped_column(Integer, default=1)
    constraints: Mapped[list[Any]] = mapped_column(default=list)
    success_criteria: Mapped[list[Any]] = mapped_column(default=list)
    tags: Mapped[list[Any]] = mapped_column(default=list)
    progress_notes: Mapped[list[Any]] = mapped_column(default=list)
    related_values: Mapped[list[Any]] = mapped_column(default=list)  # v14, Nexus Ark: the values a (long) goal serves
    reason: Mapped[str | None] = mapped_column(Text)  # why it failed / was paused
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    archived_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))  # v7: set aside, restorable


class GoalLink(Base):
    __tablename__ = "goal_links"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    parent_goal_id: Mapped[int] = mapped_column(ForeignKey("goals.id", ondelete="CASCADE"), index=True)
    child_goal_id: Mapped[int] = mapped_column(ForeignKey("goals.id", ondelete="CASCADE"), index=True)
    relation_type: Mapped[str] = mapped_column(String(32), default="subgoal")


class Task(_Lifecycle, Base):
    """HMP tasks: the what and how, optionally serving a goal."""

    __tablename__ = "tasks"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    goal_id: Mapped[int | None] = mapped_column(ForeignKey("goals.id", ondelete="SET NULL"), index=True)
    title: Mapped[str] = mapped_column(String(300))
    description: Mapped[str] = mapped_column(Text, default="")
    priority: Mapped[int] = mapped_column(Integer, default=1)
    pinned: Mapped[bool] = mapped_column(Boolean, default=False)
    # open | in_progress | done | failed | cancelled | frozen (its sub-cycle hit an error: waits for review)
    status: Mapped[str] = mapped_column(String(16), default="open")
    kind: Mapped[str] = mapped_column(String(32), default="task")  # task | fact-check
    tags: Mapped[list[Any]] = mapped_column(default=list)
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # v6: the HMP auxiliary REPL cycle working on this task
    repl_mode: Mapped[str] = mapped_column(String(16), default="none")  # none | read_only
    repl_status: Mapped[str | None] = mapped_column(String(16))  # running | stopped | error
    repl_config: Mapped[dict[str, Any]] = mapped_column(default=dict)  # max_ticks, deadline_s, pause_s, restarts…
    repl_thread: Mapped[str | None] = mapped_column(String(128))  # the sub-cycle's own thread
    repl_error: Mapped[str | None] = mapped_column(Text)
    archived_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))  # v7: set aside, restorable


class Episode(Base):
    """Nexus Ark episodic memory: one summary per day, rolled up per week and per month."""

    __tablename__ = "episodes"
    __table_args__ = (UniqueConstraint("period", "start", name="uq_episodes_period_start"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    period: Mapped[str] = mapped_column(String(8))  # day | week | month
    start: Mapped[str] = mapped_column(String(10))  # YYYY-MM-DD, the first day covered
    summary: Mapped[str] = mapped_column(Text)
    key_events: Mapped[list[Any]] = mapped_column(default=list)
    emotional_tone: Mapped[str] = mapped_column(String(32), default="neutral")
    sources: Mapped[list[Any]] = mapped_column(default=list)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Entity(_Lifecycle, Base):
    """Nexus Ark entity memory: one record per person/thing, merged over time."""

    __tablename__ = "entities"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    key: Mapped[str] = mapped_column(String(200), unique=True)  # normalised name
    name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(32), default="thing")  # person | place | thing | concept
    description: Mapped[str] = mapped_column(Text, default="")
    aliases: Mapped[list[Any]] = mapped_column(default=list)
    facts: Mapped[list[Any]] = mapped_column(default=list)


class Insight(Base):
    """Nexus Ark dream diary: insight, strategy and a log entry per dream."""

    __tablename__ = "insights"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    level: Mapped[int] = mapped_column(Integer, default=1)  # 1 daily | 2 weekly | 3 monthly
    trigger_topic: Mapped[str] = mapped_column(Text, default="")
    insight: Mapped[str] = mapped_column(Text)
    strategy: Mapped[str] = mapped_column(Text, default="")
    log_entry: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class UnverifiedFact(Base):
    """HMP `UnverifiedFacts`: claims below the confidence threshold, each with a fact-check task."""

    __tablename__ = "unverified_facts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    claim: Mapped[str] = mapped_column(Text)
    context: Mapped[str] = mapped_column(Text, default="")
    confidence: Mapped[float] = mapped_column(Float, default=0.5)
    sources: Mapped[list[Any]] = mapped_column(default=list)
    why_unverified: Mapped[str] = mapped_column(Text, default="")
    priority: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[str] = mapped_column(
        String(16), default="open"
    )  # open | pending (fact-check task) | verified | rejected
    resolution: Mapped[str | None] = mapped_column(Text)
    message_id: Mapped[int | None] = mapped_column(Integer)
    task_id: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class EmotionLogEntry(Base):
    """Nexus Ark emotion log: the user's (and the persona's) emotions over time."""

    __tablename__ = "emotion_log"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    subject: Mapped[str] = mapped_column(String(16), default="user")  # user | persona
    emotion: Mapped[str] = mapped_column(String(40))
    strength: Mapped[int] = mapped_column(Integer, default=3)
    snippet: Mapped[str] = mapped_column(Text, default="")
    thread_id: Mapped[str | None] = mapped_column(String(128))
    tick: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class AntiStagnationMetric(Base):
    """HMP `anti_stagnation_metrics`: one row per tick's novelty check, with what the reflex did about it.

    `novelty_after` is the next output's novelty score, filled in once it is known, so every reflex-lite or
    escalation can be judged by its before/after.
    """

    __tablename__ = "anti_stagnation_metrics"
    __table_args__ = (Index("ix_anti_stagnation_thread_tick", "thread_id", "tick"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    thread_id: Mapped[str] = mapped_column(String(128))
    tick: Mapped[int] = mapped_column(Integer)
    message_id: Mapped[int | None] = mapped_column(Integer)
    novelty_score: Mapped[float | None] = mapped_column(Float)
    ngram_similarity: Mapped[float | None] = mapped_column(Float)
    semantic_similarity: Mapped[float | None] = mapped_column(Float)  # cosine of the sentence embeddings
    llm_novelty: Mapped[float | None] = mapped_column(Float)  # the LLM comparison's score, when one was made
    method: Mapped[str] = mapped_column(String(16), default="cheap")  # cheap | llm
    new_ideas: Mapped[int] = mapped_column(Integer, default=0)
    refined_ideas: Mapped[int] = mapped_column(Integer, default=0)
    discarded_ideas: Mapped[int] = mapped_column(Integer, default=0)
    stagnation_flag: Mapped[bool] = mapped_column(Boolean, default=False)
    reason: Mapped[str | None] = mapped_column(Text)
    streak: Mapped[int] = mapped_column(Integer, default=0)  # consecutive stagnant outputs, this one included
    diagnosis: Mapped[str | None] = mapped_column(String(32))
    mechanisms: Mapped[list[Any]] = mapped_column(default=list)  # escalation mechanisms applied, cheapest first
    triggered_actions: Mapped[list[Any]] = mapped_column(default=list)
    sampling: Mapped[dict[str, Any]] = mapped_column(default=dict)
    novelty_after: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class KBDocument(Base):
    """A knowledge-base document; its chunks are memory items of tier `kb` (ref `doc:chunk`)."""

    __tablename__ = "kb_documents"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    path: Mapped[str] = mapped_column(Text)
    title: Mapped[str] = mapped_column(String(300))
    sha256: Mapped[str] = mapped_column(String(64), unique=True)
    chunks: Mapped[int] = mapped_column(Integer, default=0)
    chars: Mapped[int] = mapped_column(Integer, default=0)
    # who gave it when not the owner at the web page or the terminal: "Ann (guest, via matrix)"
    source: Mapped[str] = mapped_column(String(300), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class OpenQuestion(Base):
    """Nexus Ark `open_questions`: what the persona wants to know; the source of its curiosity drive."""

    __tablename__ = "open_questions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    topic: Mapped[str] = mapped_column(Text)
    context: Mapped[str] = mapped_column(Text, default="")
    priority: Mapped[float] = mapped_column(Float, default=0.5)  # 0..1
    source: Mapped[str] = mapped_column(String(32), default="dream")  # dream | command | conversation
    status: Mapped[str] = mapped_column(String(16), default="open")  # open | resolved
    resolution: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    resolved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Session(Base):
    """Epos sessions: one run of a loop on a thread, from start to stop, with what it needs to be revived."""

    __tablename__ = "sessions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    thread_id: Mapped[str] = mapped_column(String(128), index=True)
    playbook: Mapped[str] = mapped_column(String(200), default="")
    persona: Mapped[str] = mapped_column(String(200), default="")
    status: Mapped[str] = mapped_column(String(16), default="running")  # running | stopped | killed
    owner: Mapped[str | None] = mapped_column(String(200))  # host:pid:start of the process running it
    first_tick: Mapped[int] = mapped_column(Integer, default=0)
    last_tick: Mapped[int] = mapped_column(Integer, default=0)
    first_message_id: Mapped[int] = mapped_column(Integer, default=0)  # messages after this id belong to it
    goal_state: Mapped[dict[str, Any]] = mapped_column(default=dict)  # HMP checkpoint: active goals, open tasks
    context: Mapped[dict[str, Any]] = mapped_column(default=dict)  # saved at stop: what a revival is seeded with
    revived_from: Mapped[int | None] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    stopped_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


# ---- v7: consent ------------------------------------------------------------------------------------------


class Approval(Base):
    """A command that waits for the human's consent, and what became of it.

    `cmd_key` (`thread:tick:cmd_id`) ties it to the command that asked; `same_as` names an earlier approval
    with the same type and arguments when the caller folds a repeated request into it.
    """

    __tablename__ = "approvals"
    __table_args__ = (Index("ix_approvals_status", "status", "id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    thread_id: Mapped[str] = mapped_column(String(128), index=True)
    root_thread: Mapped[str] = mapped_column(String(128), index=True)
    tick: Mapped[int] = mapped_column(Integer, default=0)
    cmd_key: Mapped[str] = mapped_column(String(300), unique=True)
    cmd_id: Mapped[str] = mapped_column(String(200), default="")
    type: Mapped[str] = mapped_column(String(64))
    args: Mapped[dict[str, Any]] = mapped_column(default=dict)
    effect: Mapped[str] = mapped_column(String(16))  # read | write_self | modify_self | external
    description: Mapped[str] = mapped_column(Text, default="")
    reason: Mapped[str] = mapped_column(Text, default="")  # why it needs approval
    status: Mapped[str] = mapped_column(
        String(16), default="pending"
    )  # pending|approved|denied|executed|failed|expired
    decided_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    decided_by: Mapped[str | None] = mapped_column(String(64))
    decision_reason: Mapped[str | None] = mapped_column(Text)
    executed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    result: Mapped[str | None] = mapped_column(Text)
    same_as: Mapped[int | None] = mapped_column(Integer)
    # the untrusted text the asking tick had read, when that is why it waits (memory/provenance.py)
    provenance: Mapped[list[Any]] = mapped_column(default=list)


class AuditEntry(Base):
    """The consent layer's audit trail: every request, decision and outcome for a command, append-only."""

    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_thread_id", "thread_id", "id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    thread_id: Mapped[str | None] = mapped_column(String(128))
    tick: Mapped[int | None] = mapped_column(Integer)
    cmd_key: Mapped[str | None] = mapped_column(String(300))
    type: Mapped[str] = mapped_column(String(64), default="")
    effect: Mapped[str | None] = mapped_column(String(16))
    # requested | approved | denied | auto_approved | validated | blocked | executed | failed | expired | refused |
    # trusted (the owner trusted a row written from untrusted text: `type` provenance.trust)
    decision: Mapped[str] = mapped_column(String(24))
    actor: Mapped[str] = mapped_column(String(64))  # human | policy | validators | auto_pass | loop | ethics
    reason: Mapped[str] = mapped_column(Text, default="")
    approval_id: Mapped[int | None] = mapped_column(Integer, index=True)
    # v17: an ethics decision's model (persona/ethics.py `Ethics.decision_record`): model_type, model_weights,
    # violation_policy, audit_json, rating; None for the other entries
    ethics: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)


class Taint(Base):
    """A memory row written from untrusted text (memory/provenance.py): the tier and row (`tier` + `ref`, as the memory
    history names them: goal, task, note, diary, message…) and the untrusted sources the writing tick had read.
    Active until the owner trusts the row (`cleared_at`); a later write from untrusted text taints it again."""

    __tablename__ = "taints"
    __table_args__ = (
        UniqueConstraint("tier", "ref", name="uq_taints_tier_ref"),
        Index("ix_taints_cleared_at", "cleared_at", "id"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tier: Mapped[str] = mapped_column(String(32))
    ref: Mapped[str] = mapped_column(String(128))
    sources: Mapped[list[Any]] = mapped_column(default=list)  # provenance.Source dicts
    thread_id: Mapped[str | None] = mapped_column(String(128))
    tick: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    cleared_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    cleared_by: Mapped[str | None] = mapped_column(String(64))
    cleared_reason: Mapped[str] = mapped_column(Text, default="")


# ---- v8: the face (web app) -------------------------------------------------------------------------------


class LiveEvent(Base):
    """What a running loop did, step by step, for the web app's live views and `/api/events` (the loop writes,
    any process reading the database streams). A short journal: old rows are trimmed by the writer."""

    __tablename__ = "live_events"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)  # when the loop saw it
    thread_id: Mapped[str | None] = mapped_column(String(128))
    tick: Mapped[int | None] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(32))  # step | tick | tick_failed | dream | stelis | loop | …
    node: Mapped[str | None] = mapped_column(String(128))
    data: Mapped[dict[str, Any]] = mapped_column(default=dict)


class MemoryChange(Base):
    """The history of every memory tier: who changed what, when, and the row before and after."""

    __tablename__ = "memory_history"
    __table_args__ = (Index("ix_memory_history_ref", "tier", "ref", "id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    tier: Mapped[str] = mapped_column(String(32))  # the table's tier name (diary, concept, goal, core_memory, …)
    ref: Mapped[str] = mapped_column(String(128))  # the row's id (or block name)
    action: Mapped[str] = mapped_column(String(16))  # create | update | archive | restore | delete
    actor: Mapped[str] = mapped_column(String(64), default="persona")  # human | persona | dream | upkeep | system
    before: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    after: Mapped[dict[str, Any] | None] = mapped_column(JSON)


# ---- a deployment of many personas on one PostgreSQL database (memory/fleet.py) ------------------------------------


class RegistryBase(DeclarativeBase):
    """The deployment's own tables, in the database's default schema — never created in a persona's schema."""


class PersonaEntry(RegistryBase):
    """A persona of a deployment: whether it should be thinking, where its memory is, and its persona files."""

    __tablename__ = "anima_personas"
    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    schema: Mapped[str] = mapped_column(String(63), unique=True)  # its memory: one PostgreSQL schema each
    state: Mapped[str] = mapped_column(String(16), default="active")  # active | paused
    playbook: Mapped[str] = mapped_column(String(200), default="repl")
    files: Mapped[bytes | None] = mapped_column(LargeBinary)  # the persona directory as tar.gz (None: shipped)
    files_digest: Mapped[str] = mapped_column(String(64), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    next_tick_job: Mapped[int | None] = mapped_column(Integer)  # the job engine's id of its next scheduled tick
    next_tick_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    ticks: Mapped[int] = mapped_column(Integer, default=0)  # ticks its jobs ran
    last_tick_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_worker: Mapped[str | None] = mapped_column(String(200))


# ---- v9: reach (feeds, scripts and their runs, loop-breaking strategies, thinking methods) ----------------------


class Feed(Base):
    """An RSS/Atom subscription: the operator's (config.yaml `feeds.subscriptions`) or the persona's (`feeds.subscribe`,
    with consent). Unsubscribing turns it off; its items stay as notes."""

    __tablename__ = "feeds"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    url: Mapped[str] = mapped_column(String(1000), unique=True)
    name: Mapped[str] = mapped_column(String(100))
    tags: Mapped[list[Any]] = mapped_column(default=list)
    status: Mapped[str] = mapped_column(String(16), default="active")  # active | off
    added_by: Mapped[str] = mapped_column(String(32), default="persona")  # persona | operator
    etag: Mapped[str | None] = mapped_column(String(500))
    modified: Mapped[str | None] = mapped_column(String(100))
    last_fetched_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_error: Mapped[str | None] = mapped_column(Text)
    items_total: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class FeedItem(Base):
    """An entry already taken from a feed (so it becomes a note once), and the note it became."""

    __tablename__ = "feed_items"
    __table_args__ = (UniqueConstraint("feed_id", "guid", name="uq_feed_items_guid"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    feed_id: Mapped[int] = mapped_column(ForeignKey("feeds.id"), index=True)
    guid: Mapped[str] = mapped_column(String(500))
    note_id: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class AgentScript(Base):
    """HMP `agent_scripts`: a script the persona wrote, kept as data; it runs only through `process.start`."""

    __tablename__ = "agent_scripts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    language: Mapped[str] = mapped_column(String(16), default="python")
    code: Mapped[str] = mapped_column(Text)
    description: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(16), default="active")  # active | archived
    runs: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ProcessRun(Base):
    """A background job behind a `process_log` row: a script in its sandbox, or a question to another model
    (`llm_task`). pending → running → ok | error | timeout | killed | offline (its owner died)."""

    __tablename__ = "process_runs"
    __table_args__ = (Index("ix_process_runs_status", "status"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    process_id: Mapped[int] = mapped_column(Integer, index=True)  # process_log.id
    kind: Mapped[str] = mapped_column(String(16))  # script | llm_task
    script_id: Mapped[int | None] = mapped_column(Integer)
    thread_id: Mapped[str | None] = mapped_column(String(128))
    spec: Mapped[dict[str, Any]] = mapped_column(default=dict)  # args, limits; llm_task: llm id, question
    status: Mapped[str] = mapped_column(String(16), default="pending")
    pid: Mapped[int | None] = mapped_column(Integer)
    owner: Mapped[str | None] = mapped_column(String(200))
    workdir: Mapped[str | None] = mapped_column(Text)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    output: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class StagnationStrategy(Base):
    """HMP `stagnation_strategies`: the loop-breaking mechanisms the escalation chooses from — the built-in ones
    (rows the code seeds; archiving one turns it off) and the persona's own micro-scenarios ("start with an analogy"),
    each with its class, cost, and how often it was used and how often novelty came back after it."""

    __tablename__ = "stagnation_strategies"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    mechanism_class: Mapped[str] = mapped_column(String(16))  # external | context | internal | radical
    cost: Mapped[int] = mapped_column(Integer, default=1)
    instruction: Mapped[str] = mapped_column(Text, default="")  # what the persona's own strategy tells the next prompt
    builtin: Mapped[bool] = mapped_column(Boolean, default=False)
    status: Mapped[str] = mapped_column(String(16), default="active")  # active | archived
    uses: Mapped[int] = mapped_column(Integer, default=0)
    helped: Mapped[int] = mapped_column(Integer, default=0)
    # where it came from when a peer offered it and the owner approved it (v28): {"peer", "name", "container"}
    origin: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ThinkingMethod(Base):
    """HMP `thinking_methods`: what to do when no solution comes ("check the converse"); the escalation's random
    iteration draws one, and the persona adds its own."""

    __tablename__ = "thinking_methods"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    instruction: Mapped[str] = mapped_column(Text)
    builtin: Mapped[bool] = mapped_column(Boolean, default=False)
    status: Mapped[str] = mapped_column(String(16), default="active")
    uses: Mapped[int] = mapped_column(Integer, default=0)
    origin: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)  # a peer's, owner-approved (v28)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class AgentTable(Base):
    """HMP `agent_tables`: a table the persona made for its own data (columns by name; rows are JSON objects)."""

    __tablename__ = "agent_tables"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    columns: Mapped[list[Any]] = mapped_column(default=list)
    status: Mapped[str] = mapped_column(String(16), default="active")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class AgentTableRow(Base):
    __tablename__ = "agent_table_rows"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    table_id: Mapped[int] = mapped_column(ForeignKey("agent_tables.id"), index=True)
    data: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class AgentRecord(Base):
    """HMP `ratings`, `external_services` and `external_accounts`: the persona's own catalogues, one row per entry
    (`kind` says which). An account names the environment variable that holds its secret, never the secret."""

    __tablename__ = "agent_records"
    __table_args__ = (UniqueConstraint("kind", "name", name="uq_agent_records_kind_name"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(32))  # rating | external_service | external_account
    name: Mapped[str] = mapped_column(String(200))  # a rating's subject, a service's or an account's name
    data: Mapped[dict[str, Any]] = mapped_column(default=dict)
    status: Mapped[str] = mapped_column(String(16), default="active")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


# ---- the mesh: containers in and out, refusals, evaluations, blocklist, revoked keys, topics ----------
class MeshContainer(Base):
    """A signed container (reach/hmp/containers.py) this persona sent or accepted, kept whole (`body`), keyed by its
    id (a hash of its canonical body: one row per container, so one arriving twice is applied once). Out: queued →
    sent (the outbox of Isolated Mode). In: accepted; `applied` says what it became locally (a CogSync diary entry…);
    `rejected` is the owner's no (the memory it became is archived)."""

    __tablename__ = "mesh_containers"
    __table_args__ = (
        Index("ix_mesh_containers_dir_status", "direction", "status"),
        Index("ix_mesh_containers_ref", "ref"),
    )
    id: Mapped[str] = mapped_column(String(80), primary_key=True)
    direction: Mapped[str] = mapped_column(String(4))  # in | out
    type: Mapped[str] = mapped_column(String(24))
    sender: Mapped[str] = mapped_column(String(120), index=True)
    recipient: Mapped[str | None] = mapped_column(String(120))
    topic: Mapped[str | None] = mapped_column(String(120))
    ref: Mapped[str | None] = mapped_column(String(80))  # the case / claim / ask a container belongs to
    body: Mapped[dict[str, Any]] = mapped_column(default=dict)
    status: Mapped[str] = mapped_column(String(16))  # queued | sent | accepted | rejected
    trust: Mapped[float | None] = mapped_column(Float)  # the sender's trust when it arrived
    local_tier: Mapped[str | None] = mapped_column(String(32))
    local_id: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class MeshRefusal(Base):
    """A container refused, and why: forged, replay, expired, oversized, unknown_type, malformed, revoked, flood,
    blocked, distrusted (the counters of the Mesh page and `mesh.status`)."""

    __tablename__ = "mesh_refusals"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    sender: Mapped[str | None] = mapped_column(String(120), index=True)
    reason: Mapped[str] = mapped_column(String(24), index=True)
    container_id: Mapped[str | None] = mapped_column(String(80))
    detail: Mapped[str] = mapped_column(Text, default="")
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class MeshEvaluation(Base):
    """One evaluation −1…+1 of a peer (`subject`) by `evaluator` (a peer's signed `evaluation` container, this
    persona's own, or the door's verdict on a refused container: `about` says of what)."""

    __tablename__ = "mesh_evaluations"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    evaluator: Mapped[str] = mapped_column(String(120), index=True)
    subject: Mapped[str] = mapped_column(String(120), index=True)
    score: Mapped[float] = mapped_column(Float)
    about: Mapped[str | None] = mapped_column(String(80))  # a container id, or a claim's
    reason: Mapped[str] = mapped_column(String(200), default="")
    container_id: Mapped[str | None] = mapped_column(String(80))  # the signed evaluation, when it came as one
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class MeshBlock(Base):
    __tablename__ = "mesh_blocklist"
    did: Mapped[str] = mapped_column(String(120), primary_key=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class MeshRevocation(Base):
    """A key that must no longer be trusted (revoked, or retired by a rotation to `replaced_by`)."""

    __tablename__ = "mesh_revocations"
    did: Mapped[str] = mapped_column(String(120), primary_key=True)
    replaced_by: Mapped[str | None] = mapped_column(String(120))
    container_id: Mapped[str | None] = mapped_column(String(80))
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class MeshSubscription(Base):
    __tablename__ = "mesh_subscriptions"
    topic: Mapped[str] = mapped_column(String(120), primary_key=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


MESH_TABLES = (MeshContainer, MeshRefusal, MeshEvaluation, MeshBlock, MeshRevocation, MeshSubscription)


class SealedSecret(Base):
    """A persona's secret sealed with the deployment's key (memory/secrets.py: AES-256-GCM, the key from the
    environment, never stored): the database holds only the nonce and the ciphertext. Never copied to a child or
    into an archive (each persona has its own keys)."""

    __tablename__ = "sealed_secrets"
    name: Mapped[str] = mapped_column(String(120), primary_key=True)
    key_id: Mapped[str] = mapped_column(String(16))  # which deployment key sealed it (the first bytes of its hash)
    nonce: Mapped[bytes] = mapped_column(LargeBinary)
    sealed: Mapped[bytes] = mapped_column(LargeBinary)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


# ---- long-term memory: tools and links used often (HMP "часто используемые инструменты и связи") -----


class ToolUse(Base):
    """How often the persona used a tool (`mcp.call` server.tool, `search.web`) or a link of its semantic graph
    (`links.*`), kept apart from the diary: counted when such a command runs, shown by `tools.used`."""

    __tablename__ = "tool_uses"
    __table_args__ = (UniqueConstraint("kind", "name", name="uq_tool_uses_kind_name"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(16))  # tool | link
    name: Mapped[str] = mapped_column(String(300))
    uses: Mapped[int] = mapped_column(Integer, default=0)
    first_used_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_used_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


# ---- peers and A2A ------------------------------------------------------------------------------------------
class Peer(Base):
    """Another persona (or any A2A agent) this one knows: by name, its DID when known, where its A2A endpoint is and
    its peer-to-peer addresses. Added and removed with the owner's approval (`agents.*`), or at a child's birth."""

    __tablename__ = "peers"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    did: Mapped[str | None] = mapped_column(String(200), unique=True)
    name: Mapped[str] = mapped_column(String(120), unique=True)
    a2a_url: Mapped[str | None] = mapped_column(String(500))  # base URL; its card at /.well-known/agent-card.json
    p2p_addrs: Mapped[list[Any]] = mapped_column(default=list)  # multiaddrs (the mesh's)
    added_by: Mapped[str] = mapped_column(String(32), default="owner")  # owner | persona | spawn | bootstrap | met
    # on the mesh (its signed `have`) or over A2A (an agent written to by its URL): managers/peers.py `met`
    note: Mapped[str] = mapped_column(Text, default="")
    blocked: Mapped[bool] = mapped_column(Boolean, default=False)
    tags: Mapped[list[Any]] = mapped_column(
        default=list
    )  # the owner's: "friend" = F2F note replication (managers/notes.py)
    first_seen: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_seen: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # what the peer says it offers, in its own words (v28): its signed hello's topics and agent, or its A2A card's
    # name, description and skills — data from it, fenced wherever shown
    offers: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class A2AOutbox(Base):
    """A message to a peer over A2A, kept until it is delivered (a peer that is down is retried, not lost)."""

    __tablename__ = "a2a_outbox"
    __table_args__ = (Index("ix_a2a_outbox_pending", "status", "next_attempt_at"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    peer_name: Mapped[str] = mapped_column(String(120))
    url: Mapped[str] = mapped_column(String(500))  # the agent's base URL (its card's place)
    text: Mapped[str] = mapped_column(Text)
    note_id: Mapped[int | None] = mapped_column(Integer)  # the outgoing note it carries
    status: Mapped[str] = mapped_column(String(16), default="pending")  # pending | sent | failed
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text)
    reply: Mapped[str | None] = mapped_column(Text)  # what the agent answered, when it answered at once
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class A2AInbound(Base):
    """An A2A task another agent opened with this persona: the note its latest message became, and the persona's
    reply to it once written (its next message to that peer), which the waiting task returns. `caller` is who opened
    it, as its credential proved (`peer:<id>`, or `anonymous`): only that caller sees or continues the task."""

    __tablename__ = "a2a_inbound"
    __table_args__ = (Index("ix_a2a_inbound_open", "peer_name", "status"), Index("ix_a2a_inbound_caller", "caller"))
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_id: Mapped[str] = mapped_column(String(100), unique=True)
    message_id: Mapped[str | None] = mapped_column(String(200), index=True)  # a retried send is the same message
    peer_name: Mapped[str] = mapped_column(String(120))
    caller: Mapped[str] = mapped_column(String(140), default="")
    note_id: Mapped[int] = mapped_column(Integer)
    reply_note_id: Mapped[int | None] = mapped_column(Integer)
    # waiting (for the persona) | asked (the persona asked the caller: input-required) | answered | declined |
    # canceled (by the caller) | expired (nobody waits on it any more; its reply is kept for tasks/get)
    status: Mapped[str] = mapped_column(String(16), default="waiting")
    reply_kind: Mapped[str] = mapped_column(String(16), default="answer")  # answer | question | decline | plain
    reply_parts: Mapped[list[Any]] = mapped_column(default=list)  # the reply's attachments: data and files
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    answered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class A2ARefusal(Base):
    """What the A2A endpoint refused, counted by caller (`peer:<id>`, `anonymous`, `unauthenticated`) and reason
    (credential, rate, overloaded, too large, refused): one row each, so a flood is a count, not rows."""

    __tablename__ = "a2a_refusals"
    __table_args__ = (UniqueConstraint("caller", "reason", name="uq_a2a_refusals_caller_reason"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    caller: Mapped[str] = mapped_column(String(140))
    reason: Mapped[str] = mapped_column(String(40))
    count: Mapped[int] = mapped_column(Integer, default=0)
    bytes: Mapped[int] = mapped_column(Integer, default=0)  # what the refused messages would have stored
    detail: Mapped[str] = mapped_column(Text, default="")  # the latest one's reason, as the caller was told
    first_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class PeerCredential(Base):
    """A credential this persona issued to one of its peers: a bearer token that opens the A2A endpoint, and nothing
    else, as that peer. Only the token's SHA-256 is kept (the token is shown once, when issued); `hint` is a few of
    its characters to tell credentials apart. Revoked, it opens nothing; a removed peer's credentials are deleted."""

    __tablename__ = "peer_credentials"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    peer_id: Mapped[int] = mapped_column(Integer, index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    hint: Mapped[str] = mapped_column(String(24))
    issued_by: Mapped[str] = mapped_column(String(64), default="owner")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


# ---- people and channels ------------------------------------------------------------------------------


class Person(Base):
    """One of the persona's humans (HMP `users`): the owner (answers approvals), trusted people and guests."""

    __tablename__ = "people"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(120))
    role: Mapped[str] = mapped_column(String(16), default="guest")  # owner | trusted | guest
    preferred_channel: Mapped[str | None] = mapped_column(String(64))
    language: Mapped[str | None] = mapped_column(String(16))
    quiet_hours: Mapped[str | None] = mapped_column(String(16))  # "22:00-08:00" in the persona's zone
    about: Mapped[str] = mapped_column(Text, default="")
    added_by: Mapped[str] = mapped_column(String(64), default="operator")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class PeopleGroup(Base):
    """HMP `users_group`: a named group of the persona's humans ("family", "colleagues"), with a description."""

    __tablename__ = "people_groups"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(120), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class PeopleGroupMember(Base):
    """A person in a group (HMP keeps `users.groups` as a JSON list; a link table keeps it consistent)."""

    __tablename__ = "people_group_members"
    group_id: Mapped[int] = mapped_column(ForeignKey("people_groups.id", ondelete="CASCADE"), primary_key=True)
    person_id: Mapped[int] = mapped_column(ForeignKey("people.id", ondelete="CASCADE"), primary_key=True, index=True)


class PersonIdentity(Base):
    """Who a person is on one channel ("@ann:example.org" on `matrix`), and where they last wrote from."""

    __tablename__ = "person_identities"
    __table_args__ = (UniqueConstraint("channel", "address", name="uq_person_identity"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    person_id: Mapped[int] = mapped_column(ForeignKey("people.id"), index=True)
    channel: Mapped[str] = mapped_column(String(64))
    address: Mapped[str] = mapped_column(String(300))
    conversation: Mapped[str | None] = mapped_column(String(300))  # where they last wrote (a room, a chat)
    # the last conversation they alone (with the persona) read: where a message to them goes
    private_conversation: Mapped[str | None] = mapped_column(String(300))
    last_seen_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class ContactRequest(Base):
    """An unknown sender: held (nothing of it in memory) until the owner accepts or refuses."""

    __tablename__ = "contact_requests"
    __table_args__ = (UniqueConstraint("channel", "address", name="uq_contact_request"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    channel: Mapped[str] = mapped_column(String(64))
    address: Mapped[str] = mapped_column(String(300))
    sender_name: Mapped[str] = mapped_column(String(200), default="")
    conversation: Mapped[str | None] = mapped_column(String(300))
    status: Mapped[str] = mapped_column(String(16), default="pending")  # pending | accepted | refused
    # what the owner should know ("claims to be ann@example.org (Ann's address) but failed authentication: …")
    warning: Mapped[str] = mapped_column(Text, default="")
    messages: Mapped[int] = mapped_column(Integer, default=0)
    person_id: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    decided_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    decided_by: Mapped[str | None] = mapped_column(String(64))


class ChannelInbox(Base):
    """Every message a channel delivered, once per (channel, platform id): noted, held for a contact request,
    or dropped (rate limit, size cap) — a repeat of the same platform id is recognised here."""

    __tablename__ = "channel_inbox"
    __table_args__ = (UniqueConstraint("channel", "platform_id", name="uq_channel_inbox"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    channel: Mapped[str] = mapped_column(String(64))
    platform_id: Mapped[str] = mapped_column(String(300))
    sender: Mapped[str] = mapped_column(String(300))
    person_id: Mapped[int | None] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16))  # noted | held | dropped | quarantined (could not be read)
    reason: Mapped[str] = mapped_column(Text, default="")
    note_id: Mapped[int | None] = mapped_column(Integer)
    contact_request_id: Mapped[int | None] = mapped_column(Integer, index=True)
    held_text: Mapped[str | None] = mapped_column(Text)  # a held message's text, until the owner decides
    attachments: Mapped[list[Any]] = mapped_column(default=list)  # references: kind, name, mime, size, ref
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ChannelOutbox(Base):
    """A message to a person over a channel: queued → sending → sent | failed. The idempotency key is given before
    the first attempt and kept on every retry, so a kill between sending and recording neither loses nor doubles it."""

    __tablename__ = "channel_outbox"
    __table_args__ = (Index("ix_channel_outbox_state", "channel", "state", "id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    idempotency_key: Mapped[str] = mapped_column(String(120), unique=True)
    channel: Mapped[str] = mapped_column(String(64))
    person_id: Mapped[int | None] = mapped_column(Integer)
    recipient: Mapped[str] = mapped_column(String(300))
    conversation: Mapped[str | None] = mapped_column(String(300))
    reply_to: Mapped[str | None] = mapped_column(String(300))
    text: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(16), default="queued")  # queued | sending | sent | failed
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    platform_id: Mapped[str | None] = mapped_column(String(300))
    last_error: Mapped[str | None] = mapped_column(Text)
    note_id: Mapped[int | None] = mapped_column(Integer)
    not_before: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))  # held past quiet hours
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class ChannelCursor(Base):
    """Where a channel's next fetch starts (stored after the fetched messages are recorded), and how the channel
    is doing as its runner last saw it (shown on the Controls page, from any process)."""

    __tablename__ = "channel_cursors"
    channel: Mapped[str] = mapped_column(String(64), primary_key=True)
    cursor: Mapped[str | None] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(16), default="stopped")  # up | down | backing_off | stopped
    last_error: Mapped[str | None] = mapped_column(Text)
    retry_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
