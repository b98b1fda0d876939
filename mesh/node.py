"""One persona's mesh node: the outbox out, arrivals in, and sync by container ids.

Topics: `anima/all` (every container but CogSync's), `anima/topic/<tag>` (CogSync, one per tag: a persona hears only
the tags it subscribed to), `anima/sync` (have / want / bodies: mesh/sync.py — which containers a peer holds, which it
lacks, and those containers, each still verified on arrival like any other).

Isolated Mode: with no peer reachable the node publishes nothing; the persona keeps thinking and its containers
wait in the outbox (`mesh_containers`, status queued). When a peer is back the outbox is flushed — paced within the
slowest peer's advertised limits (its `have` says how many containers a second it takes from one peer), so that no
receiver refuses them for rate — and a `have` goes out; a peer that lacks some of ours asks for them (`want`), and so
do we: a container lost in transit, or refused for rate all the same, arrives at the next sync round, and one that
arrives twice is applied once (one row per container id).

Whatever arrives is read within bounds and validated whole before anything reads a field (reach/hmp/wire.py,
schema.py, mesh/sync.py); each arrival is handled in a unit of work of its own, so one that still fails is rolled back
alone and counted, and the next is handled as if it had not come. A transport peer that keeps sending what cannot be
read is cut off (gossipsub's blacklist). `mesh/runner.py` restarts the rounds, with backoff, if anything still
escapes them."""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import rfc8785

from managers import ManagerDeps, ManagerFactory, Managers
from managers.mesh import Outcome, StoreQuota
from memory import Database
from mesh.sync import BODIES_BYTES, HAVE_LIMIT, Bodies, Have, Limits, Want, read_sync
from mesh.transport import Delivery, Transport, TransportError
from persona.settings import Settings
from reach.hmp.containers import encode
from reach.hmp.identity import Identity, verify
from reach.hmp.limits import Pace, TokenBuckets
from reach.hmp.wire import WireError

log = logging.getLogger(__name__)
ALL = "anima/all"
SYNC = "anima/sync"
TRUST_EVERY_S = 2.0  # how often the peers' trust is shared with the transport's gossipsub scoring (and at once
# after a refusal or a new peer)
QUIET_HAVE_FACTOR = 6  # with nothing new and no new peer, a `have` goes out every 6 × mesh.sync_every_s (it is a
# broadcast every peer's gossipsub verifies and relays: at ten peers a `have` from each every 2 s took py-libp2p's
# latency from 0.5 s to 6.7 s on a loaded machine — bench/mesh.py)
TIMINGS_KEPT = 200  # containers whose send / arrival moments are kept for the bench (mesh.__main__ --state)
JUNK_RATE = 0.2  # what cannot be read, per transport peer a second, after `mesh.junk_burst` of it: then cut off
JUNK = frozenset({"malformed", "oversized", "forged", "unknown_type"})  # refusals no honest peer's door causes
NOT_WANTED_KEPT = 20_000  # ids refused for good, not asked for again by sync (bounded)
EVENTS_PER_ROUND = 40  # events journaled per round at most (the rest are counted in one)
JOURNAL_KEEP = 5_000
REFUSALS_KEPT, TRIM_EVERY = 20_000, 1_000  # refusals kept in the database; trimmed after this many more
MIN_PACE_RATE, MIN_PACE_BURST = 1.0, 5  # a peer advertising less is paced at this (no peer can stall the others)
TRANSPORT_RETRY_FIRST_S, TRANSPORT_RETRY_MAX_S = 1.0, 60.0  # a libp2p node that exited is started again


BINDING_SKEW_MS = 10 * 60 * 1000  # a `have` older or newer than this is not taken as proof of who a peer is


def channel_of(tag: str) -> str:
    return f"anima/topic/{tag}"


