"""The mesh's rules: this persona's identity, the containers it sends (the outbox of Isolated Mode) and
accepts (verified, deduplicated, rate-limited, trust-weighted; every refusal counted and held against its sender),
CogSync (publish chosen memories by tag; what arrives is data from a peer, never an instruction), consensus (ethics
cases and CogConsensus claims, trust-weighted) and sync (have/want by container id: nothing lost, nothing applied
twice, because a container's id is the hash of its body and there is one row per id).

Isolated Mode and Emergency Consensus (HMP "Isolated Mode (including Emergency Consensus)"): the door says whether a
peer is reachable (`record_connectivity`); while none is, sync and consensus wait in the outbox, and decisions are
taken on the persona's own ethics and memory — an ethics decision of its validators and a case it opens for the mesh
are written into its diary tagged `emergency_consensus` (`emergency_decision`), for review once the mesh is back:
then a system note lists them (the persona may put one to its peers with mesh.case, through the consent gate).

The door (mesh/) moves bytes and holds the per-peer token buckets; everything it decides, it asks here."""

from __future__ import annotations

import builtins
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from managers.conversation import Words
from managers.records import Record, read
from memory.models import MeshContainer, MeshRefusal
from memory.note_kinds import Door
from memory.repositories.config import MESH_CONNECTIVITY_KEY
from memory.repositories.peers import MET
from memory.secrets import FileSecretStore, SealedSecretStore, SecretStore, deployment_key
from persona.settings import MeshSettings
from persona.yaml_lines import parse_yaml, read_text
from reach.hmp.containers import Checked, Refused, check, check_value, encode, seal
from reach.hmp.identity import Identity, verify
from reach.hmp.limits import TokenBuckets
from reach.hmp.schema import (
    OFFERS,
    CogSyncPayload,
    EvaluationPayload,
    HelloPayload,
    LinkOut,
    NoteEnvelopePayload,
    NotePayload,
    RotationPayload,
    TextPayload,
)

if TYPE_CHECKING:
    from managers import Managers

KEY_DIR, KEY_NAME = "mesh", "identity.key"  # <data dir>/mesh/identity.key, or the sealed secret "identity.key"
REFUSAL_REASONS = (
    "forged",
    "replay",
    "expired",
    "oversized",
    "unknown_type",
    "malformed",
    "revoked",
    "flood",
    "blocked",
    "distrusted",
    "over_quota",
)
# what only a misbehaving peer causes; a rate refusal (`flood`) is not among them: an honest peer leaving Isolated
# Mode sends its outbox at once, and what was refused for rate comes again by sync (have / want)
PENALISED = frozenset({"forged", "replay", "expired", "oversized", "unknown_type", "malformed"})
RETRYABLE = frozenset({"flood"})  # a refusal the same container may pass later: it is asked for again by sync
PUBLISHABLE = ("diary", "concept", "abstract")
EMERGENCY = "emergency_consensus"  # the diary tag of a decision taken alone in Isolated Mode, for review
REVIEW_LISTED = 20  # emergency decisions named in the note that tells of the mesh's return
NOTE_TEXT = 8000  # a distributed note's text at most
NOTE_MARKS = 12  # mentions (and hashtags) a distributed note carries at most
EXCHANGED = frozenset({"ethics_case", "claim", "goal", "goal_status", *OFFERS})  # told to the persona (exchange.py)
LINKS_SENT = 20  # a concept's links a CogSync container carries at most (the schema's bound)


class MeshConnectivity(Record):
    """Whether the mesh door reaches a peer, as it last said (the `mesh/connectivity` key)."""

    isolated: bool = False
    since: datetime | None = None  # when it said so
    peers: int = 0
    door: str | None = None  # running | not_started (None: it never said)
    isolated_since: datetime | None = None  # when the isolation began


@dataclass(frozen=True)
class Outcome:
    status: str  # accepted | refused
    reason: str = ""
    container_id: str | None = None
    sender: str | None = None
    applied: str | None = None  # what it became here: "diary 12", "evaluation", …
    type: str | None = None  # the container's type (accepted ones)
    detail: str = ""  # what the container said that the door shows (a hello's topics), or why it was refused

    @property
    def final(self) -> bool:
        """A refusal the same container would meet again (not worth asking for by sync)."""
        return self.status == "refused" and self.reason not in RETRYABLE


