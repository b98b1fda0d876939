"""The mesh door against what a hostile peer publishes (tests/mesh_attacks.py), over the in-memory transport: every
shape leaves the door up, is counted, costs the persona nothing and gives the attacker nothing, and the next valid
container is accepted; a peer that keeps sending junk is cut off; the rounds are started again whatever escapes
them; a hypothesis fuzz of the door's parsing. Leaving Isolated Mode paces the outbox within the receiver's
advertised limits (nothing refused for rate, nobody distrusted), and what is refused for rate comes by sync. The
store is bounded per peer and in all, and what is kept only to pass on more so. A note from a peer names its DID.
(The same against real py-libp2p nodes: tests/integration/test_mesh_holes.py.)"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from managers import ManagerDeps, Managers
from memory import Database
from memory.models import DiaryEntry, MeshContainer, Note
from mesh.node import ALL, SYNC, MeshNode, binding
from mesh.runner import supervise
from mesh.transport import InMemoryHub, InMemoryTransport
from nodes.steps.s04_prepare_context import _note_line
from persona.settings import MeshSettings, Settings
from reach.hmp.containers import encode, seal
from reach.hmp.identity import Identity
from reach.hmp.wire import WireError, depth, read
from tests.mesh_attacks import shapes


def settings_for(path: Path, **mesh: object) -> Settings:
    return Settings(data_dir=str(path), mesh=MeshSettings(enabled=True, sync_every_s=0.01, **mesh))  # type: ignore[arg-type]


@contextmanager
def door(tmp: Path, name: str = "a", hub: InMemoryHub | None = None, **mesh: object) -> Iterator[MeshNode]:
    hub = hub or InMemoryHub()
    node = MeshNode(Database.open(tmp / name), settings_for(tmp / name, **mesh), hub.join(name))
    node.start()
    try:
        yield node
    finally:
        node.stop()
        node.database.close()


def rows_from(node: MeshNode, did: str) -> list[MeshContainer]:
    with node.managers() as house:
        return [r for r in house.repos.session.query(MeshContainer).all() if r.sender == did]


def peer_notes(node: MeshNode) -> list[Note]:
    with node.managers() as house:
        return list(house.repos.session.query(Note).filter(Note.source == "peer").all())


def test_the_depth_scan_counts_brackets_outside_strings_only() -> None:
    assert depth(b'{"a": [1, {"b": "[[[[{{{{"}]}') == 3
    assert depth(b'["\\"[[[", [[]]]') == 3  # an escaped quote does not end the string
    assert depth(b"[" * 30_000 + b"]" * 30_000) == 30_000
    with pytest.raises(WireError, match="nested 30000 deep"):
        read(b"[" * 30_000 + b"]" * 30_000, max_bytes=65_536)
    with pytest.raises(WireError, match="oversized"):
        read(b"[]" * 40_000, max_bytes=65_536)
    with pytest.raises(WireError, match="malformed"):
        read(b'{"x": NaN}', max_bytes=100)


def test_every_hostile_shape_leaves_the_door_up_and_the_attacker_gets_nothing(tmp_path: Path) -> None:
    hub = InMemoryHub()
    mallory, honest = Identity.generate(), Identity.generate()
    with door(tmp_path, hub=hub, topics=["tides"], junk_burst=10_000, rate_per_s=1000.0, burst=1000) as node:
        attacker = hub.join("mallory-peer")
        for channel in (SYNC, ALL):
            attacker.subscribe(channel)
        sent = shapes(mallory, node.did)
        assert len(sent) > 60
        for index, (name, channel, data) in enumerate(sent):
            attacker.publish(channel, data)
            node.step(0)  # never raises
            note = seal(honest, "message", {"text": f"honest words {index}"}, recipient=node.did)
            hub.deliver("honest-peer", ALL, encode(note))
            node.step(0)
            assert f"honest words {index}" in [n.text for n in peer_notes(node)], name  # the next one arrives
        assert node.stats["door_errors"] == 0 and node.stats["bad_sync"] >= 20 and node.stats["refused"] >= 30
        # the attacker got nothing: no row of its own, no note, no memory, no reply on any channel
        assert rows_from(node, mallory.did) == []
        assert not [n for n in peer_notes(node) if mallory.did in json.dumps(n.tags)]
        with node.managers() as house:
            assert house.repos.session.query(DiaryEntry).count() == 0
            assert house.reputation.trust(honest.did) == 0.0
            refused = house.mesh.refused_counts()
        assert refused.get("malformed", 0) >= 30 and "flood" not in refused
        replies = [json.loads(d.data) for d in attacker.poll(0) if d.peer == "a" and d.topic == SYNC]
        assert not [r for r in replies if r.get("kind") in ("want", "bodies")]


def test_a_peer_that_keeps_sending_junk_is_cut_off(tmp_path: Path) -> None:
    hub = InMemoryHub()
    with door(tmp_path, hub=hub, junk_burst=5) as node:
        attacker = hub.join("mallory-peer")
        for _ in range(12):
            attacker.publish(SYNC, b"[]")
            attacker.publish(ALL, b"{}")
        node.step(0)
        node.step(0)
        assert node.cut_off == {"mallory-peer"} and node.stats["dropped_cut_off"] > 0
        with node.managers() as house:  # refusals stop growing once it is cut off
            assert len(house.mesh.refused_recent(100)) <= 6
        node.share_trust()
        assert isinstance(node.transport, InMemoryTransport) and node.transport.blocked == {"mallory-peer"}
        attacker.publish(ALL, encode(seal(Identity.generate(), "message", {"text": "after"})))
        node.step(0)
        assert not peer_notes(node)  # the transport no longer delivers it


class Exploding(InMemoryTransport):
    """A transport whose next `peer_count` raises: what nothing in the door's rounds expects."""

    explode = 1

    def peer_count(self) -> int:
        if self.explode:
            self.explode -= 1
            raise RuntimeError("a bug nobody foresaw")
        return super().peer_count()


