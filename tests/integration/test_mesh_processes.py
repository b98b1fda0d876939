"""Three personas' mesh doors in separate processes on loopback, over real py-libp2p (Noise, gossipsub, Kademlia):
they find each other from one bootstrap address, exchange signed containers, CogSync a diary entry by tag, vote an
ethics case; one is killed and restarted — isolated mode, then sync with 0 lost and 0 applied twice. An attacker
on the same network (a libp2p node of its own) sends forged, replayed, expired, oversized containers and a flood:
all refused, counted, and the attacker's trust falls. Every wait is bounded; every process is stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from managers import ManagerDeps, Managers
from memory import Database
from memory.models import DiaryEntry, MeshContainer, Note
from mesh.node import ALL, SYNC, binding
from mesh.transport import Libp2pTransport, wait_for
from persona.settings import MeshSettings, Settings
from reach.hmp.containers import encode, seal
from reach.hmp.identity import Identity

ROOT = Path(__file__).resolve().parents[2]
LIBP2P_PYTHON = Path.home() / ".cache/anima/libp2p/bin/python"
WAIT = 45.0


def libp2p_venv() -> Path:
    """The libp2p venv, built by `make mesh` when missing (idempotent, cached)."""
    if not LIBP2P_PYTHON.exists():
        subprocess.run(
            ["make", "-C", str(ROOT), "mesh", "PYTHON=python3"], check=True, timeout=900, stdout=subprocess.DEVNULL
        )
    return LIBP2P_PYTHON


class Door:
    """One persona's mesh door as a process (`python -m mesh`) over its own data dir."""

    def __init__(
        self,
        root: Path,
        name: str,
        bootstrap: list[str],
        topics: list[str],
        min_trust: float = -0.5,
        env: dict[str, str] | None = None,
    ) -> None:
        self.name, self.data, self.state = name, root / name, root / f"{name}.json"
        self.bootstrap, self.topics, self.min_trust, self.env = bootstrap, topics, min_trust, dict(env or {})
        self.process: subprocess.Popen[bytes] | None = None
        self.settings = Settings(
            data_dir=str(self.data), mesh=MeshSettings(enabled=True, sync_every_s=1.0, min_trust=min_trust)
        )

    def start(self) -> None:
        self.state.unlink(missing_ok=True)
        args = [sys.executable, "-m", "mesh", "--data-dir", str(self.data), "--state", str(self.state)]
        for address in self.bootstrap:
            args += ["--bootstrap", address]
        for topic in self.topics:
            args += ["--topic", topic]
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "ANIMA_MESH__SYNC_EVERY_S": "1",
            "ANIMA_MESH__SIDECAR_PYTHON": str(LIBP2P_PYTHON),
            "ANIMA_MESH__MIN_TRUST": str(self.min_trust),
            **self.env,
        }
        log = (self.data.parent / f"{self.name}.log").open("ab")
        self.process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=log)
        assert wait_for(self.state.exists, WAIT), f"{self.name} did not start: {self.log_tail()}"

    def log_tail(self) -> str:
        path = self.data.parent / f"{self.name}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def read(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.state.read_text()))
        except (OSError, ValueError):
            return {}

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)

    def managers(self) -> Iterator[Managers]:
        db = Database.open(self.data)
        try:
            with db.unit() as repos:
                yield Managers(repos, ManagerDeps(settings=self.settings))
        finally:
            db.close()

    def diary_texts(self, text: str) -> int:
        for house in self.managers():
            return len([e for e in house.repos.session.query(DiaryEntry).all() if e.text == text])
        return 0


@pytest.fixture(scope="module")
def doors(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Door]]:
    libp2p_venv()
    root = tmp_path_factory.mktemp("mesh")
    for name in "abc":
        Database.open(root / name).close()
    a = Door(root, "a", [], [], min_trust=-0.95)  # the attack test: a few refusals before a's gossipsub cuts it off
    started: list[Door] = []
    try:
        a.start()
        started.append(a)
        address = a.read()["addrs"][0]
        b, c = Door(root, "b", [address], ["tides"]), Door(root, "c", [address], ["tides"])
        for door in (b, c):
            door.start()
            started.append(door)
        yield {"a": a, "b": b, "c": c}
    finally:
        for door in started:
            door.stop()


