"""One persona's mesh node: the outbox out, arrivals in, and sync by container ids.

Topics: `anima/all` (every container but CogSync's), `anima/topic/<tag>` (CogSync, one per tag: a persona hears only
the tags it subscribed to), `anima/sync` (have / want / bodies, plain JSON: which containers a peer holds, which it
lacks, and those containers — each still verified on arrival like any other).

Isolated Mode: with no peer reachable the node publishes nothing; the persona keeps thinking and its containers
wait in the outbox (`mesh_containers`, status queued). When a peer is back the outbox is flushed and a `have` goes
out; a peer that lacks some of ours asks for them (`want`), and so do we — so a container lost in transit arrives
at the next sync round, and one that arrives twice is applied once (one row per container id)."""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import rfc8785

from managers import ManagerDeps, Managers
from managers.mesh import Outcome
from memory import Database
from mesh.transport import Delivery, Transport, TransportError
from persona.settings import Settings
from reach.hmp.containers import encode
from reach.hmp.identity import Identity, verify
from reach.hmp.limits import TokenBuckets

log = logging.getLogger(__name__)
ALL = "anima/all"
SYNC = "anima/sync"
HAVE_LIMIT = 2000  # ids in one `have`
BODIES_BYTES = 256 * 1024  # one `bodies` message at most (several are sent when more is wanted)
TRUST_EVERY_S = 2.0  # how often the peers' trust is shared with the transport's gossipsub scoring (and at once
# after a refusal or a new peer)
QUIET_HAVE_FACTOR = 6  # with nothing new and no new peer, a `have` goes out every 6 × mesh.sync_every_s (it is a
# broadcast every peer's gossipsub verifies and relays: at ten peers a `have` from each every 2 s took py-libp2p's
# latency from 0.5 s to 6.7 s on a loaded machine — bench/mesh.py)
TIMINGS_KEPT = 200  # containers whose send / arrival moments are kept for the bench (mesh.__main__ --state)


BINDING_SKEW_MS = 10 * 60 * 1000  # a `have` older or newer than this is not taken as proof of who a peer is


def channel_of(tag: str) -> str:
    return f"anima/topic/{tag}"


def binding(identity: Identity, peer_id: str, now_ms: int | None = None) -> dict[str, Any]:
    """A signed statement "this transport peer is this DID", carried by every `have`: the DID's key signs the
    canonical {did, peer, ts}. The receiver checks it against the peer the transport says published it (gossipsub
    signs its messages with the peer's own key), so a peer cannot pass itself off as another DID — what no container
    signature proves (forged, replayed, oversized) is then held against the right peer."""
    moment = int(time.time() * 1000) if now_ms is None else now_ms
    return {"did": identity.did, "peer": peer_id, "ts": moment,
            "sig": identity.sign(_binding_bytes(identity.did, peer_id, moment)).hex()}


def _binding_bytes(did: str, peer_id: str, moment: int) -> bytes:
    return rfc8785.dumps({"did": did, "peer": peer_id, "ts": moment})


def bound_did(message: dict[str, Any], peer_id: str, now_ms: int | None = None) -> str | None:
    """The DID a `have` proves for `peer_id`, or None."""
    try:
        did, peer, moment = str(message["did"]), str(message["peer"]), int(message["ts"])
        signature = bytes.fromhex(str(message["sig"]))
    except (KeyError, ValueError, TypeError):
        return None
    now = int(time.time() * 1000) if now_ms is None else now_ms
    if peer != peer_id or abs(now - moment) > BINDING_SKEW_MS:
        return None
    return did if verify(did, signature, _binding_bytes(did, peer, moment)) else None