def test_the_supervisor_starts_the_rounds_again_whatever_escapes_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hub = InMemoryHub()
    transport = Exploding(hub, "a")
    hub.members["a"] = transport
    node = MeshNode(Database.open(tmp_path / "a"), settings_for(tmp_path / "a"), transport)
    node.start()
    stop = threading.Event()
    thread = threading.Thread(target=supervise, args=(node, stop), kwargs={"first_s": 0.01}, daemon=True)
    try:
        with caplog.at_level(logging.WARNING, logger="mesh.runner"):
            thread.start()
            hub.deliver("honest", ALL, encode(seal(Identity.generate(), "message", {"text": "after the bug"})))
            for _ in range(200):
                if peer_notes(node):
                    break
                stop.wait(0.05)
        assert [n.text for n in peer_notes(node)] == ["after the bug"]
        assert node.stats["door_restarts"] == 1
        [line] = [r.getMessage() for r in caplog.records if r.name == "mesh.runner"]
        assert "RuntimeError: a bug nobody foresaw" in line and "\n" not in line
    finally:
        stop.set()
        thread.join(5)
        node.stop()
        node.database.close()


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InMemoryHub, MeshNode]]:
    hub = InMemoryHub()
    with door(tmp_path_factory.mktemp("fuzz"), hub=hub, junk_burst=100_000, topics=["tides"]) as node:
        yield hub, node


@settings(max_examples=300, deadline=None)
@given(
    channel=st.sampled_from([SYNC, ALL]),
    data=st.one_of(
        st.binary(max_size=400),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
            lambda inner: (
                st.lists(inner, max_size=4)
                | st.dictionaries(
                    st.sampled_from(
                        [
                            "kind",
                            "did",
                            "ids",
                            "to",
                            "from",
                            "containers",
                            "type",
                            "topic",
                            "recipient",
                            "payload",
                            "id",
                            "sig",
                            "ts",
                            "v",
                            "sender",
                            "x",
                        ]
                    ),
                    inner,
                    max_size=6,
                )
            ),
            max_leaves=30,
        ).map(lambda value: json.dumps(value).encode()),
    ),
)
def test_fuzz_whatever_arrives_never_raises_out_of_the_door(
    fuzzed: tuple[InMemoryHub, MeshNode], channel: str, data: bytes
) -> None:
    hub, node = fuzzed
    hub.deliver("fuzzer", channel, data)
    node.step(0)  # never raises
    words = f"still here {len(peer_notes(node))}"
    hub.deliver("honest", ALL, encode(seal(Identity.generate(), "message", {"text": words})))
    node.step(0)
    assert node.stats["door_errors"] == 0
    assert words in [n.text for n in peer_notes(node)]  # the next valid container is accepted


