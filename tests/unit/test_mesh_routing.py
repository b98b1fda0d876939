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
    node = MeshNode(db, Settings(data_dir=str(tmp_path / "a"), mesh=MeshSettings(enabled=True, relay_min_trust=-0.2)),
                    hub.join("a"))
    node.start()
    (bt, bob), (ct, cid), (mt, mal) = _peer(hub, "b"), _peer(hub, "c"), _peer(hub, "m")
    try:
        with node.managers() as house:
            house.reputation.evaluate(bob.did, 1.0)  # most trusted
            house.reputation.evaluate(cid.did, 0.3)
            house.reputation.evaluate(mal.did, -1.0)  # below the threshold
            held = house.mesh.compose("message", {"text": "for the record"})
            house.mesh.mark_sent([held["id"]])  # held here, not yet elsewhere: peers must ask for it
        for transport, identity in ((mt, mal), (ct, cid), (bt, bob)):  # arrival order: least trusted first
            _say(transport, {"kind": "have", **binding(identity, transport.peer_id), "ids": []})
        for transport, identity in ((mt, mal), (ct, cid), (bt, bob)):
            _say(transport, {"kind": "want", "to": node.did, "from": identity.did, "ids": [held["id"]]})
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
