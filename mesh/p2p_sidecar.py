"""The libp2p node of one persona, run by the mesh door as a child process in its own venv (py-libp2p is trio-based
and pins its own dependencies: `make mesh` builds ~/.cache/anima/libp2p with `libp2p==0.8.1`; the persona's venv
never imports it). It speaks JSON lines: commands on stdin, events on stdout. It imports only the standard library
and libp2p — no anima module.

    in:  {"op": "subscribe", "topic": t}  {"op": "publish", "topic": t, "data": <base64>}  {"op": "stop"}
    out: {"event": "ready", "peer_id": …, "addrs": [...]}  {"event": "message", "topic": t, "from": <peer id>,
         "data": <base64>}  {"event": "peers", "ids": [...]}  {"event": "error", "detail": …}

Security: Noise only (no plaintext, no secio). Pubsub: gossipsub (/meshsub/1.1.0). Discovery: the bootstrap
multiaddrs, then the Kademlia DHT — each node provides the key of every interest ("anima:<interest>") and connects to
the providers it finds, so peers that only know the bootstrap find each other."""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import logging
import secrets
import sys
from typing import Any

import multiaddr
import trio
from libp2p import new_host
from libp2p.crypto.ed25519 import create_new_key_pair
from libp2p.crypto.x25519 import create_new_key_pair as create_new_x25519_key_pair
from libp2p.custom_types import TProtocol
from libp2p.kad_dht.kad_dht import DHTMode, KadDHT
from libp2p.peer.peerinfo import info_from_p2p_addr
from libp2p.pubsub.gossipsub import GossipSub
from libp2p.pubsub.pubsub import Pubsub
from libp2p.security.noise.transport import PROTOCOL_ID as NOISE_PROTOCOL_ID
from libp2p.security.noise.transport import Transport as NoiseTransport
from libp2p.tools.anyio_service import background_trio_service

GOSSIPSUB = TProtocol("/meshsub/1.1.0")
GOSSIPSUB_10 = TProtocol("/meshsub/1.0.0")


def emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def interest_key(interest: str) -> str:
    return hashlib.sha256(f"anima:{interest}".encode()).hexdigest()


async def main(listen: str, bootstrap: list[str], interests: list[str]) -> None:
    key_pair = create_new_key_pair(secrets.token_bytes(32))
    noise = NoiseTransport(key_pair, noise_privkey=create_new_x25519_key_pair().private_key)
    host = new_host(key_pair=key_pair, sec_opt={NOISE_PROTOCOL_ID: noise})
    gossipsub = GossipSub(protocols=[GOSSIPSUB, GOSSIPSUB_10], degree=6, degree_low=4, degree_high=12,
                          time_to_live=60, gossip_window=3, gossip_history=5, heartbeat_initial_delay=0.1,
                          heartbeat_interval=1)
    pubsub = Pubsub(host, gossipsub)
    subscribed: set[str] = set()
    stop = trio.Event()

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
            async with background_trio_service(dht):
                peer_id = host.get_id().to_string()
                emit({"event": "ready", "peer_id": peer_id,
                      "addrs": [f"{a}/p2p/{peer_id}" if "/p2p/" not in str(a) else str(a) for a in host.get_addrs()]})

                async def receive(topic: str) -> None:
                    subscription = await pubsub.subscribe(topic)
                    while True:
                        message = await subscription.get()
                        sender = base58_id(message.from_id)
                        if sender == peer_id:
                            continue
                        emit({"event": "message", "topic": topic, "from": sender,
                              "data": base64.b64encode(message.data).decode("ascii")})

                async def discover() -> None:
                    """Provide every interest in the DHT and connect to the providers found (peers of the same
                    interests); report who is connected. Every second at first, then every 15 s once connected (a
                    DHT round is not free: at ten peers on two cores, once a second took the CPU gossip needed)."""
                    reported: list[str] = []
                    rounds = 0
                    while True:
                        for peer in host.get_connected_peers():
                            await dht.routing_table.add_peer(peer)
                        if rounds % 15 == 0 or not host.get_connected_peers() or rounds < 5:
                            for interest in interests:
                                key = interest_key(interest)
                                try:
                                    await dht.provide(key)
                                    for info in await dht.find_providers(key, 20):
                                        if info.peer_id != host.get_id() \
                                                and info.peer_id not in host.get_connected_peers():
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
    from libp2p.peer.id import ID

    return ID(raw).to_string()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", default="/ip4/127.0.0.1/tcp/0")
    parser.add_argument("--bootstrap", action="append", default=[])
    parser.add_argument("--interest", action="append", default=[])
    options = parser.parse_args()
    logging.basicConfig(level=logging.CRITICAL, stream=sys.stderr)
    try:
        trio.run(main, options.listen, options.bootstrap, options.interest or ["anima"])
    except KeyboardInterrupt:
        pass