def binding(identity: Identity, peer_id: str, now_ms: int | None = None) -> dict[str, Any]:
    """A signed statement "this transport peer is this DID", carried by every `have`: the DID's key signs the
    canonical {did, peer, ts}. The receiver checks it against the peer the transport says published it (gossipsub
    signs its messages with the peer's own key), so a peer cannot pass itself off as another DID — what no container
    signature proves (forged, replayed, oversized) is then held against the right peer."""
    moment = int(time.time() * 1000) if now_ms is None else now_ms
    return {
        "did": identity.did,
        "peer": peer_id,
        "ts": moment,
        "sig": identity.sign(_binding_bytes(identity.did, peer_id, moment)).hex(),
    }


def _binding_bytes(did: str, peer_id: str, moment: int) -> bytes:
    return rfc8785.dumps({"did": did, "peer": peer_id, "ts": moment})


def bound_did(message: dict[str, Any], peer_id: str, now_ms: int | None = None) -> str | None:
    """The DID a `have` proves for `peer_id`, or None."""
    did, peer, moment, sig = message.get("did"), message.get("peer"), message.get("ts"), message.get("sig")
    if not (isinstance(did, str) and isinstance(peer, str) and type(moment) is int and isinstance(sig, str)):
        return None
    try:
        signature = bytes.fromhex(sig)
    except ValueError:
        return None
    now = int(time.time() * 1000) if now_ms is None else now_ms
    if peer != peer_id or abs(now - moment) > BINDING_SKEW_MS:
        return None
    return did if verify(did, signature, _binding_bytes(did, peer, moment)) else None


def short(did: str) -> str:
    """A DID as a line shows it: its method and first and last characters."""
    return did if len(did) <= 28 else f"{did[:16]}…{did[-6:]}"


def describe(event: dict[str, Any]) -> str:
    """One line for the terminal (python -m mesh) of an event the node saw."""
    kind = event.get("event")
    if kind == "met":
        return f"mesh: met {event['did']} at libp2p peer {event['peer']} (its signed `have` proves the key)"
    if kind == "received":
        line = (
            f"mesh: ← received a signed {event['type']} {str(event['id'])[:19]}… from {event['label']} "
            f"(via {event['via']}): signature verified (Ed25519 over RFC 8785), accepted"
        )
        if event.get("detail"):
            line += f"; it listens to: {event['detail']}"
        return line + (f" → {event['applied']}" if event.get("applied") not in (None, event["type"]) else "")
    if kind == "sent":
        to = f" to {short(str(event['to']))}" if event.get("to") else " to the mesh"
        return f"mesh: → sent a signed {event['type']} {str(event['id'])[:19]}…{to}"
    if kind == "refused":
        return (
            f"mesh: ✗ refused a container from {short(str(event.get('sender') or 'an unknown peer'))}: "
            f"{event['reason']} {str(event.get('detail') or '')[:120]}"
        ).rstrip()
    if kind == "cut_off":
        return f"mesh: ✗ cut off libp2p peer {event['peer']}: it keeps sending what cannot be read"
    if kind == "more":
        return f"mesh: … and {event['count']} more events"
    return f"mesh: {json.dumps(event, default=str)[:200]}"


