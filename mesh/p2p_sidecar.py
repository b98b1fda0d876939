"""The libp2p node of one persona, run by the mesh door as a child process in its own venv (py-libp2p is trio-based
and pins its own dependencies: `make mesh` builds ~/.cache/anima/libp2p with `libp2p==0.8.1`; the persona's venv
never imports it). It speaks JSON lines: commands on stdin, events on stdout. It imports only the standard library
and libp2p — no anima module.

    in:  {"op": "subscribe", "topic": t}  {"op": "publish", "topic": t, "data": <base64>}
         {"op": "trust", "scores": {<peer id>: -1…+1}, "blocked": [<peer id>, …]}  {"op": "stop"}
    out: {"event": "ready", "peer_id": …, "addrs": [...]}  {"event": "message", "topic": t, "from": <peer id>,
         "data": <base64>, "at": <unix s when this node took it>}  {"event": "peers", "ids": [...]}
         {"event": "trusted", "scores": n, "blocked": n} (a trust op applied)
         {"event": "dropped", "counts": {"graylisted": n, "blacklisted": n, "overflow": n}}  {"event": "error",
         "detail": …}

Security: Noise only (no plaintext, no secio). Pubsub: gossipsub (/meshsub/1.1.0). Discovery: the bootstrap
multiaddrs, then (unless --no-dht) the Kademlia DHT — each node provides the key of every interest
("anima:<interest>") and connects to the providers it finds, so peers that only know the bootstrap find each other;
with --mdns also the peers py-libp2p's mDNS (zeroconf) finds on the LAN.

Trust inside gossipsub: the door sends the persona's trust in each peer it knows (its DID's trust, mapped to the
peer's libp2p id by the signed `have` binding) and its blocklist. py-libp2p 0.8.1's own peer scoring takes the trust as
the application-specific score (P6, weight 1; every other weight is 0, so a peer's score IS its trust):
- below `--relay-min-trust` (gossipsub's graylist threshold) a peer gets nothing from this node — py-libp2p leaves it
  out of the mesh, refuses its GRAFT and sends it no message (`_get_peers_to_send`);
- below `--min-trust` what it publishes or forwards is dropped on arrival: neither delivered to the door nor relayed.
  py-libp2p 0.8.1 checks the graylist only on sending and on GRAFT (its publish gate on arrival leaves the
  application score out for a one-topic message), so `TrustingPubsub.push_msg` adds the gossipsub v1.1 rule "ignore
  RPCs from a graylisted peer" — for the forwarder and, since our trust is in authors, for the message's origin;
- a blocked peer goes on py-libp2p's pubsub blacklist: its stream is torn down, its new streams refused, and every
  message it forwards or originated dropped.
Two defaults of 0.8.1 are turned off or raised here: adaptive gossip (its code stretches the 1 s heartbeat to 30-60 s
whenever the mesh is below degree 6, i.e. in any mesh of fewer than seven peers, so new peers may wait that long to be
grafted; bench/mesh.py --adaptive-gossip has shown no consistent effect either way) and the 10 messages/s per peer and
topic spam cap (a relay of ten peers'
`have`s passes it; our own token bucket per DID limits floods, managers/mesh.py)."""

from __future__ import annotations

import argparse
import base64
import functools
import hashlib
import json
import logging
import math
import secrets
import sys
import threading
import time
from collections import Counter
from contextlib import nullcontext
from typing import Any

import multiaddr
import trio
from libp2p import new_host
from libp2p.crypto.ed25519 import create_new_key_pair
from libp2p.crypto.x25519 import create_new_key_pair as create_new_x25519_key_pair
from libp2p.custom_types import TProtocol
from libp2p.discovery.events.peerDiscovery import peerDiscovery
from libp2p.kad_dht.kad_dht import DHTMode, KadDHT
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo, info_from_p2p_addr
from libp2p.pubsub import pubsub as pubsub_module
from libp2p.pubsub.gossipsub import GossipSub
from libp2p.pubsub.pb import rpc_pb2
from libp2p.pubsub.pubsub import Pubsub
from libp2p.pubsub.score import ScoreParams
from libp2p.security.noise.transport import PROTOCOL_ID as NOISE_PROTOCOL_ID
from libp2p.security.noise.transport import Transport as NoiseTransport
from libp2p.tools.anyio_service import background_trio_service

# py-libp2p 0.8.1 queues 32 messages per subscription and drops the rest silently: a burst (a flood, a sync's
# bodies) on a loaded machine lost messages before the door saw them. Its module constant is the only knob.
pubsub_module.SUBSCRIPTION_CHANNEL_SIZE = 4096
GOSSIPSUB = TProtocol("/meshsub/1.1.0")
GOSSIPSUB_10 = TProtocol("/meshsub/1.0.0")


def emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def interest_key(interest: str) -> str:
    return hashlib.sha256(f"anima:{interest}".encode()).hexdigest()


