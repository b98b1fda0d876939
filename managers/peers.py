"""Peers: the personas and A2A agents this one knows, and what goes between them over A2A.

Rules:
- a peer has a unique name (what `messages.send {"to": name}` and `agents.*` use) and, when known, a unique DID;
  adding and removing one is the owner's decision (the commands are `modify_self`); a spawned child is added to its
  parent's peers at birth (`added_by` "spawn"); a blocked peer's messages are refused.
- what a peer writes arrives as a note with source `peer` and the tag `from:<name>`: data, never an instruction
  (nodes/provenance.py origin "peer"). An A2A task waits for the persona's reply: its next message to that peer is
  the task's answer (`reply_for`), not a second delivery.
- a message to a peer with no task waiting goes into the A2A outbox and is delivered by the web app (web/a2a.py),
  retried with a doubling delay while the peer is down, never lost; an answer the agent gives at once becomes a note
  from it. Any A2A agent can be written to by its URL (`to` = "https://…"): it is then an unnamed peer.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from managers.conversation import Words
from managers.errors import NotFound, Refused
from memory.models import A2AInbound, A2AOutbox, Note, Peer
from memory.note_kinds import Door, NoteSource

if TYPE_CHECKING:
    from managers import Managers

PEER_SOURCE = NoteSource.PEER
FRIEND = "friend"  # the tag that makes a peer a friend: the distributed notes replicate through it (managers/notes.py)
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
MAX_TAGS = 20
MAX_TEXT = 20_000


def is_agent_url(value: str) -> bool:
    """An http(s) URL with a host (a malformed one — a broken IPv6 literal, a bad port — is not)."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


DISCOVERED_KEPT = 200  # peers seen on the mesh and not added, remembered for the Mesh page


def valid_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > 120 or not set(name) <= NAME_CHARS:
        raise Refused(f"a peer's name is 1-120 letters, digits, '-', '_' or '.', not {name!r}")
    if name in ("user", "human", "owner"):
        raise Refused(f"{name!r} names the owner, not a peer")
    return name


class PeerManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    def _now(self) -> datetime:
        return self.house.deps.clock()

    # ---- the peers ----
    def list(self, *, include_blocked: bool = True) -> builtins.list[Peer]:
        return self.repos.peers.list(include_blocked=include_blocked)

    def find(self, key: str | int) -> Peer | None:
        return self.repos.peers.find(key)

    def by_did(self, did: str) -> Peer | None:
        return self.repos.peers.find(did) if did else None

    def get(self, key: str | int) -> Peer:
        peer = self.find(key)
        if peer is None:
            raise NotFound(f"no peer {key!r} (agents.list shows them)")
        return peer

    def add(self, name: str, *, a2a_url: str | None = None, did: str | None = None, p2p_addrs: Iterable[str] = (),
            added_by: str = "owner", note: str = "") -> Peer:
        name = valid_name(name)
        if a2a_url is not None:
            a2a_url = a2a_url.strip().rstrip("/")
            if not is_agent_url(a2a_url):
                raise Refused(f"an A2A address is an http(s) URL, not {a2a_url!r}")
        if self.repos.peers.find(name) is not None:
            raise Refused(f"a peer named {name!r} is already known")
        if did and self.repos.peers.find(did) is not None:
            raise Refused(f"a peer with DID {did} is already known")
        return self.repos.peers.add(name, did=did or None, a2a_url=a2a_url, p2p_addrs=[str(a) for a in p2p_addrs],
                                    added_by=added_by, note=note[:2000], now=self._now())

    def remove(self, key: str | int) -> Peer:
        peer = self.get(key)
        self.repos.peers.delete(peer)
        return peer

    def set_blocked(self, key: str | int, blocked: bool) -> Peer:
        peer = self.get(key)
        peer.blocked = blocked
        self.repos.peers.flush()
        return peer

    def set_tags(self, key: str | int, tags: Iterable[str]) -> Peer:
        """The owner's tags on a peer (they replace the old ones); `friend` makes it a friend of the distributed
        notes. Each tag is 1-60 letters, digits, '-', '_' or '.'."""
        peer = self.get(key)
        clean = sorted({str(t).strip().lower() for t in tags})
        bad = [t for t in clean if not t or len(t) > 60 or not set(t) <= NAME_CHARS]
        if bad or len(clean) > MAX_TAGS:
            raise Refused(f"tags: at most {MAX_TAGS}, each 1-60 letters, digits, '-', '_' or '.' (not {bad[:3]})")
        peer.tags = clean
        self.repos.peers.flush()
        return peer

    def friends(self) -> builtins.list[Peer]:
        """The peers tagged `friend` that have a DID and are not blocked (ours, or the mesh's blocklist)."""
        return [p for p in self.list(include_blocked=False)
                if FRIEND in (p.tags or []) and p.did and not self.house.reputation.is_blocked(p.did)]

    def seen(self, key: str | int, now: datetime | None = None) -> None:
        peer = self.find(key)
        if peer is None:
            return
        moment = now or self._now()
        peer.first_seen = peer.first_seen or moment
        peer.last_seen = moment
        self.repos.peers.flush()

    def attach_addresses(self, key: str | int, *, did: str | None = None, p2p_addrs: Iterable[str] | None = None) -> Peer:
        """The mesh learned a peer's DID or multiaddrs on the wire."""
        peer = self.get(key)
        if did and did != peer.did:
            other = self.repos.peers.find(did)
            if other is not None and other.id != peer.id:
                raise Refused(f"DID {did} already belongs to peer {other.name!r}")
            peer.did = did
        if p2p_addrs is not None:
            peer.p2p_addrs = sorted({*(peer.p2p_addrs or []), *(str(a) for a in p2p_addrs)})
        self.repos.peers.flush()
        return peer

    # ---- what the mesh (managers/reputation.py, managers/mesh.py) knows ----
    def refuses(self, key: str) -> bool:
        """A blocked peer (ours, or the mesh's reputation blocklist)."""
        peer = self.find(key)
        if peer is not None and peer.blocked:
            return True
        did = peer.did if peer is not None else (key if key.startswith("did:") else None)
        return bool(did and self.house.reputation.is_blocked(did))

    def trust_history(self, did: str | None, points: int = 20) -> builtins.list[tuple[datetime, float]]:
        if not did:
            return []
        return [(at, float(value)) for at, value in self.house.reputation.trust_history(did, points=points)]

    def trust(self, did: str | None) -> float | None:
        """The mesh's trust in a peer, or None when nothing was evaluated yet (no number is invented)."""
        if not did or not self.trust_history(did, points=1):
            return None
        return float(self.house.reputation.trust(did))

    def mesh_view(self, *, limit: int = 50) -> dict[str, Any]:
        """What the Mesh page shows: each peer with its trust over time, what was learned from whom, open consensus
        cases, refused containers, the A2A outbox and what peers wrote."""
        mesh = self.house.mesh
        return {
            "peers": [{"peer": p, "trust": self.trust(p.did), "history": self.trust_history(p.did)} for p in self.list()],
            "learned": builtins.list(mesh.learned(limit=limit)),
            "open_cases": builtins.list(mesh.open_cases()),
            "refused": builtins.list(mesh.refused_recent(limit=limit)),
            "refused_counts": dict(mesh.refused_counts()),
            "outbox": self.outbox(limit=limit),
            "heard": self.heard_from(limit),
        }

    def info(self, key: str | int) -> dict[str, Any]:
        peer = self.get(key)
        sent = [r for r in self.repos.peers.outbox(limit=500) if r.peer_name == peer.name]
        return {"name": peer.name, "did": peer.did, "a2a_url": peer.a2a_url, "p2p_addrs": list(peer.p2p_addrs or []),
                "added_by": peer.added_by, "note": peer.note, "blocked": peer.blocked, "tags": list(peer.tags or []),
                "first_seen": peer.first_seen, "last_seen": peer.last_seen, "trust": self.trust(peer.did),
                "outbox": {s: sum(1 for r in sent if r.status == s) for s in ("pending", "sent", "failed")}}

    # ---- seen on the mesh, not added ----
    def discovered_on_mesh(self, did: str, transport: str, now: datetime | None = None) -> bool:
        """A DID a signed `have` proved at a transport peer id, which is no peer of ours: remembered for the Mesh page
        ("seen on the mesh, not added"), never added — adding stays the owner's act (or agents.add, approved). The
        most recent DISCOVERED_KEPT are kept. True when it was not seen before."""
        if self.by_did(did) is not None:
            return False
        moment = (now or self._now()).isoformat()
        seen = self.repos.config.mesh_discovered
        fresh = did not in seen
        seen[did] = {"transport": transport, "first_seen": seen.get(did, {}).get("first_seen", moment),
                     "last_seen": moment}
        if len(seen) > DISCOVERED_KEPT:
            seen = dict(sorted(seen.items(), key=lambda kv: str(kv[1]["last_seen"]))[-DISCOVERED_KEPT:])
        self.repos.config.mesh_discovered = seen
        return fresh

    def discovered(self) -> builtins.list[dict[str, Any]]:
        """Peers seen on the mesh and not added, the most recently seen first."""
        rows = [{"did": did, **info} for did, info in self.repos.config.mesh_discovered.items()
                if self.by_did(did) is None]
        return sorted(rows, key=lambda r: str(r["last_seen"]), reverse=True)

    # ---- what arrives ----
    def known_name(self, claimed: str) -> str:
        """The peer a caller's name (or DID) stands for — a known peer's own spelling (`Ada` is the peer `ada`) —,
        else the name as given."""
        peer = self.find(claimed)
        if peer is None:
            lowered = claimed.lower()
            peer = next((p for p in self.list() if p.name.lower() == lowered), None)
        return peer.name if peer is not None else claimed

    def incoming(self, author: str, text: str, *, task_id: str | None, message_id: str | None = None,
                 now: datetime | None = None, context_id: str | None = None) -> tuple[Note, A2AInbound | None]:
        """A message from a peer (or an unnamed A2A agent): a note from it, unread, fenced as data in the prompt; with
        `task_id`, the A2A task that waits for the persona's reply. The same `message_id` again (a sender's retry) is
        not a second note: the first one's task is returned. Refused for a blocked peer."""
        author = self.known_name(author)
        if self.refuses(author):
            raise Refused(f"{author} is blocked")
        text = text.strip()
        if not text:
            raise Refused("an empty message")
        if message_id:
            known = self.repos.peers.inbound_by_message(author, message_id)
            if known is not None:
                note = self.repos.peers.note(known.note_id)
                if note is not None:
                    return note, known
        moment = now or self._now()
        tags = ([f"a2a_task:{task_id}"] if task_id else []) \
            + ([f"a2a_context:{context_id}"] if task_id and context_id else [])
        heard = self.house.conversation.hear(Words(text[:MAX_TEXT], door=Door.A2A, peer=author, priority=1,
                                                   tags=tags, at=moment))  # the one way in: a note, remembered
        note = self.repos.notes.get(heard.note_id)
        assert note is not None  # written just now, in this unit
        self.seen(author, moment)
        inbound = None
        if task_id:
            inbound = self.repos.peers.open_inbound(task_id=task_id, message_id=message_id, peer_name=author,
                                                    note_id=note.id, now=moment)
        return note, inbound

    def reply_for(self, task_id: str) -> str | None:
        """The persona's reply to an A2A task, once it has written one."""
        row = self.repos.peers.inbound(task_id)
        if row is None or row.reply_note_id is None:
            return None
        note = self.repos.peers.note(row.reply_note_id)
        return note.text if note is not None else None

    def task_view(self, task_id: str) -> dict[str, Any] | None:
        """An A2A task as the database keeps it (it outlives the server's in-memory task store): its context, the
        peer's message and the persona's reply once written; None for a task this persona never had."""
        row = self.repos.peers.inbound(task_id)
        if row is None:
            return None
        note = self.repos.peers.note(row.note_id)
        tags = list(note.tags or []) if note is not None else []
        context = next((t.split(":", 1)[1] for t in tags if t.startswith("a2a_context:")), task_id)
        return {"task_id": row.task_id, "context_id": context, "peer": row.peer_name, "status": row.status,
                "asked": note.text if note is not None else "", "reply": self.reply_for(task_id)}

    def orphan_waiting(self) -> int:
        """At a (re)start nothing waits on the tasks left `waiting` by the process before: they become `expired` —
        the persona's reply is then written into the task (for the peer's tasks/get) and also sent as a message."""
        rows = self.repos.peers.waiting_all(limit=10_000)
        for row in rows:
            row.status = "expired"
        if rows:
            self.repos.peers.flush()
        return len(rows)

    def give_up_waiting(self, task_id: str) -> None:
        """The task answered 'still thinking': the persona's reply, when it comes, goes back as a message."""
        row = self.repos.peers.inbound(task_id)
        if row is not None and row.status == "waiting":
            row.status = "expired"
            self.repos.peers.flush()

    # ---- what goes out ----
    def send(self, to: str, text: str, *, thread_id: str | None, llm_id: str | None, now: datetime) -> tuple[Note, str]:
        """The persona's message to a peer (a name, a DID, or any A2A agent's URL): an outgoing note, then the
        answer to the peer's waiting A2A task, or a row in the outbox. (note, what happened)."""
        text = text.strip()
        if not text:
            raise Refused("an empty message")
        peer = self.find(to)
        if peer is None and is_agent_url(to):
            peer = self.repos.peers.by_url(to.rstrip("/"))
        name = peer.name if peer is not None else to.rstrip("/")
        url = peer.a2a_url if peer is not None else (name if is_agent_url(name) else None)
        waiting = self.repos.peers.waiting_inbound(name)  # an unnamed A2A caller is answered in its task
        if peer is None and url is None and waiting is None:
            raise NotFound(f"no peer {to!r}: agents.list shows them; any A2A agent is reached by its URL")
        if peer is not None and peer.blocked:
            raise Refused(f"{peer.name} is blocked")
        told = self.house.conversation.tell(text[:MAX_TEXT], peer=name, door=Door.A2A, thread_id=thread_id,
                                            llm_id=llm_id, now=now)
        note = self.repos.notes.get(told.note_id)
        assert note is not None  # written just now, in this unit
        if waiting is not None:
            waiting.reply_note_id, waiting.status, waiting.answered_at = note.id, "answered", now
            self.repos.peers.flush()
            return note, f"the answer to {name}'s A2A task"
        late = self.repos.peers.unanswered_expired(name)  # a task nobody waits on any more (timed out, restart)
        if late is not None:
            late.reply_note_id, late.answered_at = note.id, now
            self.repos.peers.flush()
            if url is None:
                return note, f"the answer to {name}'s A2A task (it reads it with tasks/get)"
        if url is None:
            raise Refused(f"{name} has no A2A address (agents.add with a2a_url)")
        row = self.repos.peers.enqueue(peer_name=name, url=url, text=text[:MAX_TEXT], note_id=note.id, now=now)
        return note, f"queued for {name} over A2A (outbox {row.id})"

    def due(self, limit: int = 20) -> builtins.list[A2AOutbox]:
        return self.repos.peers.due(self._now(), limit)

    def delivered(self, row_id: int, *, reply: str | None) -> None:
        """Sent; an answer the agent gave at once becomes a note from it."""
        row = self.repos.peers.outbox_row(row_id)
        if row is None or row.status != "pending":
            return
        now = self._now()
        row.status, row.sent_at, row.attempts, row.last_error = "sent", now, row.attempts + 1, None
        row.reply = reply
        self.seen(row.peer_name, now)
        if reply and reply.strip() and not self.refuses(row.peer_name):
            self.incoming(row.peer_name, reply, task_id=None, now=now)
        self.repos.peers.flush()

    def undelivered(self, row_id: int, error: str, *, retry_after_s: float, max_attempts: int) -> None:
        """Not sent: tried again after a doubling delay, given up after `max_attempts` (kept, marked failed)."""
        row = self.repos.peers.outbox_row(row_id)
        if row is None or row.status != "pending":
            return
        row.attempts += 1
        row.last_error = error[:1000]
        if row.attempts >= max_attempts:
            row.status = "failed"
        else:
            delay = min(retry_after_s * 2 ** (row.attempts - 1), 3600.0)
            row.next_attempt_at = self._now() + timedelta(seconds=delay)
        self.repos.peers.flush()

    def outbox(self, *, status: str | None = None, limit: int = 50) -> builtins.list[A2AOutbox]:
        return self.repos.peers.outbox(status=status, limit=limit)

    def heard_from(self, limit: int = 50) -> builtins.list[Note]:
        """What peers wrote, newest first."""
        return self.repos.peers.notes_from(PEER_SOURCE, limit)


__all__ = ["FRIEND", "PEER_SOURCE", "PeerManager", "is_agent_url", "valid_name"]