def test_leaving_isolated_mode_paces_the_outbox_and_costs_the_sender_no_trust(tmp_path: Path) -> None:
    """100 containers queued in Isolated Mode reach a receiver that takes 50 a second (burst 10) from one peer: the
    sender publishes within what the receiver's `have` advertised, so none is refused for rate, all arrive, and the
    sender's trust there is untouched."""
    hub = InMemoryHub()
    with door(tmp_path, "s", hub) as sender, door(tmp_path, "r", hub, rate_per_s=50.0, burst=10) as receiver:
        hub.members["s"].up = False  # isolated: the persona keeps thinking, the outbox keeps it
        with sender.managers() as house:
            for i in range(100):
                house.mesh.compose("message", {"text": f"queued {i}"}, recipient=receiver.did)
        hub.members["s"].up = True
        for _ in range(2000):
            sender.step(0.001)
            receiver.step(0.001)
            if len(peer_notes(receiver)) == 100:
                break
        assert sorted(n.text for n in peer_notes(receiver)) == sorted(f"queued {i}" for i in range(100))
        assert sender.peer_limits[receiver.did].rate == 50.0 and sender.stats["paced"] > 0
        with receiver.managers() as house:
            assert house.mesh.refused_counts().get("flood", 0) == 0
            assert house.reputation.trust(sender.did) == 0.0 and not house.reputation.table()


def test_what_was_refused_for_rate_comes_again_by_sync(tmp_path: Path) -> None:
    """A sender that ignores the pace (its own doing, or an older door): the receiver refuses the excess for rate —
    no fault —, asks for it with the next `have`, and every container arrives once."""
    hub = InMemoryHub()
    with door(tmp_path, "s", hub) as sender, door(tmp_path, "r", hub, rate_per_s=1.0, burst=5) as receiver:
        with sender.managers() as house:
            burst = [house.mesh.compose("message", {"text": f"burst {i}"}, recipient=receiver.did) for i in range(30)]
        receiver.step(0)
        sender.step(0)
        receiver.step(0)  # the sender's have binds it
        for container in burst:  # all at once, past the pace (as a door that does not pace would)
            hub.deliver("s", ALL, encode(container))
        with sender.managers() as house:
            house.mesh.mark_sent(c["id"] for c in burst)
        receiver.step(0)
        with receiver.managers() as house:
            assert house.mesh.refused_counts()["flood"] >= 20
        for _ in range(400):
            sender.step(0.001)
            receiver.step(0.001)
            if len(peer_notes(receiver)) == 30:
                break
        assert sorted(n.text for n in peer_notes(receiver)) == sorted(f"burst {i}" for i in range(30))
        with receiver.managers() as house:
            assert house.reputation.trust(sender.did) == 0.0 and not house.reputation.table()[0].evaluations


