"""Routing weighted by trust (issue 30): the mesh door answers `want`s, sends addressed containers and names its
preferred peers in the `have` in order of the peer's trust; a peer below `mesh.relay_min_trust` gets nothing."""

from __future__ import annotations

import json
from pathlib import Path

from memory import Database
from mesh.node import ALL, SYNC, MeshNode, binding
from mesh.transport import InMemoryHub, InMemoryTransport
from persona.settings import MeshSettings, Settings
from reach.hmp.identity import Identity
from tests.fakes.managers import managers_over


def _peer(hub: InMemoryHub, name: str) -> tuple[InMemoryTransport, Identity]:
    transport = hub.join(name)
    transport.subscribe(SYNC)
    transport.subscribe(ALL)
    return transport, Identity.generate()


def _say(transport: InMemoryTransport, message: dict[str, object]) -> None:
    transport.publish(SYNC, json.dumps(message).encode())


def _heard(transport: InMemoryTransport) -> list[dict[str, object]]:
    return [json.loads(d.data) if d.topic == SYNC else {"container": json.loads(d.data)} for d in transport.poll(0)]


def test_wants_relays_and_the_have_follow_trust_and_a_distrusted_peer_gets_nothing(tmp_path: Path) -> None:
    hub = InMemoryHub()
    db = Database.open(tmp_path / "a")
    node = MeshNode(
        db, Settings(data_dir=str(tmp_path / "a"), mesh=MeshSettings(enabled=True, relay_min_trust=-0.2)), hub.join("a")
    )
    node.start()
    (bt, bob), (ct, cid), (mt, mal) = _peer(hub, "b"), _peer(hub, "c"), _peer(hub, "m")
    try:
        with node.managers() as house:
            house.reputation.evaluate(bob.did, 1.0)  # most trusted
            house.reputation.evaluate(cid.did, 0.3)
            house.reputation.evaluate(mal.did, -1.0)  # below the threshold
            held = house.mesh.compose("message", {"text": "for the record"})
            house.mesh.mark_sent([held["id"]])  # held here, not yet elsewhere: peers must ask for it
        for transport, identity in ((mt, mal), (ct, cid), (bt, bob)):  # arrival order: least trusted first, each
            _say(transport, {"kind": "want", "to": node.did, "from": identity.did, "ids": [held["id"]]})  # want
            _say(transport, {"kind": "have", **binding(identity, transport.peer_id), "ids": []})  # before its have
        for transport in (bt, ct, mt):
            transport.poll(0)  # what the peers said to each other
        node.step(0)
        bodies = [m for m in _heard(bt) if m.get("kind") == "bodies"]
        assert [m["to"] for m in bodies] == [bob.did, cid.did]  # most trusted answered first; mal not at all
        assert bodies[0]["containers"][0]["id"] == held["id"]  # type: ignore[index]
        assert node.stats["unanswered_want"] == 1
        with node.managers() as house:  # addressed containers: most trusted first, none to mal
            to_mal = house.mesh.compose("message", {"text": "psst"}, recipient=mal.did)
            house.mesh.compose("message", {"text": "to c"}, recipient=cid.did)
            house.mesh.compose("message", {"text": "to b"}, recipient=bob.did)
        bt.poll(0)
        assert node.flush() == 2
        sent = [m["container"] for m in _heard(bt) if "container" in m]
        assert [c["recipient"] for c in sent] == [bob.did, cid.did]  # type: ignore[index]
        with node.managers() as house:
            assert [c["id"] for c in house.mesh.outbox()] == [to_mal["id"]]  # nothing relayed to mal: it waits
        node.announce()
        have = [m for m in _heard(bt) if m.get("kind") == "have"][-1]
        assert have["prefer"] == [bob.did, cid.did]  # the have prefers trusted peers; mal is not among them
        _say(mt, {"kind": "have", **binding(mal, "m"), "ids": ["sha256:" + "0" * 64]})  # mal offers something
        node.step(0)
        assert not [m for m in _heard(mt) if m.get("kind") == "want"]  # nothing is asked of a distrusted peer
    finally:
        node.stop()
        db.close()


def test_a_did_proven_on_the_mesh_becomes_a_peer_met_not_added(tmp_path: Path) -> None:
    hub = InMemoryHub()
    nodes = []
    for name in "ab":
        db = Database.open(tmp_path / name)
        node = MeshNode(
            db,
            Settings(data_dir=str(tmp_path / name), mesh=MeshSettings(enabled=True, sync_every_s=0.01)),
            hub.join(name),
        )
        node.start()
        nodes.append(node)
    a, b = nodes
    try:
        for _ in range(3):
            for node in nodes:
                node.step(0)
        with b.managers() as house:
            [met] = house.peers.known()  # a peer the persona sees (agents.list, the prompt), added by nobody
            assert (met.did, met.added_by, met.p2p_addrs, met.tags) == (a.did, "met", ["/p2p/a"], [])
            assert met.name.startswith("peer-") and house.peers.credentials(met.name) == []
            assert [(d["did"], d["transport"]) for d in house.peers.discovered()] == [(a.did, "a")]
            house.peers.add("ada", did=a.did, added_by="owner")
            assert house.peers.discovered() == []  # once added it is the owner's peer, no longer "not added"
            [ada] = house.peers.known()
            assert (ada.id, ada.name, ada.added_by) == (met.id, "ada", "owner")  # the same row, taken over
    finally:
        for node in nodes:
            node.stop()
            node.database.close()


def test_the_mesh_page_offers_the_owner_to_add_a_peer_seen_on_the_mesh(web) -> None:  # type: ignore[no-untyped-def]

    stranger = Identity.generate().did
    with web.agent.services.db.unit() as repos:
        assert managers_over(repos).peers.met(stranger, transport="12D3KooWStranger").added_by == "met"
    page = web.client.get("/mesh")
    assert page.status_code == 200 and "Seen on the mesh, not added" in page.text
    assert f'data-discovered="{stranger}"' in page.text and 'data-peer="' not in page.text
    assert web.client.get("/api/mesh").json()["discovered"][0]["did"] == stranger
    added = web.client.post("/mesh/discovered/add", data={"did": stranger, "name": "drifter"})
    assert added.status_code == 200 and 'data-peer="drifter"' in added.text
    assert f'data-discovered="{stranger}"' not in added.text
    with web.agent.services.db.unit() as repos:
        peer = managers_over(repos).peers.get("drifter")
        assert (peer.did, peer.added_by) == (stranger, "owner")
        assert managers_over(repos).peers.discovered() == []