@dataclass
class StoreQuota:
    """How many bytes of containers this persona keeps from each peer and in all, and — of those it keeps only to
    pass on (CogSync on a topic it does not subscribe to, a message for another persona) — how many. The door
    holds one (`MeshManager.quota()` counts what the database holds when the door starts); `receive` refuses what
    would exceed it as `over_quota`, shown with the other refusals."""

    per_peer: int
    total: int
    carry_per_peer: int
    carry_total: int
    kept: Counter[str] = field(default_factory=Counter)  # sender -> bytes kept
    carried: Counter[str] = field(default_factory=Counter)  # sender -> bytes kept only to pass on

    def refuses(self, sender: str, size: int, *, carried: bool) -> str | None:
        """Why a container of `size` bytes from `sender` is not kept, or None."""
        if self.kept[sender] + size > self.per_peer:
            return f"this peer's containers would exceed {self.per_peer // 1024} KiB"
        if sum(self.kept.values()) + size > self.total:
            return f"the mesh's containers would exceed {self.total // (1024 * 1024)} MiB"
        if carried and self.carried[sender] + size > self.carry_per_peer:
            return f"containers kept only to pass on would exceed {self.carry_per_peer // 1024} KiB for this peer"
        if carried and sum(self.carried.values()) + size > self.carry_total:
            return f"containers kept only to pass on would exceed {self.carry_total // 1024} KiB"
        return None

    def add(self, sender: str, size: int, *, carried: bool) -> None:
        self.kept[sender] += size
        if carried:
            self.carried[sender] += size


@dataclass(frozen=True)
class Tally:
    case_id: str
    kind: str  # ethics_case | claim
    question: str
    solutions: dict[str, str]  # solution container id -> text
    weights: dict[str, float]  # solution id (or "score") -> trust-weighted votes
    votes: int
    result: str | None  # the winning solution's text; a claim: "agree" / "disagree" / "undecided"
    score: float | None  # a claim's trust-weighted mean evaluation
    unweighed: int = 0  # votes of peers not trusted here: counted, weighing nothing


def _marks(values: Any) -> builtins.list[str]:
    """A note's mentions or hashtags as they travel: words of at most 60 characters, at most NOTE_MARKS."""
    words = values if isinstance(values, (list, tuple)) else []
    return [str(w)[:60] for w in words if isinstance(w, str) and w.strip()][:NOTE_MARKS]