class Trust:
    """The door's trust in each peer (by libp2p id), read by py-libp2p's scorer as the application-specific score."""

    def __init__(self) -> None:
        self.scores: dict[ID, float] = {}
        self.dropped: Counter[str] = Counter()

    def score(self, peer: ID) -> float:
        return self.scores.get(peer, 0.0)


class TrustingPubsub(Pubsub):  # type: ignore[misc]  # libp2p ships no types
    """Pubsub that ignores what a graylisted peer publishes or forwards (gossipsub v1.1's graylist on arrival)."""

    trust: Trust
    min_trust: float

    async def push_msg(self, msg_forwarder: ID, msg: rpc_pb2.Message) -> None:
        if self.is_peer_blacklisted(msg_forwarder) or self.is_peer_blacklisted(ID(msg.from_id)):
            self.trust.dropped["blacklisted"] += 1
            return
        if min(self.trust.score(msg_forwarder), self.trust.score(ID(msg.from_id))) < self.min_trust:
            self.trust.dropped["graylisted"] += 1
            return
        await super().push_msg(msg_forwarder, msg)

    def notify_subscriptions(self, publish_message: rpc_pb2.Message) -> None:
        """py-libp2p's, counting what it drops silently: a message for a subscription whose queue is full."""
        for topic in publish_message.topicIDs:
            if topic in self.topic_ids:
                try:
                    self.subscribed_topics_send[topic].send_nowait(publish_message)
                except trio.WouldBlock:
                    self.trust.dropped["overflow"] += 1


def apply_trust(pubsub: TrustingPubsub, command: dict[str, Any]) -> None:
    """The door's {"scores": {peer id: trust}, "blocked": [peer id]}: the scorer's P6 input and the blacklist."""
    scores: dict[ID, float] = {}
    for peer, value in dict(command.get("scores") or {}).items():
        scores[ID.from_base58(str(peer))] = max(-1.0, min(1.0, float(value)))
    pubsub.trust.scores = scores
    blocked = {ID.from_base58(str(peer)) for peer in command.get("blocked") or []}
    for peer in pubsub.get_blacklisted_peers() - blocked:
        pubsub.remove_from_blacklist(peer)
    for peer in blocked - pubsub.get_blacklisted_peers():
        pubsub.add_to_blacklist(peer)