class MeshNode:
    def __init__(self, database: Database, settings: Settings, transport: Transport, *,
                 identity: Identity | None = None) -> None:
        self.database, self.settings, self.transport = database, settings, transport
        self.identity = identity
        mesh = settings.mesh
        self.limiter = TokenBuckets(rate=mesh.rate_per_s, burst=float(mesh.burst))
        self.peer_dids: dict[str, str] = {}  # transport peer id -> DID (from their `have`)
        self.channels: set[str] = set()
        self.wanted: set[str] = set()  # ids we asked for: only those are taken from a `bodies`
        self.asked_this_round: set[str] = set()  # ids asked of some peer while handling one batch
        self.isolated = True
        self.last_have = 0.0
        self.have_dirty = True  # something sent or accepted since the last `have`
        self.peers_at_have = 0  # how many peers the transport reached at the last `have`
        self.last_channels = 0.0
        self.last_trust = 0.0
        self.trust_dirty = False  # a refusal or a new peer since the trust was last shared
        self.shared_trust: tuple[dict[str, float], list[str]] | None = None
        self.stats: Counter[str] = Counter()
        # unix seconds, by container id: when this door handed it to the transport (`sent`), and for what arrived
        # when the libp2p node took it off the wire, when this door read it, and when it was a row here
        self.sent_at: dict[str, float] = {}
        self.arrivals: dict[str, dict[str, float | str]] = {}

    @contextmanager
    def managers(self) -> Iterator[Managers]:
        with self.database.unit(actor="mesh") as repos:
            house = Managers(repos, ManagerDeps(settings=self.settings))
            if self.identity is not None:
                house.mesh.use_identity(self.identity)
            yield house

    @property
    def did(self) -> str:
        assert self.identity is not None
        return self.identity.did

    def start(self) -> None:
        with self.managers() as house:
            self.identity = house.mesh.identity()
        self.transport.start()
        for channel in (ALL, SYNC):
            self._join(channel)
        self._refresh_channels()

    def stop(self) -> None:
        self.transport.stop()

    def _join(self, channel: str) -> None:
        if channel not in self.channels:
            self.transport.subscribe(channel)
            self.channels.add(channel)

    def _refresh_channels(self) -> None:
        with self.managers() as house:
            topics = house.mesh.subscriptions()
        for topic in topics:
            self._join(channel_of(topic))

    # ---- one round ----------------------------------------------------------------------------------------------
    def step(self, timeout: float = 0.2) -> None:
        deliveries = self.transport.poll(timeout)
        if deliveries:
            self._handle_all(deliveries)
        connected = self.transport.peer_count() > 0
        now = time.monotonic()
        if connected:
            if now - self.last_channels >= 5.0:  # a topic subscribed since (mesh.subscribe) joins its channel
                self._refresh_channels()
                self.last_channels = now
            if self.flush():
                self.have_dirty = True
            if self.isolated or self._have_due(now):
                self.announce()
            if self.peer_dids and (self.trust_dirty or now - self.last_trust >= TRUST_EVERY_S):
                self.share_trust()
        elif not self.isolated:
            log.info("mesh: no peer reachable — isolated mode (the outbox keeps what is sent)")
        self.isolated = not connected

    def _have_due(self, now: float) -> bool:
        """A `have` every `mesh.sync_every_s` while there is news — a container sent or accepted, a peer more than at
        the last one (a newcomer or one back from isolation learns what it lacks) — else every QUIET_HAVE_FACTOR
        times that (a container lost in transit is still asked for then)."""
        every = self.settings.mesh.sync_every_s
        news = self.have_dirty or self.transport.peer_count() > self.peers_at_have
        return now - self.last_have >= (every if news else every * QUIET_HAVE_FACTOR)

    def _trust(self, house: Managers, did: str) -> float:
        return house.reputation.trust(did)

    def _trusted(self, house: Managers, did: str | None) -> bool:
        """Whether this door sends anything to `did` (None = everyone: a broadcast)."""
        if did is None:
            return True
        if house.reputation.is_blocked(did):
            return False
        return self._trust(house, did) >= self.settings.mesh.relay_min_trust

    def share_trust(self) -> bool:
        """Tell the transport how far this persona trusts each peer it knows (its DID's trust, at the transport id its
        signed `have` bound) and which are blocked, so that gossipsub's own scoring weighs them: a peer below
        `mesh.relay_min_trust` gets nothing relayed, one below `mesh.min_trust` is not received from, a blocked one
        is cut off (mesh/p2p_sidecar.py). Sent only when it changed."""
        scores: dict[str, float] = {}
        blocked: list[str] = []
        with self.managers() as house:
            for peer, did in sorted(self.peer_dids.items()):
                scores[peer] = round(self._trust(house, did), 3)
                if house.reputation.is_blocked(did):
                    blocked.append(peer)
        self.last_trust, self.trust_dirty = time.monotonic(), False
        if (scores, blocked) == self.shared_trust:
            return False
        try:
            self.transport.trust(scores, blocked)
        except TransportError as exc:
            log.info("mesh: trust not shared with the transport (%s)", exc)
            return False
        self.shared_trust = (scores, blocked)
        self.stats["trust_shared"] += 1
        return True

    def _keep(self, table: dict[str, Any], key: str, value: Any) -> None:
        table[key] = value
        while len(table) > TIMINGS_KEPT:
            table.pop(next(iter(table)))

    def flush(self) -> int:
        """Publish what waits in the outbox, containers addressed to the most trusted peers first (broadcasts keep
        their place after them); one addressed to a peer below `mesh.relay_min_trust` stays queued — nothing is
        relayed to it. Marked sent once handed to the transport."""
        with self.managers() as house:
            queued = house.mesh.outbox()
            addressed = [c for c in queued if c.get("recipient")]
            ranked = house.reputation.rank(sorted({str(c["recipient"]) for c in addressed}))
            order = {did: place for place, did in enumerate(ranked)}
            held = [c for c in addressed if not self._trusted(house, str(c["recipient"]))]
            if held:
                self.stats["held_distrusted"] += len(held)
            queued = sorted((c for c in addressed if c not in held), key=lambda c: order.get(str(c["recipient"]), 0)) \
                + [c for c in queued if not c.get("recipient")]
            sent: list[str] = []
            for container in queued:
                channel = channel_of(container["topic"]) if container["type"] == "cogsync" and container["topic"] \
                    else ALL
                try:
                    self.transport.publish(channel, encode(container))
                except TransportError as exc:
                    log.info("mesh: publish failed (%s); the outbox keeps it", exc)
                    break
                sent.append(container["id"])
                self._keep(self.sent_at, container["id"], time.time())
            house.mesh.mark_sent(sent)
        self.stats["sent"] += len(sent)
        return len(sent)

    def announce(self) -> None:
        """Tell the peers which containers this persona holds (they ask for what they lack)."""
        with self.managers() as house:
            ids = house.mesh.have(HAVE_LIMIT)
            prefer = [did for did in house.reputation.rank(sorted(set(self.peer_dids.values())))
                      if self._trusted(house, did)]
        assert self.identity is not None
        self._publish_sync({"kind": "have", **binding(self.identity, self.transport.peer_id), "ids": ids,
                            "prefer": prefer})
        self.last_have, self.have_dirty, self.peers_at_have = time.monotonic(), False, self.transport.peer_count()

    def _publish_sync(self, message: dict[str, Any]) -> None:
        try:
            self.transport.publish(SYNC, json.dumps(message, separators=(",", ":")).encode())
        except TransportError as exc:
            log.info("mesh: sync message not sent (%s)", exc)

    # ---- arrivals -------------------------------------------------------------------------------------------------
    def _handle_all(self, deliveries: list[Delivery]) -> None:
        replies: list[dict[str, Any]] = []
        self.asked_this_round = set()
        with self.managers() as house:
            for delivery in self._by_trust(house, deliveries):
                try:
                    if delivery.topic == SYNC:
                        replies += self._sync_message(house, delivery)
                    else:
                        outcome = house.mesh.receive(delivery.data, limiter=self.limiter,
                                                     relay=self.peer_dids.get(delivery.peer))
                        self.stats[outcome.status] += 1
                        self._arrived(delivery, outcome, "gossip")
                        self.have_dirty |= outcome.status == "accepted"
                except (ValueError, KeyError, TypeError) as exc:
                    self.stats["bad_sync"] += 1
                    log.info("mesh: a bad message from %s: %s", delivery.peer, exc)
        for reply in replies:
            self._publish_sync(reply)

    def _arrived(self, delivery: Delivery, outcome: Outcome, via: str) -> None:
        if outcome.status == "accepted" and outcome.container_id:
            self._keep(self.arrivals, outcome.container_id, {"via": via, "arrived": delivery.arrived,
                                                              "taken": delivery.taken, "stored": time.time()})
        elif outcome.status == "refused" and outcome.reason not in ("own", "replay"):
            self.trust_dirty = True  # a refusal may have lowered someone's trust: gossipsub hears it at once

    def _sync_kind_and_sender(self, delivery: Delivery) -> tuple[str, str | None]:
        """A sync message's kind and the DID behind it: a `have` names it (`did`), a `want` too (`from`)."""
        try:
            message = json.loads(delivery.data)
        except ValueError:
            return "", None
        if not isinstance(message, dict):
            return "", None
        kind = str(message.get("kind", ""))
        claimed = message.get("did") if kind == "have" else message.get("from") if kind == "want" else None
        return kind, (str(claimed) if claimed else self.peer_dids.get(delivery.peer))

    def _by_trust(self, house: Managers, deliveries: list[Delivery]) -> list[Delivery]:
        """Sync messages from the most trusted peers first — haves before wants (a have proves who asks), wants
        answered most trusted first, and what several peers offer asked of the most trusted one; containers keep
        their arrival order after them."""
        sync = [d for d in deliveries if d.topic == SYNC]
        if len(sync) < 2:
            return deliveries
        keys: dict[int, tuple[bool, float]] = {}
        for d in sync:
            kind, did = self._sync_kind_and_sender(d)
            keys[id(d)] = (kind != "have", -(self._trust(house, did) if did else 0.0))
        return sorted(sync, key=lambda d: keys[id(d)]) + [d for d in deliveries if d.topic != SYNC]

    def _sync_message(self, house: Managers, delivery: Delivery) -> list[dict[str, Any]]:
        message = json.loads(delivery.data)
        kind = message.get("kind")
        if kind == "have":
            did = bound_did(message, delivery.peer)
            if did is None:  # an unsigned or misbound `have`: who it is stays unknown, nothing is sent to it
                self.stats["bad_binding"] += 1
                return []
            if self.peer_dids.get(delivery.peer) != did:
                self.trust_dirty = True  # a peer newly bound: its trust goes to gossipsub …
                self.have_dirty = True  # … and it hears our `have` soon (a newcomer, or one back with a new id)
            self.peer_dids[delivery.peer] = did
            known = house.peers.by_did(did)  # a peer the owner added by its DID: seen now, at this transport id
            if known is not None:
                house.peers.attach_addresses(known.id, p2p_addrs=[f"/p2p/{delivery.peer}"])
                house.peers.seen(known.id)
            elif did != self.did:  # seen on the mesh, not added: the Mesh page offers the owner to add it
                house.peers.discovered_on_mesh(did, delivery.peer)
            if not self._trusted(house, did):  # nothing is asked of (or sent to) a distrusted peer
                self.stats["ignored_distrusted"] += 1
                return []
            missing = [i for i in house.mesh.want([str(i) for i in message.get("ids", [])][:HAVE_LIMIT])
                       if i not in self.asked_this_round]  # already asked of a more trusted peer
            self.asked_this_round |= set(missing)
            if missing:
                self.wanted |= set(missing)
                return [{"kind": "want", "to": did, "from": self.did, "ids": missing}]
            return []
        if kind == "want" and message.get("to") == self.did:
            asker = self.peer_dids.get(delivery.peer)
            if asker is None or asker != message.get("from") or not self._trusted(house, asker):
                self.stats["unanswered_want"] += 1  # an unproven or distrusted asker gets nothing
                return []
            replies: list[dict[str, Any]] = []
            batch: list[dict[str, Any]] = []
            size = 0
            for body in house.mesh.bodies([str(i) for i in message.get("ids", [])]):
                encoded = len(encode(body))
                if batch and size + encoded > BODIES_BYTES:
                    replies.append({"kind": "bodies", "to": message["from"], "containers": batch})
                    batch, size = [], 0
                batch.append(body)
                size += encoded
            if batch:
                replies.append({"kind": "bodies", "to": message["from"], "containers": batch})
            return replies
        if kind == "bodies" and message.get("to") == self.did:
            for body in message.get("containers", []):
                if not isinstance(body, dict) or body.get("id") not in self.wanted:
                    continue  # only what we asked for
                self.wanted.discard(str(body["id"]))
                outcome = house.mesh.receive(encode(body), relay=self.peer_dids.get(delivery.peer))
                self.stats["synced_" + outcome.status] += 1
                self._arrived(delivery, outcome, "sync")
                self.have_dirty |= outcome.status == "accepted"
        return []

    def run(self, stop: Any) -> None:
        """Until `stop.is_set()` (a threading.Event): rounds of poll → apply → flush → sync."""
        while not stop.is_set():
            self.step(0.2)


__all__ = ["ALL", "SYNC", "MeshNode", "channel_of"]