def test_the_store_is_bounded_per_peer_in_all_and_for_what_is_only_passed_on(tmp_path: Path) -> None:
    """A fresh DID's 60 KB containers: on a topic nobody here subscribes to, kept only within the carry quota; to
    this persona, within the per-peer quota; the rest refused as over_quota (shown, no fault)."""
    big = "x" * 60_000
    with door(tmp_path, topics=["tides"], carry_per_peer_kb=128, store_per_peer_kb=512, store_total_mb=1) as node:
        mallory, other = Identity.generate(), Identity.generate()
        with node.managers() as house:
            carried = [
                house.mesh.receive(
                    encode(seal(mallory, "cogsync", {"text": big}, topic="junk")), quota=node.quota
                ).status
                for _ in range(5)
            ]
            kept = [
                house.mesh.receive(
                    encode(seal(mallory, "message", {"text": big}, recipient=node.did)), quota=node.quota
                ).status
                for _ in range(12)
            ]
            others = [
                house.mesh.receive(
                    encode(seal(other, "message", {"text": big}, recipient=node.did)), quota=node.quota
                ).status
                for _ in range(12)
            ]
            refused = house.mesh.refused_counts()
            assert house.reputation.trust(mallory.did) == 0.0
        assert carried == ["accepted"] * 2 + ["refused"] * 3  # 128 KiB: two of ~60 KB
        assert kept.count("accepted") == 6  # 512 KiB in all from one peer, the two carried among them
        assert others.count("accepted") == 8  # 1 MiB for everyone: what is left of it
        assert refused["over_quota"] == 3 + 6 + 4
    with door(tmp_path, topics=["tides"], carry_per_peer_kb=128, store_per_peer_kb=512, store_total_mb=1) as node:
        with node.managers() as house:  # after a restart the quota counts what the database holds
            assert node.quota is not None and node.quota.kept[mallory.did] >= 8 * 60_000
            assert (
                house.mesh.receive(
                    encode(seal(mallory, "message", {"text": big}, recipient=node.did)), quota=node.quota
                ).reason
                == "over_quota"
            )
            assert (
                house.mesh.receive(
                    encode(seal(mallory, "message", {"text": "small"}, recipient=node.did)), quota=node.quota
                ).status
                == "accepted"
            )


def test_a_cogsync_entry_whose_tags_is_5_is_refused_not_stored(tmp_path: Path) -> None:
    from tests.mesh_attacks import signed

    mallory = Identity.generate()
    with door(tmp_path, topics=["tides"]) as node, node.managers() as house:
        base = seal(mallory, "cogsync", {}, topic="tides")
        outcome = house.mesh.receive(
            encode(signed(mallory, {**base, "payload": {"kind": "diary", "text": "x", "tags": 5}}))
        )
        assert (outcome.status, outcome.reason) == ("refused", "malformed") and "tags" in outcome.detail
        assert house.repos.session.query(MeshContainer).count() == 0
        assert house.repos.session.query(DiaryEntry).count() == 0
        assert house.reputation.trust(mallory.did) < 0  # its own signed doing


def test_a_note_from_a_peer_names_its_did_and_the_owners_name_for_it(tmp_path: Path) -> None:
    bob, stranger = Identity.generate(), Identity.generate()
    with door(tmp_path) as node:
        with node.managers() as house:
            house.peers.add("bob", did=bob.did)
            house.mesh.receive(encode(seal(bob, "message", {"text": "hello from bob"}, recipient=node.did)))
            house.mesh.receive(encode(seal(stranger, "message", {"text": "hello from nobody"})))
        by_text = {n.text: n for n in peer_notes(node)}
        line = _note_line(by_text["hello from bob"])
        assert f"from peer bob, {bob.did} (data from another agent" in line and "peer peer" not in line
        assert f"from peer {stranger.did} (data from another agent" in _note_line(by_text["hello from nobody"])


def test_a_have_advertises_the_limits_and_a_binding(tmp_path: Path) -> None:
    hub = InMemoryHub()
    with door(tmp_path, hub=hub, rate_per_s=7.0, burst=14) as node:
        listener = hub.join("ear")
        listener.subscribe(SYNC)
        node.announce()
        [message] = [json.loads(d.data) for d in listener.poll(0)]
        assert message["limits"] == {"rate": 7.0, "burst": 14}
        assert {k: message[k] for k in ("did", "peer")} == {
            k: binding(node.identity, "a")[k]  # type: ignore[arg-type]
            for k in ("did", "peer")
        }


