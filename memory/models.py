"""SQLAlchemy 2 models: every table the tick needs.

Column names follow HMP's `db_structure.sql` where HMP has one (notes, process_log, llm_memory,
llm_registry, config, llm_recent_responses → `messages`). Only portable types are used
(JSON, not JSONB; no SQLite-only SQL) so the same models run on SQLite and PostgreSQL.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Optional

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class SchemaVersion(Base):
    __tablename__ = "schema_version"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer)
    applied_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Thread(Base):
    """A conversation/thought thread: the persona's main thread or a (Stelis) child."""

    __tablename__ = "threads"
    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    parent_id: Mapped[Optional[str]] = mapped_column(ForeignKey("threads.id"), index=True)
    label: Mapped[str] = mapped_column(String(200), default="")
    playbook: Mapped[str] = mapped_column(String(200), default="")
    persona: Mapped[str] = mapped_column(String(200), default="")
    depth: Mapped[int] = mapped_column(Integer, default=0)
    window_ratio: Mapped[float] = mapped_column(Float, default=1.0)
    status: Mapped[str] = mapped_column(String(20), default="running")  # running|completed|aborted
    tick: Mapped[int] = mapped_column(Integer, default=0)
    chronicle_prompt: Mapped[Optional[str]] = mapped_column(Text)
    chronicle: Mapped[Optional[str]] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    completed_at: Mapped[Optional[datetime]] = mapped_column(DateTime(timezone=True))
    # v2: Stelis bookkeeping
    origin: Mapped[str] = mapped_column(String(20), default="root")  # root | playbook | command
    owner: Mapped[Optional[str]] = mapped_column(String(200))  # host:pid:start of the process running it
    error: Mapped[Optional[str]] = mapped_column(Text)  # why it was aborted


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
    dedup_key: Mapped[Optional[str]] = mapped_column(String(200), unique=True)
    llm_id: Mapped[Optional[str]] = mapped_column(String(200))
    reflection: Mapped[Optional[str]] = mapped_column(Text)
    novelty_score: Mapped[Optional[float]] = mapped_column(Float)
    new_ideas: Mapped[list[Any]] = mapped_column(default=list)
    refined_ideas: Mapped[list[Any]] = mapped_column(default=list)
    discarded_ideas: Mapped[list[Any]] = mapped_column(default=list)
    tags: Mapped[list[Any]] = mapped_column(default=list)
    emotions: Mapped[list[Any]] = mapped_column(default=list)
    rating: Mapped[Optional[float]] = mapped_column(Float)
    distribution: Mapped[dict[str, Any]] = mapped_column(default=dict)
    validators: Mapped[list[Any]] = mapped_column(default=list)
    auto_pass: Mapped[bool] = mapped_column(Boolean, default=False)
    self_validation: Mapped[bool] = mapped_column(Boolean, default=False)
    confidence: Mapped[Optional[float]] = mapped_column(Float)
    unverified_facts_json: Mapped[list[Any]] = mapped_column(default=list)
    stagnation_flag: Mapped[bool] = mapped_column(Boolean, default=False)
    stagnation_reason: Mapped[Optional[str]] = mapped_column(Text)
    triggered_actions: Mapped[list[Any]] = mapped_column(default=list)
    meta: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Note(Base):
    """HMP `notes`: messages between the human, the persona, tasks and the system."""

    __tablename__ = "notes"
    __table_args__ = (Index("ix_notes_unread", "read", "source", "id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    text: Mapped[str] = mapped_column(Text)
    tags: Mapped[list[Any]] = mapped_column(default=list)
    user_did: Mapped[str] = mapped_column(String(200), default="ALL")
    source: Mapped[str] = mapped_column(String(32), default="user")  # user|cli|llm|llm:task|system
    links: Mapped[str] = mapped_column(Text, default="")
    read: Mapped[bool] = mapped_column(Boolean, default=False)
    hidden: Mapped[bool] = mapped_column(Boolean, default=False)
    priority: Mapped[int] = mapped_column(Integer, default=0)
    task_id: Mapped[Optional[int]] = mapped_column(Integer)
    thread_id: Mapped[Optional[str]] = mapped_column(String(128), index=True)
    llm_id: Mapped[Optional[str]] = mapped_column(String(200))
    read_at: Mapped[Optional[datetime]] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


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
    thread_id: Mapped[Optional[str]] = mapped_column(String(128))
    task_id: Mapped[Optional[int]] = mapped_column(Integer)
    llm_id: Mapped[Optional[str]] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Tick(Base):
    """HMP `agent_log`: one row per tick of a thread."""

    __tablename__ = "ticks"
    __table_args__ = (UniqueConstraint("thread_id", "tick", name="uq_ticks_thread_tick"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    thread_id: Mapped[str] = mapped_column(ForeignKey("threads.id"))
    tick: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(20), default="running")  # running|ok|error
    mode: Mapped[str] = mapped_column(String(20), default="chat")
    llm_calls: Mapped[int] = mapped_column(Integer, default=0)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    llm_ms: Mapped[float] = mapped_column(Float, default=0.0)
    summary: Mapped[dict[str, Any]] = mapped_column(default=dict)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[Optional[datetime]] = mapped_column(DateTime(timezone=True))


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
    thread_id: Mapped[Optional[str]] = mapped_column(String(128))
    tick: Mapped[Optional[int]] = mapped_column(Integer)
    purpose: Mapped[str] = mapped_column(String(40), default="think")
    llm_id: Mapped[str] = mapped_column(String(200))
    provider: Mapped[str] = mapped_column(String(32))
    model: Mapped[str] = mapped_column(String(200))
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    latency_ms: Mapped[float] = mapped_column(Float, default=0.0)
    ok: Mapped[bool] = mapped_column(Boolean, default=True)
    error: Mapped[Optional[str]] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class LLMMemory(Base):
    """HMP `llm_memory`: the model's own notepad of ideas, hypotheses and plans."""

    __tablename__ = "llm_memory"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    title: Mapped[str] = mapped_column(String(300), default="")
    content: Mapped[str] = mapped_column(Text)
    tags: Mapped[list[Any]] = mapped_column(default=list)
    thread_id: Mapped[Optional[str]] = mapped_column(String(128))
    llm_id: Mapped[Optional[str]] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
