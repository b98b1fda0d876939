"""The Mesh: peers (the personas and A2A agents this one knows), trust over time, what arrived from whom, consensus
cases and refused containers (from the mesh's managers, when they are part of this build), the A2A outbox."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, Field, StringConstraints

from web.schemas.requests import REQUEST_BODY

PeerName = Annotated[str, StringConstraints(strip_whitespace=True, pattern=r"^[A-Za-z0-9_.-]{1,120}$")]


class PeerIn(BaseModel):
    """The owner adds a peer (its A2A base URL: its card is at <url>/.well-known/agent-card.json)."""

    model_config = REQUEST_BODY
    name: PeerName
    a2a_url: Annotated[str, StringConstraints(strip_whitespace=True, pattern=r"^https?://\S{1,490}$")] | None = None
    did: Annotated[str, StringConstraints(strip_whitespace=True, pattern=r"^did:[a-z0-9]+:[A-Za-z0-9._:%-]{1,180}$")] | None = None
    note: Annotated[str, StringConstraints(max_length=2000)] = ""


class TrustPoint(BaseModel):
    at: datetime
    trust: float


class PeerOut(BaseModel):
    name: str
    did: str | None
    a2a_url: str | None
    p2p_addrs: list[str]
    added_by: str
    note: str
    blocked: bool
    first_seen: datetime | None
    last_seen: datetime | None
    trust: float | None = Field(description="The mesh's trust (−1…+1); null: nothing evaluated yet.")
    trust_history: list[TrustPoint] = Field(default_factory=list)


class OutboxOut(BaseModel):
    id: int
    peer: str
    text: str
    status: str = Field(description="pending (retried while the peer is down), sent or failed (given up).")
    attempts: int
    last_error: str | None
    reply: str | None
    created_at: datetime
    sent_at: datetime | None


class HeardOut(BaseModel):
    note_id: int
    peer: str | None
    text: str
    read: bool
    at: datetime


class MeshView(BaseModel):
    peers: list[PeerOut]
    learned: list[dict[str, Any]] | None = Field(description="What arrived by CogSync, from whom; null: the mesh's "
                                                 "managers are not in this build.")
    open_cases: list[dict[str, Any]] | None
    refused: list[dict[str, Any]] | None
    refused_counts: dict[str, int] | None
    outbox: list[OutboxOut]
    heard: list[HeardOut]