async def main(
    listen: str,
    bootstrap: list[str],
    interests: list[str],
    *,
    dht_on: bool = True,
    mdns: bool = False,
    min_trust: float = -0.5,
    relay_min_trust: float = -0.2,
    adaptive_gossip: bool = False,
) -> None:
    key_pair = create_new_key_pair(secrets.token_bytes(32))
    noise = NoiseTransport(key_pair, noise_privkey=create_new_x25519_key_pair().private_key)
    host = new_host(key_pair=key_pair, sec_opt={NOISE_PROTOCOL_ID: noise}, enable_mDNS=mdns)
    trust = Trust()
    score_params = ScoreParams(
        app_specific_score_fn=trust.score,
        p6_appl_slack_weight=1.0,
        graylist_threshold=relay_min_trust,
        publish_threshold=-math.inf,
        gossip_threshold=-math.inf,
        accept_px_threshold=-math.inf,
    )
    gossipsub = GossipSub(
        protocols=[GOSSIPSUB, GOSSIPSUB_10],
        degree=6,
        degree_low=4,
        degree_high=12,
        time_to_live=60,
        gossip_window=3,
        gossip_history=5,
        heartbeat_initial_delay=0.1,
        heartbeat_interval=1,
        score_params=score_params,
        adaptive_gossip_enabled=adaptive_gossip,
        max_messages_per_topic_per_second=1000.0,
    )
    pubsub = TrustingPubsub(host, gossipsub)
    pubsub.trust, pubsub.min_trust = trust, min_trust
    subscribed: set[str] = set()
    stop = trio.Event()
    found_on_lan: list[PeerInfo] = []  # mDNS answers arrive on zeroconf's thread; the discovery round dials them
    found_lock = threading.Lock()

    def on_lan(info: PeerInfo) -> None:
        with found_lock:
            found_on_lan.append(info)

    if mdns:
        peerDiscovery.register_peer_discovered_handler(on_lan)

    async with host.run(listen_addrs=[multiaddr.Multiaddr(listen)]), trio.open_nursery() as nursery:
        async with background_trio_service(pubsub), background_trio_service(gossipsub):
            await pubsub.wait_until_ready()
            for address in bootstrap:
                try:
                    await host.connect(info_from_p2p_addr(multiaddr.Multiaddr(address)))
                except Exception as exc:  # noqa: BLE001 — a bootstrap peer that is down: say so, go on
                    emit({"event": "error", "detail": f"bootstrap {address}: {exc}"})
            dht = KadDHT(host, DHTMode.SERVER)
            for peer_id in host.get_connected_peers():
                await dht.routing_table.add_peer(peer_id)
            async with background_trio_service(dht) if dht_on else nullcontext():
                peer_id = host.get_id().to_string()
                emit(
                    {
                        "event": "ready",
                        "peer_id": peer_id,
                        "addrs": [f"{a}/p2p/{peer_id}" if "/p2p/" not in str(a) else str(a) for a in host.get_addrs()],
                    }
                )

                async def receive(topic: str) -> None:
                    subscription = await pubsub.subscribe(topic)
                    while True:
                        message = await subscription.get()
                        sender = base58_id(message.from_id)
                        if sender == peer_id:
                            continue
                        emit(
                            {
                                "event": "message",
                                "topic": topic,
                                "from": sender,
                                "at": time.time(),
                                "data": base64.b64encode(message.data).decode("ascii"),
                            }
                        )

                async def discover() -> None:
                    """Provide every interest in the DHT and connect to the providers found (peers of the same
                    interests); report who is connected. Every second at first, then every 15 s once connected (a
                    DHT round is not free: at ten peers on two cores, once a second took the CPU gossip needed)."""
                    reported: list[str] = []
                    dropped: dict[str, int] = {}
                    rounds = 0
                    while True:
                        with found_lock:
                            lan, found_on_lan[:] = list(found_on_lan), []
                        for info in lan:
                            if info.peer_id != host.get_id() and info.peer_id not in host.get_connected_peers():
                                try:
                                    await host.connect(info)
                                except Exception as exc:  # noqa: BLE001 — a LAN peer gone since
                                    emit({"event": "error", "detail": f"mdns {info.peer_id}: {exc}"})
                        if dht_on:
                            for peer in host.get_connected_peers():
                                await dht.routing_table.add_peer(peer)
                        if dht_on and (rounds % 15 == 0 or not host.get_connected_peers() or rounds < 5):
                            for interest in interests:
                                key = interest_key(interest)
                                try:
                                    await dht.provide(key)
                                    for info in await dht.find_providers(key, 20):
                                        if (
                                            info.peer_id != host.get_id()
                                            and info.peer_id not in host.get_connected_peers()
                                        ):
                                            try:
                                                await host.connect(info)
                                            except Exception:  # noqa: BLE001 — an unreachable provider
                                                pass
                                except Exception as exc:  # noqa: BLE001
                                    emit({"event": "error", "detail": f"dht {interest}: {exc}"})
                        ids = sorted(p.to_string() for p in host.get_connected_peers())
                        if ids != reported:
                            reported = ids
                            emit({"event": "peers", "ids": ids})
                        if dict(trust.dropped) != dropped:
                            dropped = dict(trust.dropped)
                            emit({"event": "dropped", "counts": dropped})
                        rounds += 1
                        await trio.sleep(1.0)

                async def commands() -> None:
                    while True:
                        line = await trio.to_thread.run_sync(sys.stdin.readline)
                        if not line:
                            stop.set()
                            return
                        try:
                            command = json.loads(line)
                            op = command.get("op")
                            if op == "subscribe" and command["topic"] not in subscribed:
                                subscribed.add(command["topic"])
                                nursery.start_soon(receive, command["topic"])
                            elif op == "publish":
                                await pubsub.publish(command["topic"], base64.b64decode(command["data"]))
                            elif op == "trust":
                                apply_trust(pubsub, command)
                                emit(
                                    {
                                        "event": "trusted",
                                        "scores": len(pubsub.trust.scores),
                                        "blocked": len(pubsub.get_blacklisted_peers()),
                                    }
                                )
                            elif op == "stop":
                                stop.set()
                                return
                        except Exception as exc:  # noqa: BLE001 — a bad command line: reported, not fatal
                            emit({"event": "error", "detail": f"{str(line)[:80]}: {exc}"})

                nursery.start_soon(discover)
                nursery.start_soon(commands)
                await stop.wait()
                nursery.cancel_scope.cancel()


def base58_id(raw: bytes) -> str:
    text: str = ID(raw).to_string()  # libp2p ships no types
    return text


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", default="/ip4/127.0.0.1/tcp/0")
    parser.add_argument("--bootstrap", action="append", default=[])
    parser.add_argument("--interest", action="append", default=[])
    parser.add_argument("--no-dht", action="store_true", help="only the bootstrap (and mDNS) peers: no Kademlia")
    parser.add_argument("--mdns", action="store_true", help="find peers on the LAN (mDNS, zeroconf)")
    parser.add_argument("--adaptive-gossip", action="store_true", help="py-libp2p's default; off unless asked")
    parser.add_argument("--min-trust", type=float, default=-0.5)
    parser.add_argument("--relay-min-trust", type=float, default=-0.2)
    options = parser.parse_args()
    logging.basicConfig(level=logging.CRITICAL, stream=sys.stderr)
    try:
        trio.run(
            functools.partial(
                main,
                options.listen,
                options.bootstrap,
                options.interest or ["anima"],
                dht_on=not options.no_dht,
                mdns=options.mdns,
                min_trust=options.min_trust,
                relay_min_trust=options.relay_min_trust,
                adaptive_gossip=options.adaptive_gossip,
            )
        )
    except KeyboardInterrupt:
        pass