def test_three_personas_find_each_other_sync_vote_and_survive_a_restart(doors: dict[str, Door]) -> None:
    a, b, c = doors["a"], doors["b"], doors["c"]
    dids = {name: door.read()["did"] for name, door in doors.items()}
    # found each other from one bootstrap address: b and c are connected directly (the DHT), and know the DIDs
    assert wait_for(lambda: b.read().get("peer_id") in c.read().get("peers", []), WAIT), c.read()
    assert wait_for(lambda: {dids["a"], dids["b"]} <= set(c.read().get("dids", [])), WAIT), c.read()

    # a signed message to b; CogSync of a diary entry by tag
    for house in a.managers():
        house.mesh.compose("message", {"text": "hello b"}, recipient=dids["b"])
        house.diary.add("spring tide peaks at 4.6 m", tags=["tides"])
        assert len(house.mesh.publish("tides")) == 1
    assert wait_for(lambda: b.diary_texts("spring tide peaks at 4.6 m") == 1, WAIT), b.log_tail()
    assert wait_for(lambda: c.diary_texts("spring tide peaks at 4.6 m") == 1, WAIT)
    for house in b.managers():
        learned = house.mesh.learned()
        assert learned[0].sender == dids["a"] and learned[0].local_tier == "diary"
        item = house.repos.items.find("diary", learned[0].local_id)
        assert item is not None and item.meta["origin"] == "peer"
        assert any(n.text == "hello b" for n in house.notes.list(source="peer", limit=5))

    # distributed notes: a and b are friends, b and c are friends, a and c are not — a's public note reaches c through
    # b, with its origin and hops; a's private note leaves a in no container
    for door, friends in ((a, "b"), (b, "ac"), (c, "b")):
        for house in door.managers():
            for name in friends:
                house.peers.set_tags(house.peers.add(f"peer-{name}", did=dids[name]).id, ["friend"])
    for house in a.managers():
        house.notes.add("a's private musing")
        assert len(house.notes.share(house.notes.add("the #tides turn at noon").id)) == 1
    assert wait_for(lambda: _peer_notes(c, "the #tides turn at noon"), WAIT), c.log_tail()
    [at_b], [at_c] = _peer_notes(b, "the #tides turn at noon"), _peer_notes(c, "the #tides turn at noon")
    assert {f"origin:{dids['a']}", "hops:1", f"peer:{dids['a']}", "#tides"} <= set(at_b)
    assert {f"origin:{dids['a']}", "hops:2", f"peer:{dids['b']}", "#tides"} <= set(at_c)

    # an ethics case: a opens it, all three vote, the trust-weighted result is a's to read
    for house in a.managers():
        case = house.mesh.open_case("Share the owner's notes with peers?", ["only with consent", "freely"])
        solutions = [x["id"] for x in house.mesh.outbox() if x["type"] == "solution"]
        house.mesh.vote(case["id"], solution=solutions[0])
    for door in (b, c):
        assert wait_for(lambda door=door: _case_rows(door, case["id"]) >= 3, WAIT)
        for house in door.managers():
            house.mesh.vote(case["id"], solution=solutions[0] if door is b else solutions[1])
    assert wait_for(lambda: _tally(a, case["id"]).votes == 3, WAIT)
    assert _tally(a, case["id"]).result == "only with consent"

    # c is killed; a and b go on; c's persona (its database) keeps writing while its door is down
    c.kill()
    for house in a.managers():
        house.diary.add("while c was away: neap tide", tags=["tides"])
        house.mesh.publish("tides")
    assert wait_for(lambda: b.diary_texts("while c was away: neap tide") == 1, WAIT)
    for house in c.managers():
        house.diary.add("c, alone: the harbour silted up", tags=["tides"])
        house.mesh.publish("tides")
        assert len(house.mesh.outbox()) == 1
        # c's persona is told it is cut off (its killed door could not say so) and decides alone meanwhile: the case
        # it opens waits in the outbox, the diary marks the decision for review (Emergency Consensus)
        house.mesh.record_connectivity(isolated=True, door="not_started")
        alone = house.mesh.open_case("Lend the boat while the mesh is down?")
        assert alone["emergency"] is not None
    c.start()
    # the door back: c's persona hears it with the decisions to review, and the deferred case reaches a
    assert wait_for(lambda: _review_note(c, alone["emergency"]), WAIT), c.log_tail()
    assert wait_for(lambda: _case_rows(a, alone["id"]) >= 1, WAIT)
    assert wait_for(lambda: c.diary_texts("while c was away: neap tide") == 1, WAIT), c.log_tail()
    assert wait_for(
        lambda: (
            a.diary_texts("c, alone: the harbour silted up") == 0
            and b.diary_texts("c, alone: the harbour silted up") == 1
        ),
        WAIT,
    )
    # 0 lost, 0 applied twice: every container once in every database, every memory once
    assert wait_for(lambda: _ids(a) == _ids(b) == _ids(c), WAIT), (len(_ids(a)), len(_ids(b)), len(_ids(c)))
    for door in (b, c):
        assert door.diary_texts("spring tide peaks at 4.6 m") == 1
        assert door.diary_texts("while c was away: neap tide") == 1
        assert len(_peer_notes(door, "the #tides turn at noon")) == 1  # once, though c's copy came by way of b
    for door in (a, b, c):
        for house in door.managers():
            assert not any(
                "private musing" in json.dumps(row.body) for row in house.repos.session.query(MeshContainer).all()
            )


