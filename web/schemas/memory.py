"""The memory resource: its tiers, their rows, a human's edits (one model per editable tier), the history of every
change, hybrid search across tiers and knowledge-base uploads."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

Tags = list[str]


def _utc(value: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; every time stored is UTC."""
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


Moment = Annotated[datetime, AfterValidator(_utc)]


class _Edit(BaseModel):
    """Only the fields given change; an empty body changes nothing."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class BlockEdit(_Edit):
    """Core memory or the notepad: the whole text (what it replaces is kept as a version)."""

    content: str = Field(max_length=20000, description="The block's new text (within the block's own limit).")


class LLMMemoryEdit(_Edit):
    title: str | None = Field(None, max_length=300)
    content: str | None = Field(None, min_length=1, max_length=20000)
    tags: Tags | None = Field(None, max_length=32)


class DiaryEdit(_Edit):
    text: str | None = Field(None, min_length=1, max_length=20000)
    tags: Tags | None = Field(None, max_length=32)
    priority: int | None = Field(None, ge=0, le=10)
    pinned: bool | None = None


class ConceptEdit(_Edit):
    name: str | None = Field(None, min_length=1, max_length=200)
    description: str | None = Field(None, max_length=20000)
    tags: Tags | None = Field(None, max_length=32)
    weight: float | None = Field(None, ge=0, le=100)
    pinned: bool | None = None


class LinkEdit(_Edit):
    relation: str | None = Field(None, min_length=1, max_length=100)
    weight: float | None = Field(None, ge=0, le=100)
    tags: Tags | None = Field(None, max_length=32)


class GoalEdit(_Edit):
    title: str | None = Field(None, min_length=1, max_length=300)
    description: str | None = Field(None, max_length=20000)
    horizon: Literal["short", "long"] | None = None
    status: Literal["active", "paused", "completed", "failed"] | None = None
    priority: int | None = Field(None, ge=0, le=10)
    tags: Tags | None = Field(None, max_length=32)
    reason: str | None = Field(None, max_length=2000)


class TaskEdit(_Edit):
    title: str | None = Field(None, min_length=1, max_length=300)
    description: str | None = Field(None, max_length=20000)
    status: Literal["open", "in_progress", "done", "failed", "cancelled", "frozen"] | None = None
    priority: int | None = Field(None, ge=0, le=10)
    pinned: bool | None = None
    tags: Tags | None = Field(None, max_length=32)


class EpisodeEdit(_Edit):
    summary: str | None = Field(None, min_length=1, max_length=20000)
    emotional_tone: str | None = Field(None, max_length=32)
    key_events: list[str] | None = Field(None, max_length=50)


class EntityEdit(_Edit):
    name: str | None = Field(None, min_length=1, max_length=200)
    kind: str | None = Field(None, min_length=1, max_length=32)
    description: str | None = Field(None, max_length=20000)
    facts: list[str] | None = Field(None, max_length=200)
    aliases: list[str] | None = Field(None, max_length=50)


class InsightEdit(_Edit):
    insight: str | None = Field(None, min_length=1, max_length=20000)
    strategy: str | None = Field(None, max_length=20000)
    log_entry: str | None = Field(None, max_length=20000)
    trigger_topic: str | None = Field(None, max_length=2000)


class FactEdit(_Edit):
    claim: str | None = Field(None, min_length=1, max_length=20000)
    context: str | None = Field(None, max_length=20000)
    confidence: float | None = Field(None, ge=0, le=1)
    priority: int | None = Field(None, ge=0, le=10)
    status: Literal["verified", "rejected"] | None = Field(
        None, description="Resolve the fact (its fact-check task closes).")
    resolution: str | None = Field(None, max_length=2000)


class QuestionEdit(_Edit):
    topic: str | None = Field(None, min_length=1, max_length=2000)
    context: str | None = Field(None, max_length=20000)
    priority: float | None = Field(None, ge=0, le=1)
    resolution: str | None = Field(None, min_length=1, max_length=1000, description="Resolve the question with this.")


class FieldInfo(BaseModel):
    """How a page edits one field of a tier."""

    name: str
    label: str
    kind: Literal["text", "textarea", "int", "float", "bool", "list", "lines", "choice"]
    choices: list[str] = Field(default_factory=list)
    optional: bool = Field(False, description="Left out of the edit when blank (a resolution, say).")


class TierInfo(BaseModel):
    name: str
    label: str
    count: int = Field(description="Rows of the tier, archived ones included (versions, for core and notepad).")
    searchable: bool = Field(description="In the hybrid retrieval index (search finds it).")
    archivable: bool
    editable: bool
    deletable: bool
    fields: list[FieldInfo] = Field(default_factory=list, description="What an edit may change.")


class Tiers(BaseModel):
    tiers: list[TierInfo]


class MemoryRecord(BaseModel):
    tier: str
    ref: str
    title: str = ""
    text: str = ""
    status: Literal["active", "archived"] = "active"
    at: Moment | None = Field(None, description="When it was written or last changed.")
    fields: dict[str, Any] = Field(default_factory=dict, description="The editable fields' current values.")
    details: dict[str, Any] = Field(default_factory=dict, description="What else is worth showing.")
    actions: list[Literal["edit", "archive", "restore", "delete", "history"]] = Field(
        default_factory=list, description="What may be done to it now.")


class MemoryList(BaseModel):
    tier: str
    archived: bool = Field(description="True: the archived rows (for core and notepad: the replaced versions).")
    q: str | None = None
    items: list[MemoryRecord]


class Change(BaseModel):
    id: int
    at: Moment
    tier: str
    ref: str
    action: Literal["create", "update", "archive", "restore", "delete"]
    actor: str
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None


class History(BaseModel):
    tier: str | None = None
    ref: str | None = None
    changes: list[Change]


class Done(BaseModel):
    tier: str
    ref: str
    changed: bool = Field(description="False when it already was so (archiving an archived row).")
    record: MemoryRecord | None = Field(None, description="The row as it is now (none after a delete).")


class SearchHit(BaseModel):
    tier: str
    ref: str
    title: str
    text: str
    score: float
    status: str
    browsable: bool = Field(description="A row the memory page lists (a conversation turn is not).")


class SearchResults(BaseModel):
    q: str
    hits: list[SearchHit]


class KBUploaded(BaseModel):
    doc_id: int | None
    title: str
    chunks: int
    chars: int = 0
    skipped: str | None = Field(None, description="Why nothing was added (the same text is there already).")
    indexed: int = Field(0, description="Items the retrieval index took in.")