class MeshNode:
    def __init__(
        self,
        database: Database,
        settings: Settings,
        transport: Transport,
        *,
        identity: Identity | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.database, self.settings, self.transport = database, settings, transport
        self.factory = ManagerFactory(database, ManagerDeps(settings=settings))  # this door's managers, built once
        self.identity = identity
        self.on_event = on_event  # each event as it happens (python -m mesh prints a line)
        mesh = settings.mesh
        self.limiter = TokenBuckets(rate=mesh.rate_per_s, burst=float(mesh.burst))
        self.pace = Pace(rate=mesh.rate_per_s, burst=float(mesh.burst))
        self.junk = TokenBuckets(rate=JUNK_RATE, burst=float(mesh.junk_burst))
        self.cut_off: set[str] = set()  # transport peers cut off for junk (gossipsub's blacklist)
        self.quota: StoreQuota | None = None
        self.peer_dids: dict[str, str] = {}  # transport peer id -> DID (from their `have`)
        self.peer_limits: dict[str, Limits] = {}  # DID -> what it says it takes from one peer
        self.channels: set[str] = set()
        self.wanted: set[str] = set()  # ids we asked for: only those are taken from a `bodies`
        self.not_wanted: dict[str, None] = {}  # ids refused for good: not asked for again
        self.asked_this_round: set[str] = set()  # ids asked of some peer while handling one batch
        self.isolated = True
        self.connectivity_recorded = False  # whether the persona was told this door's Isolated Mode yet
        self.said_hello = False
        self.last_have = 0.0
        self.have_dirty = True  # something sent or accepted since the last `have`
        self.peers_at_have = 0  # how many peers the transport reached at the last `have`
        self.last_channels = 0.0
        self.last_trust = 0.0
        self.trust_dirty = False  # a refusal or a new peer since the trust was last shared
        self.shared_trust: tuple[dict[str, float], list[str]] | None = None
        self.stats: Counter[str] = Counter()
        self.transport_retry_s, self.transport_retry_at = TRANSPORT_RETRY_FIRST_S, 0.0
        self.events: list[dict[str, Any]] = []  # this round's, journaled at its end
        self.journaled = 0
        self.refused_since_trim = 0
        # unix seconds, by container id: when this door handed it to the transport (`sent`), and for what arrived
        # when the libp2p node took it off the wire, when this door read it, and when it was a row here
        self.sent_at: dict[str, float] = {}
        self.arrivals: dict[str, dict[str, float | str]] = {}

    @contextmanager
    def managers(self) -> Iterator[Managers]:
        with self.factory.unit(history="mesh") as house:
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
            self.quota = house.mesh.quota()
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

    def _event(self, event: str, **data: Any) -> None:
        item = {"event": event, **data}
        if self.on_event is not None:
            self.on_event(item)
        self.events.append(item)

    def _revive(self) -> bool:
        """The libp2p node exited (a crash, a kill): start it again — at most every `transport_retry_s`, doubling to
        TRANSPORT_RETRY_MAX_S while it fails — and join the channels again. True when it runs."""
        now = time.monotonic()
        if now < self.transport_retry_at:
            return False
        log.warning("mesh: the libp2p node is gone; starting it again")
        self.stats["transport_restarts"] += 1
        try:
            self.transport.stop()
            self.transport.start()
        except TransportError as exc:
            self.transport_retry_s = min(TRANSPORT_RETRY_MAX_S, self.transport_retry_s * 2)
            self.transport_retry_at = now + self.transport_retry_s
            log.warning("mesh: the libp2p node did not start (%s); again in %.0f s", exc, self.transport_retry_s)
            return False
        self.transport_retry_s = TRANSPORT_RETRY_FIRST_S
        self.channels.clear()
        for channel in (ALL, SYNC):
            self._join(channel)
        self._refresh_channels()
        self.peer_dids.clear()  # their `have`s bind them again, and gossipsub hears their trust again
        self.shared_trust = None
        self._set_isolated(True)
        return True

    # ---- one round ----------------------------------------------------------------------------------------------
    def step(self, timeout: float = 0.2) -> None:
        if not self.transport.alive() and not self._revive():
            time.sleep(timeout)
            return
        deliveries = self.transport.poll(timeout)
        if deliveries:
            self._handle_all(deliveries)
        connected = self.transport.peer_count() > 0
        now = time.monotonic()
        if connected:
            if now - self.last_channels >= 5.0:  # a topic subscribed since (mesh.subscribe) joins its channel
                self._refresh_channels()
                self.last_channels = now
            if self.peer_dids and not self.said_hello:  # the first peer met: who this persona is, signed
                with self.managers() as house:
                    house.mesh.hello()
                self.said_hello = True
            if self.peer_dids and self.flush():  # once a peer's `have` said what it takes (the pace follows it)
                self.have_dirty = True
            if self.isolated or self._have_due(now):
                self.announce()
            if (self.peer_dids or self.cut_off) and (self.trust_dirty or now - self.last_trust >= TRUST_EVERY_S):
                self.share_trust()
        elif not self.isolated:
            log.info("mesh: no peer reachable — isolated mode (the outbox keeps what is sent)")
        self._set_isolated(not connected)
        self._journal()

    def _set_isolated(self, isolated: bool) -> None:
        """Isolated Mode begins or ends: the persona is told (managers/mesh.py `record_connectivity`: its prompt says
        so, and the decisions it took alone are put up for review when a peer is back)."""
        if isolated == self.isolated and self.connectivity_recorded:
            return
        with self.managers() as house:
            house.mesh.record_connectivity(isolated=isolated, peers=self.transport.peer_count())
        self.isolated, self.connectivity_recorded = isolated, True

    def run(self, stop: Any, each_round: Callable[[], None] | None = None) -> None:
        """Until `stop.is_set()` (a threading.Event): rounds of poll → apply → flush → sync (mesh/runner.py
        supervises this)."""
        while not stop.is_set():
            self.step(0.2)
            if each_round is not None:
                each_round()

    def _journal(self) -> None:
        """This round's events into the live journal (the Mesh page streams them); never fatal to the round."""
        events, self.events = self.events, []
        if not events:
            return
        if len(events) > EVENTS_PER_ROUND:
            events = [*events[:EVENTS_PER_ROUND], {"event": "more", "count": len(events) - EVENTS_PER_ROUND}]
        try:
            with self.managers() as house:
                self.journaled += house.mesh.journal(events)
                if self.journaled >= 200:
                    house.mesh.trim_journal(JOURNAL_KEEP)
                    self.journaled = 0
                if self.refused_since_trim >= TRIM_EVERY:
                    house.mesh.trim_refusals(REFUSALS_KEPT)
                    self.refused_since_trim = 0
        except Exception as exc:  # noqa: BLE001 — the page's journal must never stop the door
            log.info("mesh: %d event(s) not journaled (%s)", len(events), exc)

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
        — or a transport peer cut off for junk — is cut off (mesh/p2p_sidecar.py). Sent only when it changed."""
        scores: dict[str, float] = {}
        blocked: set[str] = set(self.cut_off)
        with self.managers() as house:
            for peer, did in sorted(self.peer_dids.items()):
                scores[peer] = round(self._trust(house, did), 3)
                if house.reputation.is_blocked(did):
                    blocked.add(peer)
        self.last_trust, self.trust_dirty = time.monotonic(), False
        shared = (scores, sorted(blocked))
        if shared == self.shared_trust:
            return False
        try:
            self.transport.trust(*shared)
        except TransportError as exc:
            log.info("mesh: trust not shared with the transport (%s)", exc)
            return False
        self.shared_trust = shared
        self.stats["trust_shared"] += 1
        return True

    def _keep(self, table: dict[str, Any], key: str, value: Any) -> None:
        table[key] = value
        while len(table) > TIMINGS_KEPT:
            table.pop(next(iter(table)))

    # ---- out ----------------------------------------------------------------------------------------------------
    def pace_limits(self) -> tuple[float, float]:
        """The rate and burst this door publishes at: the lowest any peer it knows advertised (its own settings for a
        peer that did not say; never below MIN_PACE_*, so no peer can stall the others)."""
        mesh = self.settings.mesh
        known = [self.peer_limits.get(did) for did in set(self.peer_dids.values())]
        rates = [limits.rate if limits else mesh.rate_per_s for limits in known] or [mesh.rate_per_s]
        bursts = [limits.burst if limits else mesh.burst for limits in known] or [mesh.burst]
        return max(MIN_PACE_RATE, min(rates)), float(max(MIN_PACE_BURST, min(bursts)))

    def flush(self) -> int:
        """Publish what waits in the outbox, as many as the pace allows now (the rest in the next rounds): containers
        addressed to the most trusted peers first (broadcasts keep their place after them); one addressed to a peer
        below `mesh.relay_min_trust` stays queued — nothing is relayed to it. Marked sent once handed to the
        transport; the database is not held while the transport takes them."""
        self.pace.limit(*self.pace_limits())
        budget = self.pace.available()
        if budget <= 0:
            self.stats["paced"] += 1
            return 0
        with self.managers() as house:
            queued = house.mesh.outbox()
            if not queued:
                return 0
            addressed = [c for c in queued if c.get("recipient")]
            ranked = house.reputation.rank(sorted({str(c["recipient"]) for c in addressed}))
            order = {did: place for place, did in enumerate(ranked)}
            held = [c for c in addressed if not self._trusted(house, str(c["recipient"]))]
            if held:
                self.stats["held_distrusted"] += len(held)
            queued = sorted(
                (c for c in addressed if c not in held), key=lambda c: order.get(str(c["recipient"]), 0)
            ) + [c for c in queued if not c.get("recipient")]
        sent: list[str] = []
        for container in queued[:budget]:
            channel = channel_of(container["topic"]) if container["type"] == "cogsync" and container["topic"] else ALL
            try:
                self.transport.publish(channel, encode(container))
            except TransportError as exc:
                log.info("mesh: publish failed (%s); the outbox keeps it", exc)
                break
            self.pace.take()
            sent.append(container["id"])
            self._keep(self.sent_at, container["id"], time.time())
            self._event("sent", type=container["type"], id=container["id"], to=container.get("recipient"))
        if sent:
            with self.managers() as house:
                house.mesh.mark_sent(sent)
        self.stats["sent"] += len(sent)
        if len(queued) > len(sent):
            self.stats["paced"] += 1
        return len(sent)

    def announce(self) -> None:
        """Tell the peers which containers this persona holds (they ask for what they lack) and how many a second it
        takes from one peer (they pace what they publish to it)."""
        with self.managers() as house:
            ids = house.mesh.have(HAVE_LIMIT)
            prefer = [
                did for did in house.reputation.rank(sorted(set(self.peer_dids.values()))) if self._trusted(house, did)
            ]
        assert self.identity is not None
        mesh = self.settings.mesh
        self._publish_sync(
            {
                "kind": "have",
                **binding(self.identity, self.transport.peer_id),
                "ids": ids,
                "prefer": prefer,
                "limits": {"rate": float(mesh.rate_per_s), "burst": int(mesh.burst)},
            }
        )
        self.last_have, self.have_dirty, self.peers_at_have = time.monotonic(), False, self.transport.peer_count()

    def _publish_sync(self, message: dict[str, Any]) -> None:
        try:
            self.transport.publish(SYNC, json.dumps(message, separators=(",", ":")).encode())
        except TransportError as exc:
            log.info("mesh: sync message not sent (%s)", exc)

    # ---- arrivals -------------------------------------------------------------------------------------------------
    def _handle_all(self, deliveries: list[Delivery]) -> None:
        """Each arrival in a unit of work of its own: whatever one raises is rolled back alone, counted and logged in
        one line, and the next is handled. (A unit each rather than savepoints in one: on SQLite a savepoint opens a
        deferred transaction whose snapshot may be stale by its first write — "database is locked" at once, whatever
        the busy timeout — while a unit's first write waits for the lock; and the write lock is held only as long
        as one arrival takes, so the tick's writes never wait long.)"""
        replies: list[dict[str, Any]] = []
        self.asked_this_round = set()
        read: list[tuple[Delivery, Have | Want | Bodies | WireError | None]] = []
        for delivery in deliveries:
            read.append((delivery, self._read_sync(delivery) if delivery.topic == SYNC else None))
        for delivery, message in self._by_trust(read):
            if delivery.peer in self.cut_off:  # (gossipsub drops it too, once the blacklist is shared)
                self.stats["dropped_cut_off"] += 1
                continue
            if isinstance(message, Bodies):
                if message.to == self.did:
                    self._bodies(delivery, message)
                continue
            replies += self._isolated(delivery, partial(self._one, delivery=delivery, message=message))
        for reply in replies:
            self._publish_sync(reply)

    def _isolated(self, delivery: Delivery, work: Callable[[Managers], list[dict[str, Any]]]) -> list[dict[str, Any]]:
        """`work` in a unit of its own; what it raises is rolled back, counted and logged in one line."""
        events = len(self.events)
        try:
            with self.managers() as house:
                return work(house)
        except Exception as exc:  # noqa: BLE001 — one arrival never stops the door
            del self.events[events:]  # what it did is undone: so is what it said
            self.stats["door_errors"] += 1
            log.warning(
                "mesh: an arrival from %s failed and was set aside (%s: %s)",
                delivery.peer[:60],
                type(exc).__name__,
                str(exc)[:200],
            )
            return []

    def _read_sync(self, delivery: Delivery) -> Have | Want | Bodies | WireError:
        try:
            return read_sync(delivery.data)
        except WireError as exc:
            return exc

    def _one(
        self, house: Managers, delivery: Delivery, message: Have | Want | WireError | None
    ) -> list[dict[str, Any]]:
        if isinstance(message, WireError):
            self.stats["bad_sync"] += 1
            self._junk(delivery.peer, f"a sync message that cannot be read ({message})")
            return []
        if isinstance(message, Have):
            return self._have(house, delivery, message)
        if isinstance(message, Want):
            return self._want(house, delivery, message) if message.to == self.did else []
        outcome = house.mesh.receive(
            delivery.data, limiter=self.limiter, relay=self.peer_dids.get(delivery.peer), quota=self.quota
        )
        self.stats[outcome.status] += 1
        self._arrived(house, delivery, outcome, "gossip")
        if outcome.status == "refused" and outcome.reason in JUNK:
            self._junk(delivery.peer, f"{outcome.reason}: {outcome.detail}")
        self.have_dirty |= outcome.status == "accepted"
        return []

    def _junk(self, peer: str, why: str) -> None:
        """What a transport peer sent cannot be read: past `mesh.junk_burst` of it (refilled at JUNK_RATE a second) it
        is cut off — put on gossipsub's blacklist, so nothing more of it reaches this door."""
        if self.junk.allow(peer):
            log.info("mesh: %s from %s", why[:200], peer[:60])
            return
        if peer not in self.cut_off:
            self.cut_off.add(peer)
            self.trust_dirty = True
            self.stats["cut_off"] += 1
            log.warning("mesh: libp2p peer %s cut off: it keeps sending what cannot be read", peer[:60])
            self._event("cut_off", peer=peer)

    def _arrived(self, house: Managers, delivery: Delivery, outcome: Outcome, via: str) -> None:
        if outcome.status == "accepted" and outcome.container_id:
            self._keep(
                self.arrivals,
                outcome.container_id,
                {"via": via, "arrived": delivery.arrived, "taken": delivery.taken, "stored": time.time()},
            )
            label = house.mesh.peer_label(outcome.sender) if outcome.sender else ""
            self._event(
                "received",
                type=outcome.type,
                id=outcome.container_id,
                sender=outcome.sender,
                label=label,
                via=via,
                applied=outcome.applied,
                detail=outcome.detail,
                verified=True,
            )
        elif outcome.status == "refused":
            self.refused_since_trim += outcome.reason != "own"
            if outcome.final and outcome.container_id:
                self.not_wanted[outcome.container_id] = None
                while len(self.not_wanted) > NOT_WANTED_KEPT:
                    self.not_wanted.pop(next(iter(self.not_wanted)))
            if outcome.reason not in ("own", "replay"):
                self.trust_dirty = True  # a refusal may have lowered someone's trust: gossipsub hears it at once
                self._event(
                    "refused",
                    reason=outcome.reason,
                    sender=outcome.sender,
                    id=outcome.container_id,
                    detail=outcome.detail[:160],
                )

    def _by_trust(self, read: list[tuple[Delivery, Any]]) -> list[tuple[Delivery, Any]]:
        """Sync messages from the most trusted peers first — haves before wants (a have proves who asks), wants
        answered most trusted first, and what several peers offer asked of the most trusted one; containers keep
        their arrival order after them."""
        sync = [(d, m) for d, m in read if isinstance(m, (Have, Want, Bodies))]
        if len(sync) < 2:
            return read
        keys: dict[int, tuple[bool, float]] = {}
        with self.managers() as house:  # reads only: it commits nothing
            for delivery, message in sync:
                claimed = (
                    message.did
                    if isinstance(message, Have)
                    else message.sender
                    if isinstance(message, Want)
                    else self.peer_dids.get(delivery.peer)
                )
                keys[id(delivery)] = (not isinstance(message, Have), -(self._trust(house, claimed) if claimed else 0.0))
        return sorted(sync, key=lambda item: keys[id(item[0])]) + [
            (d, m) for d, m in read if not isinstance(m, (Have, Want, Bodies))
        ]

    def _have(self, house: Managers, delivery: Delivery, message: Have) -> list[dict[str, Any]]:
        did = bound_did({"did": message.did, "peer": message.peer, "ts": message.ts, "sig": message.sig}, delivery.peer)
        if did is None:  # an unsigned or misbound `have`: who it is stays unknown, nothing is sent to it
            self.stats["bad_binding"] += 1
            return []
        if self.peer_dids.get(delivery.peer) != did:
            self.trust_dirty = True  # a peer newly bound: its trust goes to gossipsub …
            self.have_dirty = True  # … and it hears our `have` soon (a newcomer, or one back with a new id)
            if did not in self.peer_dids.values():
                self._event("met", did=did, peer=delivery.peer, label=house.mesh.peer_label(did))
        self.peer_dids[delivery.peer] = did
        if message.limits is not None:
            self.peer_limits[did] = message.limits
        if did != self.did:  # met: a peer known by its DID is seen at this transport id, one not known becomes a peer
            house.peers.met(did, transport=delivery.peer)  # met (the Mesh page offers the owner to add it by name)
        if not self._trusted(house, did):  # nothing is asked of (or sent to) a distrusted peer
            self.stats["ignored_distrusted"] += 1
            return []
        missing = [
            i for i in house.mesh.want(message.ids) if i not in self.asked_this_round and i not in self.not_wanted
        ]  # asked of a more trusted peer
        self.asked_this_round |= set(missing)
        if missing:
            self.wanted |= set(missing)
            return [{"kind": "want", "to": did, "from": self.did, "ids": missing}]
        return []

    def _want(self, house: Managers, delivery: Delivery, message: Want) -> list[dict[str, Any]]:
        asker = self.peer_dids.get(delivery.peer)
        if asker is None or asker != message.sender or not self._trusted(house, asker):
            self.stats["unanswered_want"] += 1  # an unproven or distrusted asker gets nothing
            return []
        replies: list[dict[str, Any]] = []
        batch: list[dict[str, Any]] = []
        size = 0
        for body in house.mesh.bodies(message.ids):
            encoded = len(encode(body))
            if batch and size + encoded > BODIES_BYTES:
                replies.append({"kind": "bodies", "to": message.sender, "containers": batch})
                batch, size = [], 0
            batch.append(body)
            size += encoded
        if batch:
            replies.append({"kind": "bodies", "to": message.sender, "containers": batch})
        return replies

    def _bodies(self, delivery: Delivery, message: Bodies) -> None:
        """The containers we asked for, each verified and kept in a unit of its own."""
        for body in message.containers:
            cid = body.get("id")
            if not isinstance(cid, str) or cid not in self.wanted:
                continue  # only what we asked for
            self.wanted.discard(cid)
            self._isolated(delivery, partial(self._body, delivery=delivery, body=body))

    def _body(self, house: Managers, delivery: Delivery, body: dict[str, Any]) -> list[dict[str, Any]]:
        if house.mesh.holds(str(body["id"])):  # it came by gossip meanwhile: no replay of the peer's doing, we asked
            self.stats["synced_duplicate"] += 1
            return []
        outcome = house.mesh.receive(body, relay=self.peer_dids.get(delivery.peer), quota=self.quota)
        self.stats["synced_" + outcome.status] += 1
        self._arrived(house, delivery, outcome, "sync")
        self.have_dirty |= outcome.status == "accepted"
        return []


__all__ = ["ALL", "SYNC", "MeshNode", "binding", "bound_did", "channel_of", "describe"]
