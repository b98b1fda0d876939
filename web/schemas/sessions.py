from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Session(BaseModel):
    id: int
    thread_id: str
    playbook: str | None = None
    persona: str | None = None
    status: str = Field(description="running, stopped, killed, or imported (from another data dir's export).")
    first_tick: int = 0
    last_tick: int = 0
    started_at: str | None = None
    stopped_at: str | None = None
    revived_from: int | None = None
    goals: int = 0
    open_tasks: int = 0


class SessionDetail(Session):
    goal_state: dict[str, Any] = Field(default_factory=dict)
    last_thoughts: list[str] = Field(default_factory=list, description="What a revival is seeded with.")
    revived_as: list[str] = Field(default_factory=list, description="Threads revived from this session.")


class SessionList(BaseModel):
    items: list[Session]


class Revived(BaseModel):
    session_id: int = Field(description="The session revived (for an upload: the imported one).")
    thread_id: str = Field(description="The new thread, seeded with the session's last thoughts.")
    playbook: str
    command: str = Field(description="How to run the loop on it.")


class ExportedSession(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: int | None = None
    thread_id: str = Field(min_length=1, max_length=128)
    playbook: str | None = Field(None, max_length=200)
    persona: str | None = Field(None, max_length=200)
    status: str | None = None
    started_at: str | None = None
    stopped_at: str | None = None


class ExportedMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    tick: int | None = None
    kind: str = Field(max_length=32)
    role: str | None = Field(None, max_length=16)
    content: str = Field("", max_length=200_000)


class SessionExport(BaseModel):
    """What `run.py sessions export` (or GET /api/sessions/{id}/export) wrote."""

    model_config = ConfigDict(extra="allow")
    session: ExportedSession
    goal_state: dict[str, Any] = Field(default_factory=dict)
    messages: list[ExportedMessage] = Field(default_factory=list, max_length=100_000)
    notes: list[dict[str, Any]] = Field(default_factory=list, max_length=100_000)
