"""The memory resource: its tiers, their rows, a human's edits (one model per editable tier), the history of every
change, hybrid search across tiers and knowledge-base uploads. A row (`MemoryRecord`), a field's description
(`FieldInfo`) and the edit models are the tiers' own (memory/tiers.py), shared with every door."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from memory.tiers import (
    BlockEdit,
    ConceptEdit,
    DiaryEdit,
    EntityEdit,
    EpisodeEdit,
    FactEdit,
    FieldInfo,
    GoalEdit,
    InsightEdit,
    LinkEdit,
    LLMMemoryEdit,
    MemoryRecord,
    Moment,
    QuestionEdit,
    TaskEdit,
)


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
    replaced: list[str] = Field(
        default_factory=list, description="Knowledge updates: the texts of the older memories this one updated."
    )
    superseded_by: str | None = Field(
        None,
        description="Knowledge updates: the newer memory that updated this one "
        "(status `superseded`: kept, ranked lower, restorable).",
    )
    recorded_at: datetime | None = Field(None, description="Record time: when the memory was stored.")
    happened_at: datetime | None = Field(
        None,
        description="Event time: when what it tells happened, when its text or "
        "source says (the start of that day, week, month or year).",
    )
    happened_as: str | None = Field(
        None, description='How the event time was said ("last Tuesday") and how precise it is (day, week, month, year).'
    )


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


__all__ = [
    "BlockEdit",
    "Change",
    "ConceptEdit",
    "DiaryEdit",
    "Done",
    "EntityEdit",
    "EpisodeEdit",
    "FactEdit",
    "FieldInfo",
    "GoalEdit",
    "History",
    "InsightEdit",
    "KBUploaded",
    "LLMMemoryEdit",
    "LinkEdit",
    "MemoryList",
    "MemoryRecord",
    "QuestionEdit",
    "SearchHit",
    "SearchResults",
    "TaskEdit",
    "TierInfo",
    "Tiers",
]
