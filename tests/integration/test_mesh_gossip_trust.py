"""Trust inside gossipsub, on real py-libp2p nodes (mesh/p2p_sidecar.py) in separate processes on loopback.

A line — leaf b ← hub a → leaf c, without the DHT (`--no-dht`) so that b and c know only a — makes relaying
visible: what c publishes reaches b only through a. When a's door shares a low trust in c, a's gossipsub neither
takes what c publishes nor relays it to b, and sends c nothing; a blocked peer is cut off (py-libp2p's blacklist).
And LAN discovery: two nodes with mDNS on and no bootstrap address find each other. Every wait is bounded; every
process is stopped."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from mesh.transport import Libp2pTransport, wait_for
from tests.integration.test_mesh_processes import libp2p_venv

TOPIC = "anima/topic/tides"
WAIT = 30.0


def node(bootstrap: list[str], **options: bool) -> Libp2pTransport:
    transport = Libp2pTransport(
        str(libp2p_venv()),
        listen="/ip4/127.0.0.1/tcp/0",
        bootstrap=bootstrap,
        interests=["gossip-trust-test"],
        **options,
    )
    transport.start()
    return transport


def heard(transport: Libp2pTransport, data: bytes, timeout: float = 6.0) -> bool:
    """Whether `data` arrives at `transport` within `timeout` (a bounded wait; False is the answer asked for when
    something must NOT arrive: the time a relay takes on loopback is well under a second)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(d.data == data for d in transport.poll(0.2)):
            return True
    return False


def trusted(transport: Libp2pTransport, scores: dict[str, float], blocked: list[str]) -> None:
    """Share trust with the node and wait until it says it applied it."""
    applied = transport.trust_applied
    transport.trust(scores, blocked)
    assert wait_for(lambda: transport.trust_applied > applied, WAIT)


@pytest.fixture(scope="module")
def line() -> Iterator[tuple[Libp2pTransport, Libp2pTransport, Libp2pTransport]]:
    started: list[Libp2pTransport] = []
    try:
        hub = node([], dht=False)
        started.append(hub)
        for _ in range(2):
            started.append(node([hub.addresses()[0]], dht=False))
        a, b, c = started
        for transport in started:
            transport.subscribe(TOPIC)
        assert wait_for(lambda: a.peer_count() == 2 and b.peers() == [a.peer_id] and c.peers() == [a.peer_id], WAIT), (
            a.peers(),
            b.peers(),
            c.peers(),
        )
        c.publish(TOPIC, b"warm-up")  # the meshes form on heartbeats (1 s): wait until a relay goes through
        assert wait_for(lambda: any(d.data == b"warm-up" for d in b.poll(0.2)), WAIT)
        yield a, b, c
    finally:
        for transport in started:
            transport.stop()


def test_a_distrusted_peers_broadcasts_are_neither_taken_nor_relayed_and_it_is_sent_nothing(line) -> None:
    a, b, c = line
    c.publish(TOPIC, b"c: trusted")
    assert heard(b, b"c: trusted")  # relayed by a (b and c are not connected)

    trusted(a, {c.peer_id: -0.9, b.peer_id: 0.4}, [])  # below min_trust (-0.5) and relay_min_trust (-0.2)
    dropped = a.dropped.get("graylisted", 0)
    c.publish(TOPIC, b"c: distrusted")
    assert not heard(b, b"c: distrusted")  # not relayed by a
    assert wait_for(lambda: a.dropped.get("graylisted", 0) > dropped, WAIT)  # a dropped it on arrival
    assert not [d for d in a.poll(0.5) if d.data == b"c: distrusted"]  # … so its door never saw it
    b.publish(TOPIC, b"b: to everyone")
    assert heard(a, b"b: to everyone")
    assert not heard(c, b"b: to everyone")  # a sends a graylisted peer nothing

    trusted(a, {c.peer_id: 0.0}, [])  # trust restored: c is a peer like any other again (the mesh regrafts it)
    assert wait_for(lambda: c.publish(TOPIC, b"c: again") is None and heard(b, b"c: again", 1.0), WAIT)


def test_a_blocked_peer_is_cut_off_by_the_blacklist(line) -> None:
    a, b, c = line
    trusted(a, {}, [c.peer_id])
    c.publish(TOPIC, b"c: blocked")
    assert not heard(b, b"c: blocked")
    assert not [d for d in a.poll(0.5) if d.data == b"c: blocked"]
    b.publish(TOPIC, b"b: after the block")
    assert heard(a, b"b: after the block")
    assert not heard(c, b"b: after the block")


def test_two_nodes_find_each_other_on_the_lan_by_mdns() -> None:
    first = node([], dht=False, mdns=True)
    try:
        second = node([], dht=False, mdns=True)
        try:
            assert wait_for(lambda: second.peer_id in first.peers() and first.peer_id in second.peers(), WAIT), (
                first.peers(),
                second.peers(),
                first.errors,
                second.errors,
            )
        finally:
            second.stop()
    finally:
        first.stop()
