"""Peers: the personas and A2A agents this one knows, and what goes between them over A2A.

Rules:
- a peer has a unique name (what `messages.send {"to": name}` and `agents.*` use) and, when known, a unique DID;
  adding and removing one is the owner's decision (the commands are `modify_self`); a spawned child is added to its
  parent's peers at birth (`added_by` "spawn"); a blocked peer's messages are refused.
- what a peer writes arrives as a note with source `peer` and the tag `from:<name>`: data, never an instruction
  (memory/provenance.py origin "peer"). An A2A task waits for the persona's reply: its next message to that peer is
  the task's answer (`reply_for`), not a second delivery.
- a message to a peer with no task waiting goes into the A2A outbox and is delivered by the web app (web/a2a.py),
  retried with a doubling delay while the peer is down, never lost; an answer the agent gives at once becomes a note
  from it. Any A2A agent can be written to by its URL (`to` = "https://…"): it is then an unnamed peer.
- who calls is what its credential proves, never what the message says: the owner issues each peer its own
  credentials (a token that opens A2A only; only its hash is kept) and revokes them; a caller without one is the one
  `anonymous` caller (its notes are by `a2a-<context>`, a name no peer may take), where the owner allows it. A task is
  seen and continued only by the caller that opened it. Names that are people's, or the owner's words ("user",
  "owner"), are no peer's.
- the credential a peer issued to this persona (for the persona's own messages to it) is kept like every secret
  (memory/secrets.py: a 0600 file, or sealed), never in the database, a log, a page or an export.
- what one caller, and all callers together, may leave unanswered is capped (`a2a.open_per_caller`, `open_total`),
  and a message past `a2a.max_message_chars` is refused, not cut: `Overloaded` / `Refused` say which.
- a peer nobody added is still known once it is met (`met`): a DID a signed `have` or hello proved on the mesh
  (bootstrap, Kademlia or mDNS found it), or an A2A agent the persona wrote to by its URL. It becomes a peer
  `added_by` "met" with a name of its own and what it says it offers (its hello's topics, its card's skills: its
  own words, fenced wherever shown) — and nothing else: no credential, no tag, trust only from evaluations. The
  owner's (or the approved persona's) `add` with its DID or address takes it over under the name given. At most
  MET_KEPT are kept: a flood of fresh DIDs pushes out the least recently seen met peer nobody touched, never a peer
  anyone added.
- what the persona is shown of its peers (`known`, the prompt's block and `agents.list`) is what its audience may
  see: all of them for the owner or the persona alone; for anyone else only the peers the owner tagged `shareable`,
  and to a peer its own row.
"""

from __future__ import annotations

import builtins
import hashlib
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from managers.audience import SHAREABLE, Audience, Role
from managers.conversation import Words
from managers.errors import NotFound, Refused
from memory.models import A2AInbound, A2AOutbox, Note, Peer, PeerCredential
from memory.note_kinds import Door, NoteSource
from memory.repositories.peers import MET, met_name

if TYPE_CHECKING:
    from managers import Managers
    from memory.secrets import SecretStore

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


MET_KEPT = 200  # peers met and not added, kept at most (the least recently seen untouched one goes first)
PROMPT_PEERS = 8  # peers named in the prompt's block (the rest are counted: agents.list shows them)
OFFER_ITEMS, OFFER_CHARS = 12, 300  # what a peer says it offers, bounded: items of a list, characters of a text
# words that name the owner, a human, the persona or the door in the persona's own prompt and commands, in any case
RESERVED_NAMES = frozenset({"user", "human", "owner", "operator", "system", "me", "self", "persona", "anonymous"})
ANONYMOUS = "anonymous"  # the caller key of every A2A caller without a credential
TASK_TAG = "a2a_task:"  # the notes of an A2A task's messages, both ways: its history (`task_view`)
TASK_HISTORY_KEPT = 200  # an A2A task's history holds at most its newest messages this many
ANONYMOUS_PREFIX = "a2a-"  # an anonymous caller's notes are by a2a-<its context>: a name no peer may take
TOKEN_PREFIX = "anima-a2a-"
TOKEN_HINT = len(TOKEN_PREFIX) + 4  # the characters of a token kept to tell credentials apart (4 of 43 random)
LAST_USED_EVERY = timedelta(minutes=1)  # a credential's last use is written at most this often
OPEN_WINDOW = timedelta(days=1)  # an unanswered A2A message counts against the caps this long
SECRETS_DIR = "secrets"  # under the data dir (the file vault): one 0600 file per secret
STATUS_OF_REPLY = {"answer": "answered", "plain": "answered", "question": "asked", "decline": "declined"}
REPLY_KINDS = tuple(STATUS_OF_REPLY)