def _aware(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; every time stored here is UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _voter_weight(trust: float) -> float:
    """A vote's weight is its voter's earned trust: 0 for a peer nobody here has evaluated (or one distrusted), so any
    number of fresh DIDs weighs nothing against one trusted peer (a Sybil costs nothing to make; trust does)."""
    return max(0.0, trust)


class MeshManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repo = house.repos.mesh
        self._identity: Identity | None = None

    @property
    def settings(self) -> MeshSettings:
        return self.house.deps.settings.mesh

    # ---- identity ----------------------------------------------------------------------------------------------------
    def secret_store(self) -> SecretStore:
        """Where this persona's key is kept: a 0600 file in the data dir's mesh/ (`vault: file`), or sealed in
        its database under the deployment's key (`vault: sealed`, a fleet persona's: memory/secrets.py)."""
        settings = self.house.deps.settings
        if settings.vault == "sealed":
            key = deployment_key(settings.secrets_key.get_secret_value() if settings.secrets_key else None)
            return SealedSecretStore(self.house.repos.secrets, key, clock=self.house.deps.clock)
        return FileSecretStore(Path(settings.data_dir).expanduser() / KEY_DIR)

    def identity(self) -> Identity:
        if self._identity is None:
            store = self.secret_store()
            pem = store.get(KEY_NAME)
            if pem is None:
                self._identity = Identity.generate()
                store.put(KEY_NAME, self._identity.to_pem())
            else:
                self._identity = Identity.from_pem(pem, f"{KEY_NAME} in {store.where}")
        return self._identity

    def use_identity(self, identity: Identity) -> None:
        """A door (or a bench) that already holds the key pair."""
        self._identity = identity

    def my_did(self) -> str:
        return self.identity().did

    def rotate(self) -> dict[str, Any]:
        """A new key pair. The rotation container is signed by the old key and carries the new key's signature of the
        old DID (each vouches for the other); the new key replaces the old one in the secret store, the old DID is
        retired here, and the container waits in the outbox for the peers."""
        old = self.identity()
        new = Identity.generate()
        statement = {"old": old.did, "new": new.did, "new_sig": new.sign(f"rotate:{old.did}".encode()).hex()}
        container = self._queue(seal(old, "rotation", statement, ttl=self.settings.default_ttl_s))
        self.secret_store().put(KEY_NAME, new.to_pem())
        self._identity = new
        self._retire(old.did, replaced_by=new.did, container_id=container["id"])
        return container

    def revoke(self) -> dict[str, Any]:
        """Revoke this persona's key (it leaked): a revocation signed by the key itself goes to the peers, and a new
        key pair replaces it (without the old one vouching for it: the peers meet a new DID)."""
        old = self.identity()
        container = self._queue(seal(old, "revocation", {"did": old.did}, ttl=self.settings.default_ttl_s))
        new = Identity.generate()
        self.secret_store().put(KEY_NAME, new.to_pem())
        self._identity = new
        self._retire(old.did, replaced_by=None, container_id=container["id"])
        return container

    def _retire(self, did: str, *, replaced_by: str | None, container_id: str | None) -> None:
        self.repo.revoke(did, replaced_by=replaced_by, container_id=container_id, at=self.house.deps.clock())

    def is_revoked(self, did: str) -> bool:
        return self.repo.revocation(did) is not None

    # ---- sending (the outbox) ---------------------------------------------------------------------------------------
    def compose(
        self,
        type_: str,
        payload: Mapping[str, Any],
        *,
        recipient: str | None = None,
        topic: str | None = None,
        lineage: Iterable[str] = (),
        ref: str | None = None,
        ttl: int | None = None,
    ) -> dict[str, Any]:
        """A signed container from this persona, queued in the outbox (the door sends it when a peer is reachable)."""
        container = seal(
            self.identity(),
            type_,
            payload,
            ttl=ttl or self.settings.default_ttl_s,
            lineage=lineage,
            recipient=recipient,
            topic=topic,
        )
        return self._queue(container, ref=ref)

    def _queue(self, container: dict[str, Any], *, ref: str | None = None) -> dict[str, Any]:
        payload = container["payload"]
        self.repo.add(
            MeshContainer(
                id=container["id"],
                direction="out",
                type=container["type"],
                sender=container["sender"],
                recipient=container["recipient"],
                topic=container["topic"],
                ref=ref or payload.get("case") or payload.get("about") or None,
                body=container,
                status="queued",
                created_at=self.house.deps.clock(),
            )
        )
        return container

    def hello(self, agent: str = "anima") -> dict[str, Any]:
        """A signed statement of who this persona is on the mesh — its DID (the signer) and the CogSync topics it
        listens to, nothing else — queued for the peers; the door sends one when it first reaches a peer, and a
        newcomer gets it by sync."""
        return self.compose("hello", HelloPayload(topics=self.subscriptions()[:64], agent=agent[:200]).model_dump())

    def journal(self, events: Iterable[Mapping[str, Any]]) -> int:
        """What the door saw (a peer met, a container received or refused, one sent) into the live journal, kind
        `mesh`: the Mesh page streams it (web/pages/live.py)."""
        now = self.house.deps.clock()
        rows = [
            {
                "at": now,
                "kind": "mesh",
                "node": str(event.get("event", ""))[:128],
                "data": {k: v for k, v in event.items() if k != "event"},
            }
            for event in events
        ]
        return self.house.repos.live_events.add_many(rows) if rows else 0

    def trim_journal(self, keep: int) -> int:
        return self.house.repos.live_events.trim(keep)

    def outbox(self, limit: int = 200) -> builtins.list[dict[str, Any]]:
        return [dict(r.body) for r in self.repo.outbox(limit)]

    def mark_sent(self, ids: Iterable[str]) -> int:
        ids = list(ids)
        return self.repo.mark_sent(ids, self.house.deps.clock()) if ids else 0

    # ---- receiving --------------------------------------------------------------------------------------------------
    def receive(
        self,
        raw: bytes | str | dict[str, Any],
        *,
        limiter: TokenBuckets | None = None,
        relay: str | None = None,
        now_ms: int | None = None,
        quota: StoreQuota | None = None,
    ) -> Outcome:
        """Verify a container that arrived and apply it, or refuse it (counted; the sender's trust lowered for what
        only its sender can cause — a replay is held against the peer that relayed it, `relay`, when known). `raw`
        is its bytes, or the value a sync message's `bodies` carried (already read within bounds). A rate refusal
        (`limiter`) costs the sender nothing; `quota` bounds what is kept per peer and in all."""
        settings = self.settings
        try:
            if isinstance(raw, dict):
                size = len(json.dumps(raw, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "replace"))
                if size > settings.max_container_bytes:
                    raise Refused("oversized", f"{size} bytes > {settings.max_container_bytes}")
                checked = check_value(raw, size, now_ms=now_ms)
            else:
                checked = check(raw, now_ms=now_ms, max_bytes=settings.max_container_bytes)
        except Refused as refused:  # an unproven sender is not blamed: the peer that delivered it is
            blamed = refused.sender if refused.verified else relay
            return self._refuse(
                refused.reason, refused.detail, refused.sender or relay, refused.container_id, blamed=blamed
            )
        sender, cid = checked.sender, checked.id
        if sender == self.my_did():
            return Outcome("refused", "own", cid, sender)  # an echo of our own container: not counted
        reputation = self.house.reputation
        if reputation.is_blocked(sender):
            return self._refuse("blocked", "", sender, cid, blamed=None)
        if self.is_revoked(sender):  # whoever holds a revoked key: not its successor's fault
            return self._refuse("revoked", "the sender's key was revoked or rotated", sender, cid, blamed=None)
        if self.repo.get(cid) is not None:  # anyone can replay a peer's container: blame the relay
            return self._refuse("replay", "already have it", sender, cid, blamed=relay if relay != sender else None)
        if limiter is not None and not limiter.allow(sender):  # asked for again by sync: no fault of the sender's
            return self._refuse(
                "flood", f"over {settings.rate_per_s}/s (asked for again by sync)", sender, cid, blamed=None
            )
        trust = reputation.trust(sender)
        if trust < settings.min_trust:
            return self._refuse("distrusted", f"trust {trust:.2f} < {settings.min_trust}", sender, cid, blamed=None)
        carried = self.carried_only(checked.container)
        if quota is not None:
            over = quota.refuses(sender, checked.size, carried=carried)
            if over:
                return self._refuse("over_quota", over, sender, cid, blamed=None)
        outcome = self._accept(checked, trust)
        if quota is not None:
            quota.add(sender, checked.size, carried=carried)
        return outcome

    def carried_only(self, container: Mapping[str, Any]) -> bool:
        """Whether a container is kept here only to pass on to others (by sync): CogSync on a topic this persona
        does not subscribe to, or a message, ask, answer or note addressed to another persona."""
        if container.get("type") == "cogsync":
            return container.get("topic") not in self.subscriptions()
        return container.get("recipient") not in (None, self.my_did())

    def quota(self) -> StoreQuota:
        """The store's bounds (`mesh.store_*`) and what the database already holds from each peer."""
        settings = self.settings
        quota = StoreQuota(
            per_peer=settings.store_per_peer_kb * 1024,
            total=settings.store_total_mb * 1024 * 1024,
            carry_per_peer=settings.carry_per_peer_kb * 1024,
            carry_total=settings.carry_total_mb * 1024 * 1024,
        )
        topics, me = set(self.subscriptions()), self.my_did()
        for sender, type_, topic, recipient, size in self.repo.kept_sizes():
            carried = topic not in topics if type_ == "cogsync" else recipient not in (None, me)
            quota.add(sender, size, carried=carried)
        return quota

    def _refuse(
        self, reason: str, detail: str, sender: str | None, container_id: str | None, *, blamed: str | None
    ) -> Outcome:
        """Count the refusal (under the DID the container names) and lower the trust of `blamed` — the proven
        sender, or the peer that delivered what no signature proves."""
        self.repo.refuse(
            MeshRefusal(
                sender=sender, reason=reason, container_id=container_id, detail=detail[:300], at=self.house.deps.clock()
            )
        )
        if blamed and reason in PENALISED:
            self.house.reputation.penalise(blamed, reason, about=container_id)
        return Outcome("refused", reason, container_id, sender, detail=detail[:300])

    def _accept(self, checked: Checked, trust: float) -> Outcome:
        container = checked.container
        payload = checked.payload
        ref: Any = None
        if isinstance(payload, NoteEnvelopePayload):  # a distributed note: its origin's id
            ref = payload.note.get("id")
        elif checked.type != "note":
            ref = container["payload"].get("case") or container["payload"].get("about")
        row = MeshContainer(
            id=checked.id,
            direction="in",
            type=checked.type,
            sender=checked.sender,
            recipient=container["recipient"],
            topic=container["topic"],
            ref=str(ref)[:80] if isinstance(ref, str) and ref else None,
            body=container,
            status="accepted",
            trust=round(trust, 4),
            created_at=self.house.deps.clock(),
        )
        self.repo.add(row)
        applied = self._apply(row, checked)
        detail = ""
        if isinstance(payload, HelloPayload):
            detail = ", ".join(payload.topics)[:300]
        return Outcome("accepted", "", checked.id, checked.sender, applied, type=checked.type, detail=detail)

    def _apply(self, row: MeshContainer, checked: Checked) -> str | None:
        """What an accepted container becomes here. Text from a peer is data: a note or a memory marked with its
        origin ("peer"), sender DID and trust — never a command."""
        kind, payload = row.type, checked.payload
        if isinstance(payload, TextPayload):  # message, ask, answer
            if row.recipient not in (None, self.my_did()):
                return None  # relayed to someone else
            text = payload.text[:NOTE_TEXT]
            if not text.strip():
                return None
            heard = self.house.conversation.hear(
                Words(text, door=Door.MESH, peer=row.sender, tags=self._note_tags(row))
            )
            return f"note {heard.note_id}"
        if isinstance(payload, NoteEnvelopePayload):
            return self._take_note(row, payload)
        if isinstance(payload, CogSyncPayload):
            if row.topic not in self.subscriptions():
                return None  # kept for sync and relaying (within the carry quota), not learned
            return self._learn(row, payload)
        if isinstance(payload, EvaluationPayload):
            self.house.reputation.evaluate(
                payload.subject,
                payload.score,
                evaluator=row.sender,
                about=payload.about,
                reason=payload.reason[:200],
                container_id=row.id,
            )
            return "evaluation"
        if isinstance(payload, RotationPayload):
            try:
                vouched = payload.old == row.sender and verify(
                    payload.new, bytes.fromhex(payload.new_sig), f"rotate:{row.sender}".encode()
                )
            except ValueError:
                vouched = False
            self._retire(row.sender, replaced_by=payload.new if vouched else None, container_id=row.id)
            if vouched:  # the successor inherits the trust the old key had earned here
                self.house.reputation.evaluate(
                    payload.new, self.house.reputation.trust(row.sender), reason="rotation", about=row.id
                )
            return "rotation"
        if kind == "revocation":
            self._retire(row.sender, replaced_by=None, container_id=row.id)
            return "revocation"
        if isinstance(payload, HelloPayload):  # a signed word of who it is: a peer met, its topics what it offers
            self.house.peers.met(row.sender, offers={"topics": payload.topics, "agent": payload.agent})
            return "hello"
        if kind in EXCHANGED:  # a peer's case, goal or offer: told to the persona as a note (managers/exchange.py)
            return self.house.exchange.arrived(row) or kind
        return kind  # solution, vote: read by tally(); hello, a note sealed by its author

    # ---- distributed notes (F2F) ---------------------------------------------------------------------------------
    def share_note(
        self, text: str, *, mentions: Iterable[str] = (), hashtags: Iterable[str] = (), priority: int = 0
    ) -> builtins.list[dict[str, Any]]:
        """A public note of this persona's, to each friend (managers/peers.py `friends`): the note sealed once by this
        persona — its signed origin, which every friend of a friend verifies and deduplicates by — inside an envelope
        addressed to each friend, hops 1. Only the words, mentions, hashtags and priority leave: never the local
        note's tags, llm id, hidden flag or author ids. ValueError when there is no friend to share with."""
        friends = [str(f.did) for f in self.house.peers.friends()]
        if not friends:
            raise ValueError(
                'I have no friends to share notes with (a peer tagged "friend": agents.tag, with my human\'s approval)'
            )
        note = seal(
            self.identity(),
            "note",
            {
                "text": text[:NOTE_TEXT],
                "mentions": _marks(mentions),
                "hashtags": _marks(hashtags),
                "priority": max(-10, min(10, int(priority))),
            },
            ttl=self.settings.default_ttl_s,
        )
        return [self._envelope(note, 1, did) for did in friends]

    def _envelope(self, note: Mapping[str, Any], hops: int, friend: str) -> dict[str, Any]:
        return self.compose(
            "note", {"note": dict(note), "hops": hops}, recipient=friend, lineage=[str(note["id"])], ref=str(note["id"])
        )

    def _take_note(self, row: MeshContainer, payload: NoteEnvelopePayload) -> str | None:
        """A friend's envelope addressed here: the note inside is verified like any container (its author's
        signature, its age, its shape), taken once — by its id, however many friends carry it and whichever way it
        loops —, marked with its origin and hops (data from a peer, source `peer`), and relayed to this persona's
        other friends while hops < `mesh.note_hops`. An envelope from a peer that is no friend here is not taken; a
        note whose author is blocked, revoked or distrusted here is neither taken nor relayed."""
        if row.recipient != self.my_did():
            return None  # carried to another friend: kept for sync, not taken
        friends = {str(f.did) for f in self.house.peers.friends()}
        raw, hops = payload.note, payload.hops
        if row.sender not in friends:
            return None
        try:
            note = check(encode(raw), max_bytes=self.settings.max_container_bytes)
        except (Refused, TypeError, ValueError):
            return None
        origin, body = note.sender, note.payload
        reputation = self.house.reputation
        if (
            note.type != "note"
            or not isinstance(body, NotePayload)
            or note.container["recipient"] is not None
            or origin == self.my_did()
            or self.repo.note_applied(note.id)
            or reputation.is_blocked(origin)
            or self.is_revoked(origin)
            or reputation.trust(origin) < self.settings.min_trust
        ):
            return None
        text = body.text[:NOTE_TEXT]
        if not text.strip():
            return None
        marks = [f"#{t}" for t in _marks(body.hashtags)] + [f"@{m}" for m in _marks(body.mentions)]
        heard = self.house.conversation.hear(
            Words(
                text,
                door=Door.MESH,
                peer=row.sender,
                priority=body.priority,
                tags=[*self._note_tags(row), f"origin:{origin}", f"hops:{hops}", *marks],
            )
        )
        row.local_tier, row.local_id = "note", heard.note_id
        self.house.repos.session.flush()
        if hops < self.settings.note_hops:
            for friend in sorted(friends - {row.sender, origin}):
                self._envelope(raw, hops + 1, friend)
        return f"note {heard.note_id}"

    def peer_label(self, did: str) -> str:
        """How a peer is named to the persona and the owner: the owner's name for it and its DID, or its DID (a peer
        only met, whose name nobody gave it, too)."""
        known = self.house.peers.by_did(did)
        return f"{known.name}, {did}" if known is not None and known.name and known.added_by != MET else did

    def _note_tags(self, row: MeshContainer) -> builtins.list[str]:
        """A note from a peer: `from:<the owner's name for it>, <DID>` (or the DID) says who wrote it wherever the note
        is shown (memory/provenance.py note_author); `peer:<DID>` which key signed it."""
        return ["via:mesh", f"from:{self.peer_label(row.sender)}", f"peer:{row.sender}"]

    def _memory_tags(self, row: MeshContainer) -> builtins.list[str]:
        """A memory learned by CogSync: `from:peer` marks it on the Memory page, `peer:<DID>` names its author."""
        return ["via:mesh", "from:peer", f"peer:{row.sender}"]

    def _learn(self, row: MeshContainer, payload: CogSyncPayload) -> str:
        text = payload.text[:NOTE_TEXT]
        tags = sorted({*payload.tags, *self._memory_tags(row), str(row.topic)})
        if payload.kind == "concept":
            name = (payload.name or text[:60])[:150]
            concept = self.house.repos.concepts.add(
                f"{name} (from {row.sender[-8:]}, {row.id[7:15]})", description=text, tags=tags
            )
            self._learn_links(row, concept.id, payload)
            tier, local_id = "concept", concept.id
        elif payload.kind == "abstract":
            abstract = self.house.repos.abstracts.add((payload.title or text[:80])[:300], text, tags=tags)
            tier, local_id = "abstract", abstract.id
        else:
            entry = self.house.repos.diary.add(text, tags=tags)
            tier, local_id = "diary", entry.id
        item = self.house.repos.items.find(tier, local_id)
        if item is not None:
            item.meta = {
                **(item.meta or {}),
                "origin": "peer",
                "peer": row.sender,
                "trust": row.trust,
                "container": row.id,
            }
        row.local_tier, row.local_id = tier, local_id
        self.house.repos.session.flush()
        return f"{tier} {local_id}"

    # ---- CogSync ----------------------------------------------------------------------------------------------------
    def subscribe(self, topic: str) -> bool:
        return self.repo.subscribe(topic, self.house.deps.clock())

    def unsubscribe(self, topic: str) -> bool:
        return self.repo.unsubscribe(topic)

    def subscriptions(self) -> builtins.list[str]:
        return sorted({*self.repo.topics(), *self.settings.topics})

    def publish(self, tag: str, *, tier: str = "diary", limit: int = 10) -> builtins.list[dict[str, Any]]:
        """Queue this persona's own `tier` memories tagged `tag` (never what it learned from peers) as CogSync
        containers under the topic `tag`; one already published is not published again."""
        if tier not in PUBLISHABLE:
            raise ValueError(f"publishable tiers: {', '.join(PUBLISHABLE)}")
        already = {(r.body.get("payload") or {}).get("local") for r in self.repo.published(tag)}
        items: builtins.list[tuple[str, dict[str, Any]]] = []
        if tier == "diary":
            for entry in self.house.repos.diary.list(limit=limit, tag=tag):
                items.append((f"diary {entry.id}", {"kind": "diary", "text": entry.text, "tags": list(entry.tags)}))
        elif tier == "abstract":
            for abstract in self.house.abstracts.list(limit=limit, tags=[tag]):
                items.append(
                    (
                        f"abstract {abstract.id}",
                        {
                            "kind": "abstract",
                            "title": abstract.title,
                            "text": abstract.summary,
                            "tags": list(abstract.tags or []),
                        },
                    )
                )
        else:
            for concept in self.house.repos.concepts.list(limit=limit * 5):
                if tag not in (concept.tags or []):
                    continue
                items.append(
                    (
                        f"concept {concept.id}",
                        {
                            "kind": "concept",
                            "name": concept.name,
                            "text": concept.description or "",
                            "tags": [tag],
                            "links": self._links_of(concept.id),
                        },
                    )
                )
        out = []
        for local, payload in items:
            if local in already or "from:peer" in payload.get("tags", []):
                continue
            out.append(self.compose("cogsync", {**payload, "local": local}, topic=tag))
        return out

    def _links_of(self, concept_id: int) -> builtins.list[dict[str, Any]]:
        """A concept's edges as CogSync carries them: each active link from it, by the other concept's name (ids are
        this database's own), at most LINKS_SENT."""
        out = []
        for link in self.house.repos.links.list(concept_id, limit=200):
            if link.source_id != concept_id:
                continue
            target = self.house.repos.concepts.find_id(link.target_id)
            if target is None or target.status != "active":
                continue
            out.append(
                LinkOut(
                    relation=link.relation[:100],
                    target=target.name[:150],
                    weight=max(0.0, min(100.0, float(link.weight))),
                ).model_dump()
            )
        return out[:LINKS_SENT]

    def _learn_links(self, row: MeshContainer, concept_id: int, payload: CogSyncPayload) -> None:
        """A peer's concept's edges, here: each to the concept of that name (one of mine, or one learned from the same
        peer), or — when there is none — to a new concept of that name marked as the peer's, empty but for where it
        came from. The links are the peer's too (tags `from:peer`, `peer:<DID>`)."""
        concepts, links = self.house.repos.concepts, self.house.repos.links
        tail, memory_tags = row.sender[-8:], self._memory_tags(row)
        for link in payload.links:
            target = (
                concepts.by_name(link.target)
                or concepts.by_name(f"{link.target} (from {tail})")
                or concepts.named_like(f"{link.target} (from {tail}, ")
            )
            if target is None:
                target = concepts.add(
                    f"{link.target} (from {tail})"[:200], description="", tags=[*memory_tags, str(row.topic)]
                )
            edge = (target.id, link.relation)
            if target.id == concept_id or edge in {
                (k.target_id, k.relation) for k in links.list(concept_id, limit=500)
            }:
                continue
            links.add(concept_id, target.id, link.relation, weight=link.weight, tags=memory_tags)

    def learned(self, limit: int = 50) -> builtins.list[MeshContainer]:
        """What arrived by CogSync and became memory here (newest first)."""
        return self.repo.learned(limit)

    def reject(self, container_id: str) -> bool:
        """The owner's no to what a peer taught: its memory is archived and the sender's trust lowered a little."""
        row = self.repo.get(container_id)
        if row is None or row.direction != "in" or row.status == "rejected":
            return False
        if row.local_tier and row.local_id is not None:
            self.house.repos.archive(row.local_tier, row.local_id, self.house.deps.clock())
        row.status = "rejected"
        self.house.reputation.evaluate(row.sender, -0.2, reason="the owner rejected what it taught", about=row.id)
        return True

    # ---- Isolated Mode and Emergency Consensus -------------------------------------------------------------------
    def connectivity(self) -> MeshConnectivity:
        """What the door last said (`door` None: it never ran, or what it said cannot be read — logged): isolated,
        since when, how many peers, the door's state."""
        return read(MeshConnectivity, self.house.repos.config.mesh_connectivity, MESH_CONNECTIVITY_KEY)

    def isolated(self) -> bool:
        """Whether the persona is in Isolated Mode: its mesh is on and the door said no peer is reachable (or that it
        could not start)."""
        return self.settings.enabled and self.connectivity().isolated

    def record_connectivity(self, *, isolated: bool, peers: int = 0, door: str = "running") -> bool:
        """The door's word on whether a peer is reachable; stored when it changed (True). When the mesh comes back,
        the decisions taken alone since the isolation began are put up for review: a system note names them."""
        now = self.house.deps.clock()
        before = self.connectivity()
        if before.door is not None and before.isolated == isolated and before.door == door:
            return False
        began = now if isolated and not before.isolated else before.isolated_since
        state = MeshConnectivity(isolated=isolated, since=now, peers=peers, door=door, isolated_since=began)
        self.house.repos.config.mesh_connectivity = state.stored()
        if before.isolated and not isolated and began is not None:
            self._review(began, now)
        return True

    def emergency_decision(
        self, text: str, *, tags: Iterable[str] = (), thread_id: str | None = None, tick: int | None = None
    ) -> int | None:
        """In Isolated Mode, a decision the mesh's consensus would have had a say in, written into the diary tagged
        `emergency_consensus` (and `tags`) for review when the mesh is back: its id; None when not isolated."""
        if not self.isolated():
            return None
        entry = self.house.diary.add(text, tags=[EMERGENCY, *tags], thread_id=thread_id, tick=tick)
        return int(entry.id)

    def _review(self, since: datetime, now: datetime) -> None:
        """The mesh is back: the diary's emergency decisions since `since` (the persona's own so tagged among them),
        named in a system note for review."""
        entries = [
            e for e in self.house.repos.diary.list(limit=200, tag=EMERGENCY) if _aware(e.created_at) >= _aware(since)
        ]
        if not entries:
            return
        hours = (now - since).total_seconds() / 3600
        named = ", ".join(f"diary {e.id}" for e in entries[:REVIEW_LISTED])
        more = f" and {len(entries) - REVIEW_LISTED} more" if len(entries) > REVIEW_LISTED else ""
        self.house.repos.notes.add(
            f"The mesh is back after {hours:.1f} h in Isolated Mode: {len(entries)} decision(s) I took alone are marked "  # noqa: E501
            f"{EMERGENCY} for review: {named}{more}. diary.read shows one; mesh.case puts one to my peers.",
            source="system",
            tags=["mesh", EMERGENCY],
            priority=1,
            created_at=now,
        )

    # ---- consensus --------------------------------------------------------------------------------------------------
    def open_case(self, question: str, solutions: Iterable[str] = (), *, kind: str = "ethics_case") -> dict[str, Any]:
        """An ethics case (solutions proposed with it or later) or a CogConsensus claim. In Isolated Mode it waits in
        the outbox and the diary marks the decision as taken alone meanwhile (`emergency` in the result: its entry)."""
        if kind not in ("ethics_case", "claim"):
            raise ValueError("kind: ethics_case or claim")
        case = self.compose(kind, {"question": question})
        for text in solutions:
            self.propose(case["id"], text)
        entry = self.emergency_decision(
            f"The mesh is unreachable (Isolated Mode): its consensus on “{question[:300]}” (case {case['id'][:19]}…) is "  # noqa: E501
            "deferred until a peer is back; meanwhile I decide on my own ethics and memory.",
            tags=["mesh", kind],
        )
        return {**case, "emergency": entry} if entry is not None else case

    def propose(self, case_id: str, text: str) -> dict[str, Any]:
        return self.compose("solution", {"case": case_id, "text": text}, lineage=[case_id], ref=case_id)

    def vote(self, case_id: str, *, solution: str | None = None, score: float | None = None) -> dict[str, Any]:
        """A vote for one solution of an ethics case, or an evaluation −1…+1 of a claim."""
        payload: dict[str, Any] = {"case": case_id}
        if solution is not None:
            payload["solution"] = solution
        if score is not None:
            payload["score"] = max(-1.0, min(1.0, float(score)))
        return self.compose("vote", payload, lineage=[case_id], ref=case_id)

    def case_rows(self, case_id: str) -> builtins.list[MeshContainer]:
        """The case (or claim) and every container that refers to it."""
        return self.repo.of_case(case_id)

    def tally(self, case_id: str) -> Tally:
        """The trust-weighted result: each voter's last vote counts once, weighed by the trust it earned here (this
        persona's own vote by 1; a peer nobody here trusts yet by 0 — counted in `unweighed`)."""
        rows = self.case_rows(case_id)
        case = next((r for r in rows if r.id == case_id), None)
        if case is None:
            raise KeyError(f"no case {case_id}")
        solutions = {r.id: str(r.body["payload"].get("text", "")) for r in rows if r.type == "solution"}
        last_vote: dict[str, MeshContainer] = {}
        for row in sorted((r for r in rows if r.type == "vote"), key=lambda r: r.body["ts"]):
            last_vote[row.sender] = row
        weights: dict[str, float] = defaultdict(float)
        scored = 0.0
        unweighed = 0
        for voter, row in last_vote.items():  # this persona's own vote is the one it sent (no key needed to know)
            weight = 1.0 if row.direction == "out" else _voter_weight(self.house.reputation.trust(voter))
            unweighed += weight == 0.0
            payload = row.body["payload"]
            if case.type == "claim" and isinstance(payload.get("score"), (int, float)):
                weights["score"] += weight
                scored += weight * float(payload["score"])
            elif payload.get("solution") in solutions:
                weights[str(payload["solution"])] += weight
        question = str(case.body["payload"].get("question", ""))
        if case.type == "claim":
            total = weights.get("score", 0.0)
            score = scored / total if total else None
            result = None if score is None else "agree" if score > 0.2 else "disagree" if score < -0.2 else "undecided"
            return Tally(
                case_id,
                case.type,
                question,
                solutions,
                dict(weights),
                len(last_vote),
                result,
                None if score is None else round(score, 4),
                unweighed,
            )
        best = max((s for s in weights if weights[s] > 0), key=lambda s: weights[s], default=None)
        return Tally(
            case_id,
            case.type,
            question,
            solutions,
            dict(weights),
            len(last_vote),
            solutions.get(best) if best else None,
            None,
            unweighed,
        )

    def open_cases(self, limit: int = 20) -> builtins.list[Tally]:
        return [self.tally(c.id) for c in self.repo.cases(limit)]

    def adopt(self, case_id: str) -> str:
        """Write an ethics case's result into the persona's ethics.yaml as a principle (the command doing this is
        `modify_self`: it runs only with the owner's approval). The local ethics stay sovereign."""
        tally = self.tally(case_id)
        if tally.kind != "ethics_case" or not tally.result:
            raise ValueError("only a decided ethics case can be adopted")
        settings = self.house.deps.settings
        if not settings.persona_dir:
            raise ValueError("no persona directory to write ethics.yaml in")
        path = Path(settings.persona_dir) / "ethics.yaml"
        data = parse_yaml(read_text(path), str(path)) if path.exists() else {}
        data = data if isinstance(data, dict) else {}
        principles = list(data.get("principles") or [])
        principle = f"{tally.result} (mesh consensus on: {tally.question})"
        if principle not in principles:
            principles.append(principle)
        data["principles"] = principles
        path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
        self.house.persona.record_edit("ethics.yaml", by="mesh consensus", now=self.house.deps.clock())
        return principle

    # ---- sync (have / want) -----------------------------------------------------------------------------------------
    def have(self, limit: int = 5000) -> builtins.list[str]:
        """The ids of the containers this persona holds that a peer may lack (its own once sent, and what it
        accepted), newest first. What still waits in the outbox is not offered: it goes out by gossip at the pace
        the peers asked for, and sync then offers what was lost on the way."""
        return self.repo.ids(limit)

    def want(self, ids: Iterable[str]) -> builtins.list[str]:
        """Of a peer's ids, those this persona lacks."""
        ids = list(dict.fromkeys(ids))
        have = self.repo.existing(ids)
        return [i for i in ids if i not in have]

    def holds(self, container_id: str) -> bool:
        return self.repo.get(container_id) is not None

    def bodies(self, ids: Iterable[str]) -> builtins.list[dict[str, Any]]:
        return [dict(r.body) for r in self.repo.many(list(ids)[:5000])]

    # ---- what the pages and status show ------------------------------------------------------------------------------
    def refused_counts(self, did: str | None = None) -> dict[str, int]:
        return self.repo.refused_counts(did)

    def trim_refusals(self, keep: int) -> int:
        """Keep the newest `keep` refusals: what a flood of junk cannot grow without bound (the counts shown are of
        what is kept)."""
        return self.repo.trim_refusals(keep)

    def refused_recent(self, limit: int = 20) -> builtins.list[MeshRefusal]:
        return self.repo.refused_recent(limit)

    def counts(self) -> dict[str, int]:
        return self.repo.counts()

    def status(self) -> dict[str, Any]:
        return {
            "did": self.my_did(),
            "containers": self.counts(),
            "refused": self.refused_counts(),
            "subscriptions": self.subscriptions(),
            "outbox": len(self.outbox()),
        }


__all__ = ["EMERGENCY", "REFUSAL_REASONS", "MeshManager", "Outcome", "Tally"]
