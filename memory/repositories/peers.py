"""Peers (the personas and A2A agents this one knows), the A2A outbox (messages waiting for delivery, retried) and
the A2A tasks waiting for the persona's reply. All SQL of the mesh's A2A side lives here."""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import String, cast, func, or_, select

from memory.models import A2AInbound, A2AOutbox, A2ARefusal, Note, Peer, PeerCredential
from memory.note_kinds import Door
from memory.repositories.base import Repo

OPEN_TASK_STATES = ("waiting", "expired")  # a task whose message the persona has not answered yet
MET = "met"  # `added_by` of a peer nobody added: met on the mesh (its signed `have`) or over A2A (managers/peers.py)


def met_name(key: str, taken: Iterable[str] = ()) -> str:
    """A name for a peer known only by its DID (`peer-` and the DID's last 8 characters) or its A2A address
    (`agent-` and its host and port), with a number when that name is taken."""
    if key.startswith("did:"):
        tail = "".join(ch for ch in key.rsplit(":", 1)[-1] if ch.isalnum())[-8:]
        base = f"peer-{tail or 'unknown'}"
    else:
        host = key.split("://", 1)[-1].split("/", 1)[0]
        base = "agent-" + ("".join(ch if ch.isalnum() else "-" for ch in host).strip("-")[:60] or "unknown")
    taken = set(taken)
    name, number = base, 2
    while name in taken:
        name, number = f"{base}-{number}", number + 1
    return name