class Overloaded(Refused):
    """A caller (or all of them) left too much unanswered: its next message is refused until the persona answers."""


def _aware(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; every time stored here is UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def valid_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > 120 or not set(name) <= NAME_CHARS:
        raise Refused(f"a peer's name is 1-120 letters, digits, '-', '_' or '.', not {name!r}")
    if name.lower() in RESERVED_NAMES:
        raise Refused(f"{name!r} names my human, a person or myself, not a peer")
    if name.lower().startswith(ANONYMOUS_PREFIX):
        raise Refused(f"{name!r}: names starting with {ANONYMOUS_PREFIX!r} are the anonymous A2A callers'")
    return name


def token_hash(token: str) -> str:
    """What is kept of a peer's token. SHA-256 without a salt or a slow hash: the token is 256 random bits, so nothing
    can be guessed from its hash, and an equal-hash lookup finds the credential in one query."""
    return hashlib.sha256(token.strip().encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class InboundLimits:
    """What one A2A message and its caller may cost (from `a2a` settings)."""

    max_chars: int = MAX_TEXT
    open_per_caller: int = 10
    open_total: int = 100


@dataclass(frozen=True)
class TaskReply:
    """The persona's reply to an A2A task: its text, how it was meant (`kind`: answer, question — the task waits for
    the caller —, decline, plain — a message, not a task's result —) and its attachments (data, files)."""

    text: str
    kind: str = "answer"
    parts: tuple[dict[str, Any], ...] = field(default_factory=tuple)


def clean_offers(offers: Mapping[str, Any]) -> dict[str, Any]:
    """What a peer says it offers, as kept: its agent's name and description, the topics it listens to and its
    skills, each bounded (anything else it said is not kept)."""
    out: dict[str, Any] = {}
    for key in ("agent", "description"):
        value = offers.get(key)
        if isinstance(value, str) and value.strip():
            out[key] = " ".join(value.split())[:OFFER_CHARS]
    for key in ("topics", "skills"):
        values = offers.get(key)
        if isinstance(values, (list, tuple)):
            kept = [" ".join(v.split())[:80] for v in values if isinstance(v, str) and v.strip()][:OFFER_ITEMS]
            if kept:
                out[key] = kept
    return out


@dataclass(frozen=True)
class KnownPeer:
    """A peer as the persona is shown it (the prompt's block of the peers it knows)."""

    name: str
    did: str | None
    trust: float | None  # None: nobody evaluated it yet
    tags: tuple[str, ...]
    met: bool  # nobody added it: met on the mesh or over A2A
    offers: dict[str, Any]  # its own words (clean_offers): data, fenced wherever shown


class PeerManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    def _now(self) -> datetime:
        return self.house.deps.clock()

    # ---- the peers ----
    def list(self, *, include_blocked: bool = True) -> builtins.list[Peer]:
        return self.repos.peers.list(include_blocked=include_blocked)

    def point_parent_at(self, url: str) -> bool:
        """A spawned child learns where its parent is served now (the parent's peer row, named at birth)."""
        parent = (self.repos.config.lineage_parent or {}).get("name")
        peer = self.find(str(parent)) if parent else None
        if peer is None:
            return False
        peer.a2a_url = url.rstrip("/")
        self.repos.peers.flush()
        return True

    def find(self, key: str | int) -> Peer | None:
        return self.repos.peers.find(key)

    def by_did(self, did: str) -> Peer | None:
        return self.repos.peers.find(did) if did else None

    def get(self, key: str | int) -> Peer:
        peer = self.find(key)
        if peer is None:
            raise NotFound(f"no peer {key!r} (agents.list shows them)")
        return peer

    def add(
        self,
        name: str,
        *,
        a2a_url: str | None = None,
        did: str | None = None,
        p2p_addrs: Iterable[str] = (),
        added_by: str = "owner",
        note: str = "",
    ) -> Peer:
        """A peer added by the owner (or the persona, approved; or a spawn). One met before by that DID or address
        is taken over under this name."""
        name = valid_name(name)
        if a2a_url is not None:
            a2a_url = a2a_url.strip().rstrip("/")
            if not is_agent_url(a2a_url):
                raise Refused(f"an A2A address is an http(s) URL, not {a2a_url!r}")
        met = self._met_by(did, a2a_url)
        named = self.repos.peers.find(name)
        if named is not None and named is not met:
            raise Refused(f"a peer named {name!r} is already known")
        if self.repos.people.by_name(name) is not None:
            raise Refused(f"{name!r} is the name of a person I know (users.list): a peer needs a name of its own")
        if did and (other := self.repos.peers.find(did)) is not None and other is not met:
            raise Refused(f"a peer with DID {did} is already known")
        if met is not None:  # met on the mesh or over A2A: now added, under the name given
            met.name, met.added_by, met.note = name, added_by, note[:2000]
            met.did = did or met.did
            met.a2a_url = a2a_url or met.a2a_url
            met.p2p_addrs = sorted({*(met.p2p_addrs or []), *(str(a) for a in p2p_addrs)})
            self.repos.peers.flush()
            return met
        return self.repos.peers.add(
            name,
            did=did or None,
            a2a_url=a2a_url,
            p2p_addrs=[str(a) for a in p2p_addrs],
            added_by=added_by,
            note=note[:2000],
            now=self._now(),
        )

    def _met_by(self, did: str | None, a2a_url: str | None) -> Peer | None:
        """The peer met (nobody added it) with this DID or A2A address."""
        for peer in (
            self.repos.peers.find(did) if did else None,
            self.repos.peers.by_url(a2a_url) if a2a_url else None,
        ):
            if peer is not None and peer.added_by == MET:
                return peer
        return None

    # ---- met: on the mesh, over A2A ----
    def met(
        self,
        key: str,
        *,
        transport: str | None = None,
        offers: Mapping[str, Any] | None = None,
        now: datetime | None = None,
    ) -> Peer:
        """A peer met: on the mesh (`key`: a DID its signed `have` or hello proved; `transport`: the libp2p peer it
        spoke from) or over A2A (`key`: the URL of an agent the persona wrote to). A known peer is seen now; one not
        known becomes a peer `added_by` met, named `peer-…` (`agent-…`) — knowing it grants nothing. `offers`: what it
        says it offers (its hello, its card), replacing what it said before."""
        moment = now or self._now()
        is_did = key.startswith("did:")
        address = None if is_did else key.strip().rstrip("/")
        peer = self.repos.peers.find(key) if is_did else self.repos.peers.by_url(str(address))
        if peer is None:
            peer = self.repos.peers.add(
                met_name(key, self.repos.peers.names()),
                did=key if is_did else None,
                a2a_url=address,
                p2p_addrs=[],
                added_by=MET,
                note="",
                now=moment,
            )
        if transport:
            here = f"/p2p/{transport}"  # a met peer's latest address only: its sidecar has a new one each start
            peer.p2p_addrs = [here] if peer.added_by == MET else sorted({*(peer.p2p_addrs or []), here})
        if offers is not None:
            peer.offers = clean_offers(offers)
        peer.first_seen = peer.first_seen or moment
        peer.last_seen = moment
        self.repos.peers.flush()
        self._forget_met()
        return peer

    def _forget_met(self) -> None:
        """Past MET_KEPT met peers, the least recently seen ones nobody touched (no tag, not blocked, no credential)
        are forgotten: a flood of fresh DIDs cannot grow the table, nor push out a peer anyone added."""
        met = self.repos.peers.met()
        if len(met) <= MET_KEPT:
            return
        spare = sorted(
            (p for p in met if not p.tags and not p.blocked and not self.repos.peers.credentials(p.id)),
            key=lambda p: _aware(p.last_seen or p.created_at),
        )
        for peer in spare[: len(met) - MET_KEPT]:
            self.repos.peers.delete(peer)

    def known(self, audience: Audience | None = None, *, include_blocked: bool = False) -> builtins.list[Peer]:
        """The peers `audience` (this unit's, by default) may be shown, in an order that changes only when a peer is
        added or met: those added first, by name, then those met, the longest known first. The owner and the
        persona alone see them all; anyone else the ones the owner tagged `shareable`, and a peer its own row."""
        audience = audience or self.house.actor
        rows = self.list(include_blocked=include_blocked)
        if not include_blocked and any(p.did for p in rows):  # no blocklist read when no peer has a DID
            blocked = {b.did for b in self.house.reputation.blocklist()}
            rows = [p for p in rows if not (p.did and p.did in blocked)]
        ordered = [p for p in rows if p.added_by != MET] + sorted(
            (p for p in rows if p.added_by == MET), key=lambda p: p.id
        )
        if audience.private:
            return ordered
        own = {audience.peer} if audience.role == Role.PEER and audience.peer else set()
        return [p for p in ordered if SHAREABLE in (p.tags or []) or own & {p.name, p.did}]

    def for_prompt(
        self, audience: Audience | None = None, limit: int = PROMPT_PEERS
    ) -> tuple[builtins.list[KnownPeer], int]:
        """The first `limit` peers `audience` may be shown (`known`), as the prompt names them, and how many more
        there are."""
        rows = self.known(audience)
        shown = [
            KnownPeer(p.name, p.did, self.trust(p.did), tuple(p.tags or ()), p.added_by == MET, dict(p.offers or {}))
            for p in rows[:limit]
        ]
        return shown, len(rows) - len(shown)

    def remove(self, key: str | int) -> Peer:
        """Forget a peer: the credentials issued to it are deleted (they open nothing) and the one it issued to me
        is dropped."""
        peer = self.get(key)
        self.repos.peers.delete_credentials(peer.id)  # a later peer may get the same row id: it inherits none
        self._secrets().delete(self._token_name(peer))  # the name is this peer's own: no later peer reads it
        self.repos.peers.delete(peer)
        return peer

    # ---- credentials: the ones I issue to a peer (it calls me), the one a peer issued to me (I call it) ----
    def issue_credential(self, key: str | int, *, by: str = "owner") -> tuple[PeerCredential, str]:
        """A new credential for the peer: (its row, the token). The token is returned this once and never kept."""
        peer = self.get(key)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        row = self.repos.peers.add_credential(
            peer_id=peer.id, token_hash=token_hash(token), hint=token[:TOKEN_HINT], issued_by=by[:64], now=self._now()
        )
        return row, token

    def credentials(self, key: str | int | None = None) -> builtins.list[PeerCredential]:
        """The credentials issued (to one peer, or to all), revoked ones included."""
        return self.repos.peers.credentials(self.get(key).id if key is not None else None)

    def revoke_credentials(self, key: str | int, credential_id: int | None = None) -> builtins.list[PeerCredential]:
        """Revoke one credential of the peer, or all of them; the ones revoked now."""
        peer = self.get(key)
        if credential_id is not None and not any(c.id == credential_id for c in self.repos.peers.credentials(peer.id)):
            raise NotFound(f"no credential {credential_id} of {peer.name}")
        return self._revoke(peer, credential_id)

    def _revoke(self, peer: Peer, credential_id: int | None) -> builtins.list[PeerCredential]:
        now = self._now()
        revoked = [
            c
            for c in self.repos.peers.credentials(peer.id)
            if c.revoked_at is None and (credential_id is None or c.id == credential_id)
        ]
        for row in revoked:
            row.revoked_at = now
        self.repos.peers.flush()
        return revoked

    def authenticate(self, token: str) -> Peer | None:
        """The peer a presented token is a live credential of (not revoked, the peer still known), else None — a
        blocked peer too (`refuses` says so). Its last use is noted (at most once a minute)."""
        if not token or not token.startswith(TOKEN_PREFIX):
            return None
        row = self.repos.peers.credential_by_hash(token_hash(token))
        if row is None or row.revoked_at is not None:
            return None
        peer = self.repos.peers.find(row.peer_id)
        if peer is None:
            return None
        now = self._now()
        last = row.last_used_at
        if last is not None and last.tzinfo is None:
            last = last.replace(tzinfo=now.tzinfo)
        if last is None or now - last >= LAST_USED_EVERY:
            row.last_used_at = now
            self.repos.peers.flush()
        return peer

    def _secrets(self) -> SecretStore:
        """Where a peer's credential for me is kept: a 0600 file in the data dir's secrets/ (`vault: file`), or sealed
        in the database under the deployment's key (`vault: sealed`)."""
        from memory.secrets import FileSecretStore, SealedSecretStore, deployment_key

        settings = self.house.deps.settings
        if settings.vault == "sealed":
            key = deployment_key(settings.secrets_key.get_secret_value() if settings.secrets_key else None)
            return SealedSecretStore(self.repos.secrets, key, clock=self.house.deps.clock)
        return FileSecretStore(Path(settings.data_dir).expanduser() / SECRETS_DIR)

    @staticmethod
    def _token_name(peer: Peer) -> str:
        made = peer.created_at.strftime("%Y%m%dT%H%M%S%f") if peer.created_at else "0"
        return f"a2a-peer-{peer.id}-{made}.token"  # this peer's own: a later one of the same name or id reads none

    def set_outgoing_token(self, key: str | int, token: str | None) -> Peer:
        """The credential the peer issued to me, sent with my messages to it (None: forget it)."""
        peer = self.get(key)
        if token is None or not token.strip():
            self._secrets().delete(self._token_name(peer))
        else:
            token = token.strip()
            if len(token) > 4096 or any(ch.isspace() for ch in token) or not token.isprintable():
                raise Refused("a credential is one line of printable characters without spaces, at most 4096")
            self._secrets().put(self._token_name(peer), token.encode("utf-8"))
        return peer

    def outgoing_token(self, key: str | int) -> str | None:
        peer = self.find(key)
        if peer is None:
            return None
        kept = self._secrets().get(self._token_name(peer))
        return kept.decode("utf-8") if kept else None

    def has_outgoing_token(self, key: str | int) -> bool:
        return self.outgoing_token(key) is not None

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
        return [
            p
            for p in self.list(include_blocked=False)
            if FRIEND in (p.tags or []) and p.did and not self.house.reputation.is_blocked(p.did)
        ]

    def seen(self, key: str | int, now: datetime | None = None) -> None:
        peer = self.find(key)
        if peer is None:
            return
        moment = now or self._now()
        peer.first_seen = peer.first_seen or moment
        peer.last_seen = moment
        self.repos.peers.flush()

    def attach_addresses(
        self, key: str | int, *, did: str | None = None, p2p_addrs: Iterable[str] | None = None
    ) -> Peer:
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
            "peers": [
                {"peer": p, "trust": self.trust(p.did), "history": self.trust_history(p.did)}
                for p in self.list()
                if not (p.added_by == MET and p.did)
            ],  # those met on the mesh are under `discovered`
            "learned": builtins.list(mesh.learned(limit=limit)),
            "open_cases": builtins.list(mesh.open_cases()),
            "refused": builtins.list(mesh.refused_recent(limit=limit)),
            "refused_counts": dict(mesh.refused_counts()),
            "outbox": self.outbox(limit=limit),
            "heard": self.heard_from(limit),
            "a2a_refused": self.refusals(limit),
        }

    def info(self, key: str | int) -> dict[str, Any]:
        peer = self.get(key)
        sent = [r for r in self.repos.peers.outbox(limit=500) if r.peer_name == peer.name]
        return {
            "name": peer.name,
            "did": peer.did,
            "a2a_url": peer.a2a_url,
            "p2p_addrs": list(peer.p2p_addrs or []),
            "added_by": peer.added_by,
            "note": peer.note,
            "blocked": peer.blocked,
            "tags": list(peer.tags or []),
            "first_seen": peer.first_seen,
            "last_seen": peer.last_seen,
            "trust": self.trust(peer.did),
            "outbox": {s: sum(1 for r in sent if r.status == s) for s in ("pending", "sent", "failed")},
        }

    # ---- met on the mesh, not added ----
    def discovered(self) -> builtins.list[dict[str, Any]]:
        """The peers met on the mesh that nobody added (the Mesh page offers the owner to add each under a name of
        theirs), the most recently seen first."""
        rows = [
            {
                "did": p.did,
                "name": p.name,
                "offers": dict(p.offers or {}),
                "transport": (p.p2p_addrs or [""])[0].removeprefix("/p2p/"),
                "first_seen": p.first_seen,
                "last_seen": p.last_seen,
            }
            for p in self.repos.peers.met()
            if p.did
        ]
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

    def incoming(
        self,
        author: str,
        text: str,
        *,
        task_id: str | None,
        message_id: str | None = None,
        now: datetime | None = None,
        context_id: str | None = None,
        caller: str = "",
        limits: InboundLimits | None = None,
    ) -> tuple[Note, A2AInbound | None]:
        """A message from a peer (or an unnamed A2A agent): a note from it, unread, fenced as data in the prompt; with
        `task_id`, the A2A task that waits for the persona's reply — a new one, or the caller's own task the persona
        asked it something in (`asked`: this message is the answer). `caller` is who the credential proved. The same
        `message_id` again from the same caller while the first is still unanswered (a sender's retry) is not a second
        note: the first one's task is returned (once answered, the id may come again: some senders reuse ids).
        Refused for a blocked peer, an empty or too long message, or another caller's or a finished task;
        Overloaded past the caps of `limits`."""
        author = self.known_name(author)
        if self.refuses(author):
            raise Refused(f"{author} is blocked")
        text = text.strip()
        if not text:
            raise Refused("an empty message")
        if limits is not None and len(text) > limits.max_chars:
            raise Refused(f"a message of {len(text)} characters; at most {limits.max_chars} are taken")
        moment = now or self._now()
        existing = self.repos.peers.inbound(task_id) if task_id else None
        if message_id and existing is None:
            known = self.repos.peers.inbound_by_message(author, message_id)
            if (
                known is not None
                and known.caller == caller
                and known.reply_note_id is None
                and known.status in ("waiting", "expired")
            ):
                note = self.repos.peers.note(known.note_id)
                if note is not None:
                    return note, known
        if existing is not None:
            if existing.caller != caller:
                raise Refused(f"no task {task_id}")
            if existing.status not in ("asked", "waiting"):
                raise Refused(f"task {task_id} is {existing.status}: it takes no more messages")
        if task_id and limits is not None:
            since = moment - OPEN_WINDOW
            if self.repos.peers.open_count(since, caller) >= limits.open_per_caller:
                raise Overloaded(
                    f"{limits.open_per_caller} messages of this caller wait for my answer; send again "
                    "once I have answered"
                )
            if self.repos.peers.open_count(since) >= limits.open_total:
                raise Overloaded(f"{limits.open_total} messages wait for my answer; send again later")
        tags = ([TASK_TAG + task_id] if task_id else []) + (
            [f"a2a_context:{context_id}"] if task_id and context_id else []
        )
        heard = self.house.conversation.hear(
            Words(text, door=Door.A2A, peer=author, priority=1, tags=tags, at=moment)
        )  # the one way in: a note, remembered
        note = self.repos.notes.get(heard.note_id)
        assert note is not None  # written just now, in this unit
        self.seen(author, moment)
        inbound = None
        if existing is not None:
            existing.note_id, existing.message_id, existing.status = note.id, message_id, "waiting"
            existing.reply_note_id, existing.reply_kind, existing.reply_parts, existing.answered_at = (
                None,
                "answer",
                [],
                None,
            )
            self.repos.peers.flush()
            inbound = existing
        elif task_id:
            inbound = self.repos.peers.open_inbound(
                task_id=task_id, message_id=message_id, peer_name=author, caller=caller, note_id=note.id, now=moment
            )
        return note, inbound

    def reply_for(self, task_id: str) -> TaskReply | None:
        """The persona's reply to an A2A task's latest message, once it has written one."""
        row = self.repos.peers.inbound(task_id)
        if row is None or row.reply_note_id is None:
            return None
        note = self.repos.peers.note(row.reply_note_id)
        if note is None:
            return None
        return TaskReply(note.text, row.reply_kind or "answer", tuple(dict(p) for p in (row.reply_parts or [])))

    def task_view(self, task_id: str, caller: str) -> dict[str, Any] | None:
        """An A2A task as the database keeps it (it outlives the server's in-memory task store): its context, the
        caller's latest message, the persona's reply once written, and the messages before that reply, both ways,
        oldest first (`history`: role "user" or "agent", text, note id); None for a task this persona never had, or
        that another caller opened."""
        row = self.repos.peers.inbound(task_id)
        if row is None or row.caller != caller:
            return None
        note = self.repos.peers.note(row.note_id)
        tags = list(note.tags or []) if note is not None else []
        context = next((t.split(":", 1)[1] for t in tags if t.startswith("a2a_context:")), task_id)
        return {
            "task_id": row.task_id,
            "context_id": context,
            "peer": row.peer_name,
            "status": row.status,
            "asked": note.text if note is not None else "",
            "message_id": row.message_id,
            "reply": self.reply_for(task_id),
            "history": [
                {
                    "role": "agent" if said.source == NoteSource.PERSONA.value else "user",
                    "text": said.text,
                    "note_id": said.id,
                }
                for said in self.repos.peers.tagged_a2a_notes(TASK_TAG + task_id, TASK_HISTORY_KEPT)
                if said.id != row.reply_note_id
            ],
        }

    def cancel(self, task_id: str, caller: str) -> bool:
        """The caller cancels its task: it takes no reply any more (the persona's next message to that peer goes
        to its next task, or the outbox). False when there is no such task of that caller, or it is finished."""
        row = self.repos.peers.inbound(task_id)
        if row is None or row.caller != caller or row.status not in ("waiting", "asked", "expired"):
            return False
        row.status = "canceled"
        self.repos.peers.flush()
        return True

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
    def send(
        self,
        to: str,
        text: str,
        *,
        thread_id: str | None,
        llm_id: str | None,
        now: datetime,
        kind: str = "answer",
        parts: Sequence[dict[str, Any]] = (),
        note_id: int | None = None,
    ) -> tuple[Note, str]:
        """The persona's message to a peer (a name, a DID, or any A2A agent's URL): an outgoing note, then the
        answer to the peer's waiting A2A task (the one whose message is note `note_id`, else its oldest), or a row
        in the outbox. `kind`: an answer, a question (the task waits for the caller's answer: input-required), a
        decline, or a plain message; `parts`: data and files that go with an answer. (note, what happened)."""
        text = text.strip()
        if not text:
            raise Refused("an empty message")
        if kind not in REPLY_KINDS:
            raise Refused(f"a reply is one of {', '.join(REPLY_KINDS)}, not {kind!r}")
        peer = self.find(to)
        if peer is None and is_agent_url(to):
            peer = self.repos.peers.by_url(to.rstrip("/"))
        name = peer.name if peer is not None else to.rstrip("/")
        url = peer.a2a_url if peer is not None else (name if is_agent_url(name) else None)
        waiting = self._waiting_for(name, note_id)  # an unnamed A2A caller is answered in its task
        if peer is None and url is None and waiting is None:
            raise NotFound(f"no peer {to!r}: agents.list shows them; any A2A agent is reached by its URL")
        if peer is not None and peer.blocked:
            raise Refused(f"{peer.name} is blocked")
        told = self.house.conversation.tell(
            text[:MAX_TEXT],
            peer=name,
            door=Door.A2A,
            thread_id=thread_id,
            llm_id=llm_id,
            now=now,
            tags=[TASK_TAG + waiting.task_id] if waiting is not None else (),
        )
        note = self.repos.notes.get(told.note_id)
        assert note is not None  # written just now, in this unit
        if waiting is not None:
            waiting.reply_note_id, waiting.answered_at = note.id, now
            waiting.reply_kind, waiting.reply_parts, waiting.status = (
                kind,
                [dict(p) for p in parts],
                STATUS_OF_REPLY[kind],
            )
            self.repos.peers.flush()
            what = {"question": "a question in", "decline": "declining"}.get(kind, "the answer to")
            return note, f"{what} {name}'s A2A task"
        if parts:
            raise Refused(f"data and files go with an answer to a waiting A2A task, and no task of {name} waits")
        if kind == "decline":
            raise Refused(f"no task of {name} waits to be declined")
        late = self.repos.peers.unanswered_expired(name)  # a task nobody waits on any more (timed out, restart)
        if late is not None:
            late.reply_note_id, late.answered_at, late.reply_kind = note.id, now, kind
            self.repos.notes.set_tags(note.id, [*(note.tags or []), TASK_TAG + late.task_id])
            self.repos.peers.flush()
            if url is None:
                return note, f"the answer to {name}'s A2A task (it reads it with tasks/get)"
        if url is None:
            raise Refused(f"{name} has no A2A address (agents.add with a2a_url)")
        row = self.repos.peers.enqueue(peer_name=name, url=url, text=text[:MAX_TEXT], note_id=note.id, now=now)
        return note, f"queued for {name} over A2A (outbox {row.id})"

    def _waiting_for(self, name: str, note_id: int | None) -> A2AInbound | None:
        if note_id is None:
            return self.repos.peers.waiting_inbound(name)
        row = self.repos.peers.inbound_of_note(int(note_id))
        if row is None or row.peer_name != name or row.status != "waiting":
            raise Refused(f"note {note_id} is no A2A message of {name} waiting for my answer")
        return row

    def due(self, limit: int = 20) -> builtins.list[A2AOutbox]:
        return self.repos.peers.due(self._now(), limit)

    def delivered(self, row_id: int, *, reply: str | None, agent: Mapping[str, Any] | None = None) -> None:
        """Sent; an answer the agent gave at once becomes a note from it. An agent written to by its URL is met
        (`agent`: what its card says it offers)."""
        row = self.repos.peers.outbox_row(row_id)
        if row is None or row.status != "pending":
            return
        now = self._now()
        row.status, row.sent_at, row.attempts, row.last_error = "sent", now, row.attempts + 1, None
        row.reply = reply
        if self.find(row.peer_name) is None and is_agent_url(row.peer_name):
            self.met(row.url, offers=agent, now=now)
        elif agent is not None and (peer := self.find(row.peer_name)) is not None:
            peer.offers = clean_offers(agent)
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

    def count_refusal(
        self, caller: str, reason: str, *, count: int = 1, size: int = 0, detail: str = "", at: datetime | None = None
    ) -> None:
        """The A2A endpoint refused `count` requests of `caller` for `reason` (web/a2a.py counts them in batches)."""
        self.repos.peers.count_refusal(
            caller[:140], reason[:40], count=count, size=size, detail=detail[:500], at=at or self._now()
        )

    def refusals(self, limit: int = 100) -> builtins.list[dict[str, Any]]:
        """What the A2A endpoint refused, by caller (a peer's name, `anonymous`, `unauthenticated`) and reason."""
        names = {f"peer:{p.id}": p.name for p in self.list()}
        return [
            {
                "caller": names.get(r.caller, r.caller),
                "reason": r.reason,
                "count": r.count,
                "bytes": r.bytes,
                "detail": r.detail,
                "first_at": r.first_at,
                "last_at": r.last_at,
            }
            for r in self.repos.peers.refusals(limit)
        ]

    def heard_from(self, limit: int = 50) -> builtins.list[Note]:
        """What peers wrote, newest first."""
        return self.repos.peers.notes_from(PEER_SOURCE, limit)


__all__ = [
    "ANONYMOUS",
    "ANONYMOUS_PREFIX",
    "FRIEND",
    "MET",
    "PEER_SOURCE",
    "InboundLimits",
    "KnownPeer",
    "Overloaded",
    "PeerManager",
    "TaskReply",
    "clean_offers",
    "is_agent_url",
    "token_hash",
    "valid_name",
]
