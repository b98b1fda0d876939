"""The Mesh: peers (the personas and A2A agents this one knows), trust over time, what arrived from whom, consensus
cases and refused containers (managers/mesh.py, managers/reputation.py), the A2A outbox."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field, StringConstraints

from web.schemas.requests import REQUEST_BODY, VISIBLE

# No strip_whitespace beside a pattern: str.strip() also eats U+0085 and others that the published pattern refuses,
# so a padded value would be accepted where the schema says it must not be (the pages strip their form fields).
PeerName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,120}$")]
PeerTag = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,60}$")]


class PeerIn(BaseModel):
    """The owner adds a peer (its A2A base URL: its card is at <url>/.well-known/agent-card.json)."""

    model_config = REQUEST_BODY
    name: PeerName
    a2a_url: Annotated[str, StringConstraints(pattern=rf"^https?://{VISIBLE}{{1,490}}$")] | None = None
    did: Annotated[str, StringConstraints(pattern=r"^did:[a-z0-9]+:[A-Za-z0-9._:%-]{1,180}$")] | None = None
    note: Annotated[str, StringConstraints(max_length=2000)] = ""


class PeerTagsIn(BaseModel):
    """The owner's tags on a peer, replacing the old ones; `friend` makes it a friend of the distributed notes (its
    friends' public notes arrive and are passed on; the persona's shared notes go to it)."""

    model_config = REQUEST_BODY
    tags: list[PeerTag] = Field(max_length=20)


class CredentialOut(BaseModel):
    """A credential issued to a peer: it opens the A2A endpoint as that peer, nothing else. Only a hint of its token
    is shown (the token itself was shown once, when it was issued; only its hash is kept)."""

    id: int
    hint: str = Field(description="The token's first characters, to tell credentials apart.")
    issued_by: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class IssuedCredentialOut(BaseModel):
    """A new credential and its token — the only time the token is shown: give it to the peer's owner."""

    credential: CredentialOut
    token: str = Field(description="`Authorization: Bearer <token>` on the peer's A2A requests; shown this once.")


class OutgoingCredentialIn(BaseModel):
    """The credential the peer issued to this persona, sent with its messages to that peer (kept as a secret)."""

    model_config = REQUEST_BODY
    token: Annotated[str, StringConstraints(min_length=1, max_length=4096, pattern=rf"^{VISIBLE}+$")]


class A2ARefusedOut(BaseModel):
    """What the A2A endpoint refused, by caller (a peer's name, `anonymous`, `unauthenticated`) and reason."""

    caller: str
    reason: str = Field(description="credential, rate, overloaded, too large or refused")
    count: int
    bytes: int = Field(description="What the refused messages would have stored.")
    detail: str
    first_at: datetime
    last_at: datetime


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
    tags: list[str] = Field(default_factory=list, description="The owner's tags; `friend`: the distributed notes.")
    first_seen: datetime | None
    last_seen: datetime | None
    trust: float | None = Field(description="The mesh's trust (−1…+1); null: nothing evaluated yet.")
    trust_history: list[TrustPoint] = Field(default_factory=list)
    credentials: list[CredentialOut] = Field(
        default_factory=list,
        description=("The credentials issued to this peer (it calls with one), revoked ones included."),
    )


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


class LearnedOut(BaseModel):
    """A peer's container that CogSync turned into memory here (data with its source DID and the sender's trust)."""

    container_id: str
    sender: str
    tier: str | None
    local_id: int | None
    trust: float | None
    at: datetime


class CaseOut(BaseModel):
    """An open consensus case: an ethics case (solutions and their trust-weighted votes) or a shared claim."""

    case_id: str
    kind: str
    question: str
    solutions: dict[str, str]
    weights: dict[str, float]
    votes: int
    result: str | None
    score: float | None
    unweighed: int = Field(0, description="Votes of peers not trusted here yet: counted, weighing nothing.")


class RefusedOut(BaseModel):
    sender: str | None
    reason: str
    container_id: str | None
    detail: str
    at: datetime


class DiscoveredOut(BaseModel):
    """A peer whose DID a signed `have` proved on the mesh, not added: the owner may add it (as a peer, by its DID)."""

    did: str
    transport: str = Field(description="The transport (libp2p) peer id it was seen at.")
    first_seen: str
    last_seen: str
    trust: float | None = Field(description="Its trust here; None when nobody evaluated it.")
    suggested_name: str


class MeshView(BaseModel):
    peers: list[PeerOut]
    learned: list[LearnedOut] = Field(description="What arrived by CogSync, from whom, newest first.")
    open_cases: list[CaseOut]
    refused: list[RefusedOut]
    refused_counts: dict[str, int] = Field(description="Refused containers by reason: forged, replay, expired, …")
    outbox: list[OutboxOut]
    heard: list[HeardOut]
    a2a_refused: list[A2ARefusedOut] = Field(
        default_factory=list,
        description=("What the A2A endpoint refused (bad or no credential, past a rate or a cap, too large), counted."),
    )
    discovered: list[DiscoveredOut] = Field(
        default_factory=list,
        description=(
            "Seen on the mesh, not added: peers whose DID a signed `have` proved; adding one is the owner's act."
        ),
    )