class PeerRepo(Repo):
    def list(self, *, include_blocked: bool = True) -> builtins.list[Peer]:
        q = select(Peer).order_by(Peer.name)
        if not include_blocked:
            q = q.where(Peer.blocked.is_(False))
        return builtins.list(self.session.scalars(q).all())

    def find(self, key: str | int) -> Peer | None:
        """By id, name or DID."""
        if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
            row = self.session.get(Peer, int(key))
            if row is not None:
                return row
        text = str(key)
        return self.session.scalars(select(Peer).where(or_(Peer.name == text, Peer.did == text))).first()

    def names(self) -> set[str]:
        return set(self.session.scalars(select(Peer.name)).all())

    def met(self) -> builtins.list[Peer]:
        """The peers nobody added (met on the mesh or over A2A), the longest known first."""
        return builtins.list(self.session.scalars(select(Peer).where(Peer.added_by == MET).order_by(Peer.id)).all())

    def by_url(self, url: str) -> Peer | None:
        return self.session.scalars(select(Peer).where(Peer.a2a_url == url)).first()

    def add(
        self,
        name: str,
        *,
        did: str | None,
        a2a_url: str | None,
        p2p_addrs: builtins.list[str],
        added_by: str,
        note: str,
        now: datetime,
    ) -> Peer:
        row = Peer(
            name=name,
            did=did,
            a2a_url=a2a_url,
            p2p_addrs=builtins.list(p2p_addrs),
            added_by=added_by,
            note=note,
            created_at=now,
        )
        self.session.add(row)
        self.session.flush()
        return row

    def delete(self, row: Peer) -> None:
        self.session.delete(row)
        self.session.flush()

    def flush(self) -> None:
        self.session.flush()

    # ---- the outbox ----
    def enqueue(self, *, peer_name: str, url: str, text: str, note_id: int | None, now: datetime) -> A2AOutbox:
        row = A2AOutbox(peer_name=peer_name, url=url, text=text, note_id=note_id, next_attempt_at=now, created_at=now)
        self.session.add(row)
        self.session.flush()
        return row

    def due(self, now: datetime, limit: int = 20) -> builtins.list[A2AOutbox]:
        q = (
            select(A2AOutbox)
            .where(A2AOutbox.status == "pending", A2AOutbox.next_attempt_at <= now)
            .order_by(A2AOutbox.id)
            .limit(limit)
        )
        return builtins.list(self.session.scalars(q).all())

    def outbox(self, *, status: str | None = None, limit: int = 50) -> builtins.list[A2AOutbox]:
        q = select(A2AOutbox).order_by(A2AOutbox.id.desc()).limit(limit)
        if status:
            q = q.where(A2AOutbox.status == status)
        return builtins.list(self.session.scalars(q).all())

    def outbox_row(self, row_id: int) -> A2AOutbox | None:
        return self.session.get(A2AOutbox, row_id)

    # ---- inbound A2A tasks ----
    def open_inbound(
        self, *, task_id: str, message_id: str | None, peer_name: str, caller: str, note_id: int, now: datetime
    ) -> A2AInbound:
        row = A2AInbound(
            task_id=task_id,
            message_id=message_id,
            peer_name=peer_name,
            caller=caller,
            note_id=note_id,
            created_at=now,
            reply_parts=[],
        )
        self.session.add(row)
        self.session.flush()
        return row

    def waiting_inbound(self, peer_name: str) -> A2AInbound | None:
        """The oldest A2A task from this peer still waiting for a reply."""
        q = (
            select(A2AInbound)
            .where(A2AInbound.peer_name == peer_name, A2AInbound.status == "waiting")
            .order_by(A2AInbound.id)
            .limit(1)
        )
        return self.session.scalars(q).first()

    def inbound_of_note(self, note_id: int) -> A2AInbound | None:
        """The A2A task whose latest message is this note."""
        return self.session.scalars(select(A2AInbound).where(A2AInbound.note_id == note_id).limit(1)).first()

    def open_count(self, since: datetime, caller: str | None = None) -> int:
        """A2A tasks since `since` whose message the persona has not answered yet (of one caller, or of all)."""
        q = select(func.count(A2AInbound.id)).where(
            A2AInbound.status.in_(OPEN_TASK_STATES), A2AInbound.reply_note_id.is_(None), A2AInbound.created_at >= since
        )
        if caller is not None:
            q = q.where(A2AInbound.caller == caller)
        return int(self.session.scalar(q) or 0)

    # ---- credentials a peer presents ----
    def add_credential(
        self, *, peer_id: int, token_hash: str, hint: str, issued_by: str, now: datetime
    ) -> PeerCredential:
        row = PeerCredential(peer_id=peer_id, token_hash=token_hash, hint=hint, issued_by=issued_by, created_at=now)
        self.session.add(row)
        self.session.flush()
        return row

    def delete_credentials(self, peer_id: int) -> None:
        for row in self.credentials(peer_id):
            self.session.delete(row)
        self.session.flush()

    def credential_by_hash(self, token_hash: str) -> PeerCredential | None:
        return self.session.scalars(select(PeerCredential).where(PeerCredential.token_hash == token_hash)).first()

    def credentials(self, peer_id: int | None = None) -> builtins.list[PeerCredential]:
        q = select(PeerCredential).order_by(PeerCredential.id)
        if peer_id is not None:
            q = q.where(PeerCredential.peer_id == peer_id)
        return builtins.list(self.session.scalars(q).all())

    def unanswered_expired(self, peer_name: str) -> A2AInbound | None:
        """The oldest A2A task from this peer that nobody waits on any more and has no reply yet."""
        q = (
            select(A2AInbound)
            .where(
                A2AInbound.peer_name == peer_name, A2AInbound.status == "expired", A2AInbound.reply_note_id.is_(None)
            )
            .order_by(A2AInbound.id)
            .limit(1)
        )
        return self.session.scalars(q).first()

    def inbound_by_message(self, peer_name: str, message_id: str) -> A2AInbound | None:
        q = select(A2AInbound).where(A2AInbound.peer_name == peer_name, A2AInbound.message_id == message_id)
        return self.session.scalars(q.order_by(A2AInbound.id.desc()).limit(1)).first()

    def waiting_all(self, limit: int = 100) -> builtins.list[A2AInbound]:
        q = select(A2AInbound).where(A2AInbound.status == "waiting").order_by(A2AInbound.id).limit(limit)
        return builtins.list(self.session.scalars(q).all())

    def inbound(self, task_id: str) -> A2AInbound | None:
        return self.session.scalars(select(A2AInbound).where(A2AInbound.task_id == task_id)).first()

    def note(self, note_id: int) -> Note | None:
        return self.session.get(Note, note_id)

    def tagged_a2a_notes(self, tag: str, limit: int) -> builtins.list[Note]:
        """The A2A notes (both ways) carrying `tag`, oldest first: the newest `limit`."""
        q = (
            select(Note)
            .where(Note.door == Door.A2A.value, cast(Note.tags, String).contains(json.dumps(tag), autoescape=True))
            .order_by(Note.id.desc())
            .limit(limit)
        )
        return builtins.list(reversed(self.session.scalars(q).all()))

    def notes_from(self, source: str, limit: int) -> builtins.list[Note]:
        q = select(Note).where(Note.source == source).order_by(Note.id.desc()).limit(limit)
        return builtins.list(self.session.scalars(q).all())

    def counts(self) -> dict[str, Any]:
        rows = self.session.scalars(select(A2AOutbox.status)).all()
        return {status: rows.count(status) for status in ("pending", "sent", "failed")}

    # ---- what the A2A endpoint refused ----
    def count_refusal(self, caller: str, reason: str, *, count: int, size: int, detail: str, at: datetime) -> None:
        row = self.session.scalars(
            select(A2ARefusal).where(A2ARefusal.caller == caller, A2ARefusal.reason == reason)
        ).first()
        if row is None:
            row = A2ARefusal(
                caller=caller, reason=reason, count=count, bytes=size, detail=detail, first_at=at, last_at=at
            )
            self.session.add(row)
        else:  # added in SQL, not from the value read: two batches written at once both count
            row.count = A2ARefusal.count + count
            row.bytes = A2ARefusal.bytes + size
            row.detail, row.last_at = detail, at
        self.session.flush()

    def refusals(self, limit: int = 100) -> builtins.list[A2ARefusal]:
        q = select(A2ARefusal).order_by(A2ARefusal.last_at.desc()).limit(limit)
        return builtins.list(self.session.scalars(q).all())