def test_an_arrival_that_fails_is_rolled_back_alone_and_the_next_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What no validation foresaw (here: applying one container raises after its row was written) is undone for that
    container only, logged, counted; the containers around it are kept."""
    from managers.mesh import MeshManager

    apply = MeshManager._apply

    def failing(self: MeshManager, row: MeshContainer, checked: object) -> str | None:
        if (row.body.get("payload") or {}).get("text") == "the poisoned one":
            raise RuntimeError("nobody foresaw this")
        return apply(self, row, checked)  # type: ignore[arg-type]

    monkeypatch.setattr(MeshManager, "_apply", failing)
    hub = InMemoryHub()
    peer = Identity.generate()
    with door(tmp_path, hub=hub) as node:
        for text in ("before", "the poisoned one", "after"):
            hub.deliver("honest", ALL, encode(seal(peer, "message", {"text": text})))
        node.step(0)
        assert sorted(n.text for n in peer_notes(node)) == ["after", "before"]
        assert node.stats["door_errors"] == 1
        with node.managers() as house:  # its row was rolled back with it: sync may bring it again
            assert len([r for r in house.repos.session.query(MeshContainer).all() if r.sender == peer.did]) == 2


def test_the_refusals_kept_are_bounded(tmp_path: Path) -> None:
    with door(tmp_path) as node, node.managers() as house:
        for i in range(30):
            house.mesh.receive(f"not json {i}".encode())
        newest = [r.id for r in house.mesh.refused_recent(10)]
        assert house.mesh.trim_refusals(10) == 20
        assert [r.id for r in house.mesh.refused_recent(100)] == newest


class Crashing(InMemoryTransport):
    """A transport whose process is gone until the door starts it again."""

    crashed = False
    starts = 0

    def start(self) -> None:
        self.starts += 1
        self.crashed = False
        super().start()

    def alive(self) -> bool:
        return not self.crashed


def test_a_libp2p_node_that_exited_is_started_again_and_the_channels_joined(tmp_path: Path) -> None:
    hub = InMemoryHub()
    transport = Crashing(hub, "a")
    hub.members["a"] = transport
    node = MeshNode(Database.open(tmp_path / "a"), settings_for(tmp_path / "a", topics=["tides"]), transport)
    node.start()
    try:
        transport.crashed, transport.topics = True, set()  # gone, and with it what it had joined
        node.step(0)
        assert transport.starts == 2 and node.stats["transport_restarts"] == 1
        assert {ALL, SYNC, "anima/topic/tides"} <= transport.topics
        hub.deliver("honest", ALL, encode(seal(Identity.generate(), "message", {"text": "after the restart"})))
        node.step(0)
        assert [n.text for n in peer_notes(node)] == ["after the restart"]
    finally:
        node.stop()
        node.database.close()


def test_the_mesh_page_lists_what_the_door_journaled(web) -> None:  # type: ignore[no-untyped-def]
    """The door's events (kind `mesh` in the live journal) on the Mesh page, newest first; /live/mesh streams the
    same fragments as they come (tests/integration/test_mesh_demo.py, in a browser)."""
    peer = Identity.generate().did
    assert "mesh-live-empty" in web.client.get("/mesh").text
    with web.services.db.unit() as repos:
        Managers(repos, ManagerDeps(settings=settings_for(web.data_dir))).mesh.journal(
            [
                {"event": "met", "did": peer, "peer": "12D3KooWPeer", "label": peer},
                {
                    "event": "received",
                    "type": "hello",
                    "id": "sha256:" + "a" * 64,
                    "sender": peer,
                    "label": peer,
                    "via": "gossip",
                    "applied": "hello",
                    "detail": "tides",
                    "verified": True,
                },
                {"event": "refused", "reason": "malformed", "sender": None, "id": None, "detail": "not JSON"},
            ]
        )
    page = web.client.get("/mesh").text
    live = page[page.index('data-testid="mesh-live"') : page.index("</ul>", page.index('data-testid="mesh-live"'))]
    assert (
        live.index("refused a container from an unknown peer: malformed")
        < live.index(f"received a signed hello from {peer}: signature verified, accepted")
        < live.index(f"met {peer} at libp2p peer 12D3KooWPeer")
    )
    assert "it listens to: tides" in live and "mesh-live-empty" not in page
