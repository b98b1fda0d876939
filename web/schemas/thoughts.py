"""Thoughts: one card per tick (the thought, its commands and their fate, the reflexes' verdicts, tokens, time, the
model and its failovers, errors) and the tree of Stelis threads."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class CommandOutcome(BaseModel):
    cmd_id: str
    type: str
    args: dict[str, Any] = Field(default_factory=dict)
    status: str = Field(
        description="executed, failed, or why it did not run: unvalidated, blocked, pending, "
        "denied, unknown, invalid, over_limit…"
    )
    result: str = Field("", description="Its output, or the error / the reason it did not run.")
    ran: bool = Field(description="The command's effect took place.")


class FailedCall(BaseModel):
    llm_id: str
    purpose: str
    error: str | None = None
    at: datetime | None = None


class EmotionRating(BaseModel):
    emotion: str
    strength: int = Field(ge=1, le=5)
    reason: str = ""


class ReflexVerdicts(BaseModel):
    emotions: list[EmotionRating] = Field(default_factory=list)
    novelty_score: float | None = Field(None, description="0 (a repeat) … 100 (all new).")
    stagnation_flag: bool = False
    stagnation_reason: str | None = None
    streak: int | None = Field(None, description="Stagnant outputs in a row, this one included.")
    mechanisms: list[Any] = Field(default_factory=list, description="Anti-stagnation mechanisms applied.")
    rating: float | None = Field(None, description="The validators' rating.")
    auto_pass: bool | None = None
    confidence: float | None = None


class TickTokens(BaseModel):
    prompt: int = 0
    completion: int = 0
    llm_calls: int = 0
    llm_ms: float = 0.0


class TickCard(BaseModel):
    id: int = Field(description="The tick's row id (page with `before`).")
    thread: str
    tick: int
    status: str = Field(description="running, ok, degraded (no model answered), failed (quarantined).")
    mode: str
    started_at: datetime
    finished_at: datetime | None = None
    duration_s: float | None = None
    llm_id: str | None = Field(None, description="The model that answered.")
    thought: str | None = Field(None, description="The response text, as stored.")
    thought_kind: str | None = None
    commands: list[CommandOutcome] = Field(default_factory=list)
    parse_errors: list[str] = Field(default_factory=list, description="What the parser could not read or refused.")
    failovers: list[FailedCall] = Field(default_factory=list, description="Model calls that failed in this tick.")
    reflexes: ReflexVerdicts = Field(default_factory=ReflexVerdicts)
    tokens: TickTokens = Field(default_factory=TickTokens)
    dropped: list[str] = Field(default_factory=list, description="What the prompt's budget left out.")
    error: str | None = None
    failed_step: str | None = None
    quarantined: str | None = Field(None, description="A failed tick's answer, set aside (never reused).")
    attempts: int = 1


class TickPage(BaseModel):
    ticks: list[TickCard] = Field(description="Newest first.")
    next_before: int | None = Field(None, description="Pass as `before` for the older ones (None: no more).")


class ThreadNode(BaseModel):
    id: str
    parent_id: str | None = None
    label: str = ""
    status: str
    origin: str
    playbook: str = ""
    depth: int
    tick: int
    window_ratio: float = Field(description="Its share of its parent's window.")
    effective_ratio: float = Field(description="Π window_ratio from the root: its share of the model's window.")
    window_tokens: int | None = Field(None, description="Its window at its last tick.")
    budget_tokens: int | None = Field(None, description="Its prompt budget at its last tick.")
    messages: int = 0
    chronicle: str | None = None
    error: str | None = None
    created_at: datetime | None = None
    completed_at: datetime | None = None
    children: list[ThreadNode] = Field(default_factory=list)


class ThreadTree(BaseModel):
    roots: list[ThreadNode]
    count: int
