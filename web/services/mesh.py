"""The Mesh page and /api/peers: peers over managers/peers.py (adding one from the web is the owner's own act), and
what the mesh's managers know (reputation, CogSync, consensus, refusals) read through it."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from managers import Managers
from managers.errors import NotFound, Refused
from memory.models import Peer
from memory.provenance import note_author
from web.errors import NotFoundError, ServiceError
from web.schemas.mesh import (
    A2ARefusedOut,
    CaseOut,
    CredentialOut,
    DiscoveredOut,
    HeardOut,
    IssuedCredentialOut,
    LearnedOut,
    MeshView,
    OutboxOut,
    PeerIn,
    PeerOut,
    PeerTagsIn,
    RefusedOut,
    TrustPoint,
)
from web.services.events import event_dict


def _peer(peers: Any, row: Peer, *, history: bool = True) -> PeerOut:
    points = peers.trust_history(row.did) if history else []
    return PeerOut(
        name=row.name,
        did=row.did,
        a2a_url=row.a2a_url,
        p2p_addrs=list(row.p2p_addrs or []),
        added_by=row.added_by,
        note=row.note,
        blocked=row.blocked,
        tags=list(row.tags or []),
        first_seen=row.first_seen,
        last_seen=row.last_seen,
        trust=peers.trust(row.did),
        trust_history=[TrustPoint(at=at, trust=value) for at, value in points],
        credentials=[_credential(c) for c in peers.credentials(row.id)],
    )


def _aware(moment: datetime | None) -> datetime | None:
    """A moment as RFC 3339 wants it: SQLite gives back the UTC it was given without its zone."""
    return moment.replace(tzinfo=UTC) if moment is not None and moment.tzinfo is None else moment


def _credential(row: Any) -> CredentialOut:
    return CredentialOut(
        id=row.id,
        hint=row.hint + "…",
        issued_by=row.issued_by,
        created_at=_aware(row.created_at),
        last_used_at=_aware(row.last_used_at),
        revoked_at=_aware(row.revoked_at),
    )


def issue_credential(house: Managers, name: str, by: str) -> IssuedCredentialOut:
    """A new credential for the peer (the owner's act); its token is in this answer and nowhere else."""
    try:
        row, token = house.peers.issue_credential(name, by=by)
    except NotFound as exc:
        raise NotFoundError(str(exc), field="name") from None
    return IssuedCredentialOut(credential=_credential(row), token=token)


def revoke_credentials(house: Managers, name: str, credential_id: int | None = None) -> list[CredentialOut]:
    """Revoke one of the peer's credentials, or all of them; the ones revoked now."""
    try:
        return [_credential(c) for c in house.peers.revoke_credentials(name, credential_id)]
    except NotFound as exc:
        raise NotFoundError(str(exc), field="credential_id" if credential_id is not None else "name") from None


def set_outgoing_credential(house: Managers, settings: Any, name: str, token: str | None) -> None:
    """Keep (or, None, drop) the credential the peer issued to this persona: a secret (memory/secrets.py)."""
    try:
        house.peers.set_outgoing_token(name, token)
    except NotFound as exc:
        raise NotFoundError(str(exc), field="name") from None
    except Refused as exc:
        raise ServiceError(str(exc), field="token", status=422) from None


def list_peers(house: Managers) -> list[PeerOut]:
    peers = house.peers
    return [_peer(peers, row) for row in peers.list()]


def read_peer(house: Managers, name: str) -> PeerOut:
    peers = house.peers
    try:
        return _peer(peers, peers.get(name))
    except NotFound as exc:
        raise NotFoundError(str(exc), field="name") from None


def add_peer(house: Managers, body: PeerIn) -> PeerOut:
    peers = house.peers
    try:
        row = peers.add(body.name, a2a_url=body.a2a_url, did=body.did, note=body.note, added_by="owner")
    except Refused as exc:
        taken = any(word in str(exc) for word in ("already", "name of a person", "names my human", "anonymous A2A"))
        field = ("name" if "name" in str(exc) else "did") if taken else "a2a_url" if "address" in str(exc) else "name"
        raise ServiceError(str(exc), field=field, status=409 if taken else 422) from None
    return _peer(peers, row)


def tag_peer(house: Managers, name: str, body: PeerTagsIn) -> PeerOut:
    """The owner tags a peer (its own act: no approval is asked); `friend` makes it a friend of the distributed
    notes."""
    peers = house.peers
    try:
        return _peer(peers, peers.set_tags(name, body.tags))
    except NotFound as exc:
        raise NotFoundError(str(exc), field="name") from None
    except Refused as exc:
        raise ServiceError(str(exc), field="tags", status=422) from None


def remove_peer(house: Managers, name: str, settings: Any = None) -> None:
    """Forget a peer: its credentials are revoked, and (with the settings: where secrets are) the one it issued to
    this persona is dropped."""
    try:
        house.peers.remove(name)
    except NotFound as exc:
        raise NotFoundError(str(exc), field="name") from None


def view(house: Managers) -> MeshView:
    peers = house.peers
    seen = peers.mesh_view()
    return MeshView(
        peers=[_peer(peers, item["peer"]) for item in seen["peers"]],
        learned=[
            LearnedOut(
                container_id=c.id,
                sender=c.sender,
                tier=c.local_tier,
                local_id=c.local_id,
                trust=c.trust,
                at=c.created_at,
            )
            for c in seen["learned"]
        ],
        open_cases=[CaseOut(**asdict(t)) for t in seen["open_cases"]],
        refused=[
            RefusedOut(sender=r.sender, reason=r.reason, container_id=r.container_id, detail=r.detail, at=r.at)
            for r in seen["refused"]
        ],
        refused_counts=seen["refused_counts"],
        outbox=[
            OutboxOut(
                id=r.id,
                peer=r.peer_name,
                text=r.text,
                status=r.status,
                attempts=r.attempts,
                last_error=r.last_error,
                reply=r.reply,
                created_at=r.created_at,
                sent_at=r.sent_at,
            )
            for r in seen["outbox"]
        ],
        heard=[
            HeardOut(note_id=n.id, peer=note_author(n), text=n.text, read=n.read, at=n.created_at)
            for n in seen["heard"]
        ],
        a2a_refused=[
            A2ARefusedOut(**{**r, "first_at": _aware(r["first_at"]), "last_at": _aware(r["last_at"])})
            for r in seen["a2a_refused"]
        ],
        discovered=[
            DiscoveredOut(
                did=d["did"],
                transport=str(d["transport"]),
                first_seen=str(d["first_seen"]),
                last_seen=str(d["last_seen"]),
                trust=peers.trust(d["did"]),
                suggested_name=d["name"],
            )
            for d in peers.discovered()
        ],
    )


def recent_events(house: Managers, limit: int = 30) -> list[dict[str, Any]]:
    """What the mesh door journaled last (kind `mesh`: a peer met, a container sent, received and verified, or
    refused), newest first — the Mesh page's live list before its stream (web/pages/live.py) adds to it."""
    return [event_dict(row) for row in house.journal.newest_events(limit, ["mesh"])]


def add_discovered(house: Managers, did: str, name: str) -> PeerOut:
    """The owner adds a peer seen on the mesh: the same path as adding one by hand (PeerManager.add, as agents.add
    does once approved), by its proven DID."""
    return add_peer(house, PeerIn(name=name, did=did))