def _peer_notes(door: Door, text: str) -> list[list[str]]:
    """The tags of each note from peers with this text."""
    for house in door.managers():
        return [
            list(n.tags or [])
            for n in house.repos.session.query(Note).filter(Note.source == "peer", Note.text == text).all()
        ]
    return []


def _review_note(door: Door, diary_id: int) -> bool:
    """Whether the door's persona was told the mesh is back, with this emergency decision to review."""
    for house in door.managers():
        return not house.mesh.isolated() and any(
            f"diary {diary_id}" in n.text and "emergency_consensus" in n.tags
            for n in house.repos.session.query(Note).filter(Note.source == "system").all()
        )
    return False


def _case_rows(door: Door, case_id: str) -> int:
    for house in door.managers():
        return len(house.mesh.case_rows(case_id))
    return 0


def _tally(door: Door, case_id: str) -> Any:
    for house in door.managers():
        return house.mesh.tally(case_id)
    return None


def _refusals(door: Door) -> list[tuple[str | None, str]]:
    for house in door.managers():
        return [(r.sender, r.reason) for r in house.mesh.refused_recent(500)]
    return []


def _ids(door: Door) -> set[str]:
    for house in door.managers():
        return set(house.mesh.have())
    return set()


def test_forged_replayed_expired_oversized_and_flood_are_refused_and_cost_trust(doors: dict[str, Door]) -> None:
    """The attacker's containers are refused by a's door (one of each kind at least) and lower its trust; once its
    trust is below `mesh.min_trust` (-0.95 for a) a's door shares it with a's gossipsub, which from then on drops what
    the attacker publishes
    before the door (neither delivered nor relayed: p2p_sidecar.py)."""
    a = doors["a"]
    mallory = Identity.generate()
    honest = Identity.generate()
    attacker = Libp2pTransport(
        str(LIBP2P_PYTHON), listen="/ip4/127.0.0.1/tcp/0", bootstrap=[a.read()["addrs"][0]], interests=["anima"]
    )
    attacker.start()
    try:
        attacker.subscribe(SYNC)
        attacker.subscribe(ALL)
        assert wait_for(lambda: attacker.peer_count() > 0, WAIT)
        wait_for(lambda: False, 3.0)  # gossipsub meshes form on heartbeats
        # a `have` claiming the honest peer's DID is not believed (not signed by its key) …
        attacker.publish(
            SYNC,
            json.dumps(
                {"kind": "have", "did": honest.did, "peer": attacker.peer_id, "ts": 0, "sig": "00" * 64, "ids": []}
            ).encode(),
        )
        # … its own, signed, binds the attacker's libp2p peer to mallory's DID
        attacker.publish(SYNC, json.dumps({"kind": "have", **binding(mallory, attacker.peer_id), "ids": []}).encode())
        original = seal(honest, "message", {"text": "an honest peer's words"})
        attacker.publish(ALL, encode(original))  # relayed by the attacker, still the honest peer's words

        def refused() -> dict[str, int]:
            for house in a.managers():
                return house.mesh.refused_counts()
            return {}

        def dropped() -> int:
            return int(a.read().get("dropped_by_gossipsub", {}).get("graylisted", 0))

        def heard() -> list[str]:
            for house in a.managers():
                return [n.text for n in house.notes.list(source="peer", limit=300)]
            return []

        assert wait_for(lambda: "an honest peer's words" in heard(), WAIT), a.log_tail()
        sent = {"forged": 0, "replay": 0, "expired": 0, "oversized": 0, "flood": 0}
        # one of each first, each waited for at the door: four penalties leave mallory above a's min_trust (-0.95)
        firsts = {
            "forged": encode({**original, "payload": {"text": "words put in its mouth"}}),
            "expired": encode(seal(mallory, "message", {"n": -1}, ttl=1, now_ms=1_000_000)),
            "oversized": encode(seal(mallory, "message", {"pad": "x" * 70_000})),
            "replay": encode(original),
        }
        for kind, raw in firsts.items():
            attacker.publish(ALL, raw)
            sent[kind] += 1
            assert wait_for(lambda kind=kind: refused().get(kind, 0) >= 1, WAIT), (kind, refused(), a.log_tail())
        for i in range(3):  # then the barrage: refused at the door until mallory's trust is below -0.95, …
            attacker.publish(ALL, encode({**original, "payload": {"text": f"words put in its mouth {i}"}}))
            sent["forged"] += 1
            attacker.publish(ALL, encode(seal(mallory, "message", {"n": i}, ttl=1, now_ms=1_000_000)))
            sent["expired"] += 1
            attacker.publish(ALL, encode(seal(mallory, "message", {"pad": "x" * 70_000})))
            sent["oversized"] += 1
        for _ in range(2):
            attacker.publish(ALL, encode(original))
            sent["replay"] += 1
        for i in range(120):
            attacker.publish(ALL, encode(seal(mallory, "message", {"text": f"flood {i}"})))
            sent["flood"] += 1

        # the rest is refused by a's door until mallory's trust is below -0.95, then dropped by a's gossipsub — or
        # stopped before a by b's and c's (they judge mallory too and do not relay it): no sum is exact here
        assert wait_for(lambda: (mallory.did, "distrusted") in _refusals(a) or dropped() > 0, 4 * WAIT), (
            refused(),
            dropped(),
        )
        for house in a.managers():
            assert house.reputation.trust(mallory.did) < -0.95
            assert house.reputation.trust(honest.did) == 0.0  # framing the honest peer did not work
        assert not any(t.startswith("words put in its mouth") for t in heard())

        # a's door told its gossipsub: mallory's peer is below min_trust there; what it publishes now never
        # reaches a's door (no refusal of it is counted: it was not received)
        assert wait_for(lambda: a.read().get("gossip_trust", {}).get(attacker.peer_id, 0.0) < -0.95, WAIT), a.read()
        before = dropped()
        later = [seal(mallory, "message", {"text": f"after {i}"}) for i in range(5)]
        for container in later:
            attacker.publish(ALL, encode(container))
        assert wait_for(lambda: dropped() >= before + len(later), WAIT), a.read()
        for house in a.managers():
            ids = {c["id"] for c in later}
            assert not [r for r in house.mesh.refused_recent(300) if r.container_id in ids]
            assert all(house.repos.mesh.get(i) is None for i in ids)
    finally:
        attacker.stop()
