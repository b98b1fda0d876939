"""The mesh without a network: identity and did:key, signed containers and every refusal, reputation, CogSync,
consensus, and Isolated Mode + sync over the in-memory transport (the real libp2p run is
tests/integration/test_mesh_processes.py)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from managers import ManagerDeps, Managers
from managers.notes import marks_of
from memory import Database
from memory.models import DiaryEntry, MeshContainer, Note
from memory.secrets import FileSecretStore, SecretStoreError
from mesh.node import MeshNode, bound_did
from mesh.transport import InMemoryHub, InMemoryTransport
from persona.settings import MeshSettings, Settings
from reach.hmp.containers import Refused, canonical, check, encode, seal
from reach.hmp.identity import Identity, did_of, public_key_of
from reach.hmp.limits import TokenBuckets
from tests.fakes.managers import managers_over


def settings_for(tmp: Path, **mesh: object) -> Settings:
    return Settings(data_dir=str(tmp), mesh=MeshSettings(enabled=True, **mesh))  # type: ignore[arg-type]


@pytest.fixture
def persona(tmp_path: Path) -> Iterator[tuple[Database, Settings]]:
    db = Database.open(tmp_path / "a")
    yield db, settings_for(tmp_path / "a")
    db.close()


def house(db: Database, settings: Settings, identity: Identity | None = None) -> Iterator[Managers]:
    with db.unit() as repos:
        managers = Managers(repos, ManagerDeps(settings=settings))
        if identity is not None:
            managers.mesh.use_identity(identity)
        yield managers


@contextmanager
def mesh_of(tmp: Path, names: str) -> Iterator[list[MeshNode]]:
    """Personas on one in-memory hub, each with its own database, started; stopped and closed after."""
    hub = InMemoryHub()
    nodes = []
    try:
        for name in names:
            node = MeshNode(
                Database.open(tmp / name), settings_for(tmp / name, topics=["tides"], sync_every_s=0.01), hub.join(name)
            )
            node.start()
            nodes.append(node)
        yield nodes
    finally:
        for node in nodes:
            node.stop()
            node.database.close()


def signed_as(identity: Identity, container: dict[str, object]) -> dict[str, object]:
    """A container re-hashed and re-signed after a change (what a sender could do to itself)."""
    encoded = canonical(container)
    sig = base64.urlsafe_b64encode(identity.sign(encoded)).rstrip(b"=").decode()
    return {**container, "id": "sha256:" + hashlib.sha256(encoded).hexdigest(), "sig": sig}


def test_identity_is_a_did_key_in_a_0600_file(tmp_path: Path) -> None:
    db = Database.open(tmp_path / "a")
    try:
        for a in house(db, settings_for(tmp_path / "a")):
            me = a.mesh.identity()
        path = tmp_path / "a" / "mesh" / "identity.key"
        assert me.did.startswith("did:key:z6Mk")  # ed25519-pub multicodec 0xed01, base58btc
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
        for a in house(db, settings_for(tmp_path / "a")):  # a new unit of work reads the same key back
            assert a.mesh.my_did() == me.did
        with db.reading() as repos:
            assert repos.secrets.get("identity.key") is None  # the file store: nothing in the database
    finally:
        db.close()
    assert Identity.from_pem(FileSecretStore(path.parent).get("identity.key") or b"").did == me.did
    assert did_of(public_key_of(me.did)) == me.did
    assert "PRIVATE" not in repr(me)
    os.chmod(path, 0o644)
    with pytest.raises(SecretStoreError, match="0600"):
        FileSecretStore(path.parent).get("identity.key")


def test_a_container_verifies_and_every_tampering_is_refused() -> None:
    me = Identity.generate()
    container = seal(me, "message", {"text": "hello"}, ttl=60)
    assert check(encode(container)).id == container["id"]
    forged = {**container, "payload": {"text": "HELLO"}}
    with pytest.raises(Refused, match="forged"):
        check(encode(forged))
    rehashed = seal(Identity.generate(), "message", {"text": "x"})
    with pytest.raises(Refused, match="forged"):  # someone else's signature under my name
        check(encode({**rehashed, "sender": me.did}))
    with pytest.raises(Refused, match="expired"):
        check(encode(seal(me, "message", {}, ttl=1, now_ms=1_000)))
    with pytest.raises(Refused, match="oversized"):
        check(encode(seal(me, "message", {"text": "x" * 70_000})))
    with pytest.raises(Refused, match="forged"):  # a type changed after signing
        check(encode({**container, "type": "launch"}))
    with pytest.raises(Refused, match="unknown_type") as refused:  # signed, but of no known type
        check(encode(signed_as(me, {**container, "type": "launch"})))
    assert refused.value.verified


def test_refusals_are_counted_and_lower_the_senders_trust(persona: tuple[Database, Settings]) -> None:
    db, settings = persona
    peer, mallory = Identity.generate(), Identity.generate()
    good = seal(peer, "message", {"text": "hi"})
    for managers in house(db, settings):
        assert managers.mesh.receive(encode(good)).status == "accepted"
        note = managers.repos.session.query(Note).filter(Note.source == "peer").one()
        assert note.text == "hi" and f"peer:{peer.did}" in note.tags  # a note from that peer: data
        # the door knows which peer delivered it (`relay`); what no signature proves is held against that peer
        assert managers.mesh.receive(encode(good), relay=peer.did).reason == "replay"
        assert managers.reputation.trust(peer.did) == 0.0  # its own container, replayed: not held against it
        assert managers.mesh.receive(encode(good), relay=mallory.did).reason == "replay"
        assert (
            managers.mesh.receive(encode({**good, "payload": {"text": "evil"}}), relay=mallory.did).reason == "forged"
        )
        assert managers.reputation.trust(peer.did) == 0.0  # framing the peer does not work
        big = seal(mallory, "message", {"t": "x" * 70_000})
        assert managers.mesh.receive(encode(big), relay=mallory.did).reason == "oversized"
        assert managers.mesh.receive(encode(seal(mallory, "message", {}, ttl=1, now_ms=1000))).reason == "expired"
        assert managers.reputation.trust(mallory.did) < -0.5
        assert managers.mesh.refused_counts(peer.did) == {"replay": 2, "forged": 1}
        assert managers.mesh.refused_counts(mallory.did) == {"oversized": 1, "expired": 1}
        # below min_trust, even a valid container from it is refused
        assert managers.mesh.receive(encode(seal(mallory, "message", {"text": "trust me"}))).reason == "distrusted"


def test_a_flood_is_cut_by_the_token_bucket_and_costs_the_sender_no_trust(persona: tuple[Database, Settings]) -> None:
    """A rate refusal is not a fault (an honest peer leaving Isolated Mode sends its outbox at once; what was refused
    comes again by sync): counted and shown, never an evaluation."""
    db, settings = persona
    peer = Identity.generate()
    moments = iter(float(i) * 0.001 for i in range(10_000))
    limiter = TokenBuckets(rate=5, burst=10, clock=lambda: next(moments))
    for managers in house(db, settings):
        outcomes = [
            managers.mesh.receive(encode(seal(peer, "message", {"text": f"n {i}"})), limiter=limiter) for i in range(30)
        ]
        reasons = [o.reason for o in outcomes]
        assert reasons.count("") == 10 and reasons.count("flood") >= 15
        assert managers.mesh.refused_counts()["flood"] == reasons.count("flood")
        assert managers.reputation.trust(peer.did) == 0.0 and not managers.reputation.table()[0].evaluations
        assert not any(o.final for o in outcomes if o.reason == "flood")  # asked for again by sync


def test_a_rotated_or_revoked_key_is_refused_from_then_on(tmp_path: Path) -> None:
    a_db, b_db = Database.open(tmp_path / "a"), Database.open(tmp_path / "b")
    a_settings, b_settings = settings_for(tmp_path / "a"), settings_for(tmp_path / "b")
    try:
        for a in house(a_db, a_settings):
            old_did = a.mesh.my_did()
            old_message = seal(a.mesh.identity(), "message", {"text": "before"})
            rotation = a.mesh.rotate()
            new_did = a.mesh.my_did()
        stored = FileSecretStore(tmp_path / "a" / "mesh").get("identity.key")
        assert new_did != old_did and stored is not None and Identity.from_pem(stored).did == new_did
        for b in house(b_db, b_settings):
            b.reputation.evaluate(old_did, 0.8)
            assert b.mesh.receive(encode(rotation)).status == "accepted"
            assert b.mesh.receive(encode(old_message)).reason == "revoked"
            assert b.reputation.trust(new_did) > 0  # the successor inherits
        for a in house(a_db, a_settings):
            revocation = a.mesh.revoke()
        for b in house(b_db, b_settings):
            assert b.mesh.receive(encode(revocation)).status == "accepted"
            assert b.mesh.is_revoked(new_did)
    finally:
        a_db.close()
        b_db.close()


def test_trust_decays_weighs_evaluators_and_shows_drift(persona: tuple[Database, Settings]) -> None:
    db, settings = persona
    now = datetime(2026, 11, 25, 12, tzinfo=UTC)
    for managers in house(db, settings):
        reputation = managers.reputation
        reputation.evaluate("did:key:zSubject", 1.0, at=now - timedelta(days=14))
        half = reputation.trust("did:key:zSubject", now=now)
        fresh = reputation.trust("did:key:zSubject", now=now - timedelta(days=14))
        assert half < fresh  # one half-life later
        # an evaluator nobody here trusts moves nothing; a trusted one does
        reputation.evaluate("did:key:zOther", 1.0, evaluator="did:key:zStranger", at=now)
        assert reputation.trust("did:key:zOther", now=now) == 0.0
        reputation.evaluate("did:key:zFriend", 1.0, at=now)
        reputation.evaluate("did:key:zOther", 1.0, evaluator="did:key:zFriend", at=now)
        assert reputation.trust("did:key:zOther", now=now) > 0.0
        for i in range(4):
            reputation.evaluate("did:key:zX", 0.9, evaluator="did:key:zFriend", about=f"c{i}", at=now)
            reputation.evaluate("did:key:zX", 0.9, evaluator="did:key:zStranger", about=f"c{i}", at=now)
        for i in range(4, 8):
            reputation.evaluate("did:key:zX", 0.9, evaluator="did:key:zFriend", about=f"c{i}", at=now)
            reputation.evaluate("did:key:zX", -0.9, evaluator="did:key:zStranger", about=f"c{i}", at=now)
        drift = reputation.drift(window=4)
        assert drift["did:key:zStranger"]["drift"] > 1.0
        reputation.block("did:key:zX", "spam")
        assert reputation.rank(["did:key:zX", "did:key:zFriend"]) == ["did:key:zFriend"]


def test_cogsync_arrives_as_data_from_a_peer_and_the_owner_can_reject_it(tmp_path: Path) -> None:
    a_db, b_db = Database.open(tmp_path / "a"), Database.open(tmp_path / "b")
    a_settings, b_settings = settings_for(tmp_path / "a"), settings_for(tmp_path / "b")
    try:
        for a in house(a_db, a_settings):
            a.diary.add("the spring tide peaks at 4.6 m", tags=["tides"])
            a.diary.add("a private thought", tags=["self"])
            published = a.mesh.publish("tides")
            assert len(published) == 1 and a.mesh.publish("tides") == []  # never twice
            sender = a.mesh.my_did()
        for b in house(b_db, b_settings):
            b.mesh.subscribe("tides")
            outcome = b.mesh.receive(encode(published[0]))
            assert outcome.applied and outcome.applied.startswith("diary ")
            entry = b_db_entry = b.repos.diary.get(int(outcome.applied.split()[1]))
            assert "from:peer" in entry.tags and f"peer:{sender}" in entry.tags
            item = b.repos.items.find("diary", entry.id)
            assert item is not None and item.meta["origin"] == "peer" and item.meta["peer"] == sender
            assert [row.id for row in b.mesh.learned()] == [published[0]["id"]]
            assert b.mesh.reject(published[0]["id"])
            assert b.repos.session.get(DiaryEntry, b_db_entry.id).status == "archived"
            assert b.reputation.trust(sender) < 0
    finally:
        a_db.close()
        b_db.close()


def test_an_ethics_case_is_decided_by_trust_weighted_votes(tmp_path: Path) -> None:
    dbs = [Database.open(tmp_path / n) for n in "abc"]
    settings = [settings_for(tmp_path / n) for n in "abc"]
    try:
        for a in house(dbs[0], settings[0]):
            case = a.mesh.open_case("May a persona share its owner's notes?", ["never without consent", "always"])
            queued = a.mesh.outbox()
            solutions = [c for c in queued if c["type"] == "solution"]
            a.mesh.vote(case["id"], solution=solutions[0]["id"])
            queued = a.mesh.outbox()
        votes = []
        for index, db in enumerate(dbs[1:], start=1):
            for peer in house(db, settings[index]):
                for container in queued:
                    assert peer.mesh.receive(encode(container)).status == "accepted"
                votes.append(peer.mesh.vote(case["id"], solution=solutions[index - 1]["id"]))
        for a in house(dbs[0], settings[0]):
            for vote in votes:
                a.mesh.receive(encode(vote))
            a.reputation.evaluate(votes[1]["sender"], -1.0)  # the one voting "always" is distrusted here
            tally = a.mesh.tally(case["id"])
            assert tally.votes == 3 and tally.result == "never without consent"
            assert a.mesh.open_cases()[0].case_id == case["id"]
    finally:
        for db in dbs:
            db.close()


def test_isolated_mode_keeps_the_outbox_and_sync_loses_nothing_and_applies_nothing_twice(tmp_path: Path) -> None:
    with mesh_of(tmp_path, "abc") as nodes:
        a, b, c = nodes
        c.transport.stop()  # c is unreachable: a and b go on
        with a.managers() as house_a:
            house_a.diary.add("neap tide today", tags=["tides"])
            house_a.mesh.publish("tides")
            house_a.mesh.compose("message", {"text": "hello all"})
        with c.managers() as house_c:  # c, isolated, keeps thinking and queues
            house_c.diary.add("c alone: low water at noon", tags=["tides"])
            house_c.mesh.publish("tides")
        for _ in range(5):
            for node in nodes:
                node.step(0)
        assert c.isolated
        with c.managers() as house_c:
            assert len(house_c.mesh.outbox()) == 1  # waiting
        c.transport.start()
        for _ in range(8):
            for node in nodes:
                node.step(0)
        for node in nodes:
            with node.managers() as managers:
                rows = managers.repos.session.query(MeshContainer).filter(MeshContainer.type != "hello").all()
                assert len(rows) == 3, [r.type for r in rows]  # a's cogsync + message, c's cogsync: 0 lost
                hellos = managers.repos.session.query(MeshContainer).filter(MeshContainer.type == "hello").all()
                assert len({r.sender for r in hellos}) == len(hellos) == 3  # each door's signed hello, once
                learned = managers.repos.diary.list(limit=20, tag="from:peer")
                texts = sorted(e.text for e in learned)
                assert len(texts) == len(set(texts))  # 0 applied twice
                assert len(texts) == (1 if node in (a, c) else 2)
                assert managers.mesh.outbox() == []


def test_sync_messages_are_small_json(tmp_path: Path) -> None:
    hub = InMemoryHub()
    db = Database.open(tmp_path / "a")
    node = MeshNode(db, settings_for(tmp_path / "a"), hub.join("a"))
    listener = hub.join("ear")
    listener.subscribe("anima/sync")
    node.start()
    node.announce()
    message = json.loads(listener.poll(0)[0].data)
    assert message["kind"] == "have" and message["did"] == node.did and message["ids"] == []
    assert bound_did(message, "a") == node.did  # signed: "transport peer a is this DID"
    assert bound_did(message, "ear") is None  # replayed by another peer: not its binding
    assert bound_did({**message, "did": Identity.generate().did}, "a") is None
    db.close()


def test_the_memory_page_marks_what_came_from_peers_and_archive_rejects_it(web) -> None:  # type: ignore[no-untyped-def]
    peer = Identity.generate()
    container = seal(
        peer, "cogsync", {"kind": "diary", "text": "peers say the tide turns at six", "tags": ["tides"]}, topic="tides"
    )
    with web.services.db.unit() as repos:
        managers = Managers(repos, ManagerDeps(settings=settings_for(web.data_dir)))
        managers.mesh.subscribe("tides")
        outcome = managers.mesh.receive(encode(container))
        assert outcome.applied and outcome.applied.startswith("diary ")
        own = managers.diary.add("my own tide note", tags=["tides"])
    ref = outcome.applied.split()[1]
    page = web.client.get("/memory", params={"tier": "diary"}).text
    row = page[page.index(f'id="row-diary-{ref}"') :]
    row = row[: row.index("</tr>")]
    assert "from peers" in row and peer.did[:20] in row
    mine = page[page.index(f'id="row-diary-{own.id}"') :]
    assert "from peers" not in mine[: mine.index("</tr>")]
    assert web.client.post(f"/api/memory/diary/{ref}/archive").status_code == 200
    with web.services.db.unit() as repos:
        assert repos.diary.get(int(ref)).status == "archived"


def test_cogconsensus_on_a_claim_is_a_trust_weighted_mean(tmp_path: Path) -> None:
    a_db, b_db = Database.open(tmp_path / "a"), Database.open(tmp_path / "b")
    a_settings, b_settings = settings_for(tmp_path / "a"), settings_for(tmp_path / "b")
    try:
        for a in house(a_db, a_settings):
            claim = a.mesh.open_case("The harbour silts up every spring", kind="claim")
            a.mesh.vote(claim["id"], score=0.8)
        for b in house(b_db, b_settings):
            assert b.mesh.receive(encode(claim)).status == "accepted"
            vote = b.mesh.vote(claim["id"], score=-1.0)
        for a in house(a_db, a_settings):
            a.mesh.receive(encode(vote))
            unknown = a.mesh.tally(claim["id"])  # b unknown here: counted, weighing nothing
            assert unknown.votes == 2 and unknown.unweighed == 1 and unknown.score == pytest.approx(0.8)
            a.reputation.evaluate(vote["sender"], 1.0)  # trust tanh(1) ≈ 0.762: (0.8 − 0.762) / 1.762 ≈ 0.022
            trusted = a.mesh.tally(claim["id"])
            assert trusted.unweighed == 0 and trusted.score == pytest.approx(0.0218, abs=1e-3)
    finally:
        a_db.close()
        b_db.close()


def test_the_mesh_commands_declare_their_effects_and_queue_signed_containers(
    persona: tuple[Database, Settings],
) -> None:
    from nodes.commands import FAMILIES, Registry
    from nodes.commands.model import Command
    from nodes.commands.spec import CommandContext

    registry = Registry(FAMILIES)
    effects = {
        t: registry.get(t).effect
        for t in (
            "mesh.send",
            "mesh.publish",
            "mesh.subscribe",
            "mesh.case",  # type: ignore[union-attr]
            "mesh.vote",
            "mesh.adopt",
            "mesh.rotate",
            "mesh.status",
            "reputation.evaluate",
            "reputation.block",
            "reputation.show",
        )
    }
    assert effects == {
        "mesh.send": "external",
        "mesh.publish": "external",
        "mesh.subscribe": "external",
        "mesh.case": "external",
        "mesh.vote": "external",
        "mesh.adopt": "modify_self",
        "mesh.rotate": "modify_self",
        "mesh.status": "read",
        "reputation.evaluate": "external",
        "reputation.block": "write_self",
        "reputation.show": "read",
    }
    db, settings = persona
    spec = registry.get("mesh.send")
    assert spec is not None and spec.off_because(Settings(data_dir=settings.data_dir)) is not None  # off by default
    with pytest.raises(Exception, match="to"):
        spec.check({"to": "not a did", "text": "hi"})
    peer = Identity.generate()
    with db.unit() as repos:
        ctx = CommandContext(
            house=managers_over(repos, settings),
            thread_id="main",
            tick=1,
            llm_id=None,
            settings=settings,
            now=datetime.now(UTC),
        )
        args = spec.check({"to": peer.did, "text": "hello peer"})
        result = spec.handler(Command(cmd_id="c1", type="mesh.send", args=args), ctx)
        assert "queued" in result.output
        queued = ctx.managers.mesh.outbox()
        assert len(queued) == 1 and check(encode(queued[0])).container["payload"] == {"text": "hello peer"}
        assert queued[0]["recipient"] == peer.did


def test_a_peer_the_owner_added_by_its_did_is_seen_when_its_have_proves_it(tmp_path: Path) -> None:
    with mesh_of(tmp_path, "ab") as nodes:
        a, b = nodes
        with a.managers() as house_a:
            a_did = house_a.mesh.my_did()
        with b.managers() as house_b:
            house_b.peers.add("ada", did=a_did)
            house_b.peers.add("stranger", did="did:key:z6MkNotOnTheWire")
        for _ in range(4):
            for node in nodes:
                node.step(0)
        with b.managers() as house_b:
            ada, stranger = house_b.peers.get("ada"), house_b.peers.get("stranger")
            assert ada.last_seen is not None and ada.p2p_addrs == ["/p2p/a"]
            assert stranger.last_seen is None and stranger.p2p_addrs == []
            assert [p.name for p in house_b.peers.list()] == ["ada", "stranger"]  # nobody was added by the wire


def test_a_sealed_key_is_ciphertext_in_the_database_and_opens_only_with_the_deployment_key(tmp_path: Path) -> None:
    def sealed_with(key: str | None) -> Settings:
        settings = settings_for(tmp_path / "a")
        settings.vault, settings.secrets_key = "sealed", key  # type: ignore[assignment]  # validated: SecretStr
        return settings

    key = base64.urlsafe_b64encode(b"k" * 32).decode()
    sealed = sealed_with(None)
    db = Database.open(tmp_path / "a")
    try:
        for a in house(db, sealed):
            with pytest.raises(SecretStoreError, match="ANIMA_SECRETS_KEY is not set"):
                a.mesh.identity()  # no key: refused, never kept in clear
        with_key = sealed_with(key)
        for a in house(db, with_key):
            me = a.mesh.identity()
        with db.reading() as repos:
            row = repos.secrets.get("identity.key")
            assert row is not None and b"PRIVATE KEY" not in row.sealed and me.to_pem() not in row.sealed
            assert len(row.nonce) == 12
        assert not (tmp_path / "a" / "mesh" / "identity.key").exists()
        for a in house(db, with_key):
            assert a.mesh.my_did() == me.did  # another unit of work (another worker) opens the same key
            a.mesh.rotate()
            rotated = a.mesh.my_did()
        for a in house(db, with_key):
            assert a.mesh.my_did() == rotated != me.did
        other = sealed_with(base64.urlsafe_b64encode(b"o" * 32).decode())
        for a in house(db, other):
            with pytest.raises(SecretStoreError, match="another ANIMA_SECRETS_KEY"):
                a.mesh.identity()  # a worker with the wrong key is refused, not given a new identity
        for a in house(db, sealed_with("c2hvcnQ=")):
            with pytest.raises(SecretStoreError, match="not 32 bytes"):
                a.mesh.identity()
    finally:
        db.close()


def test_the_node_shares_each_peers_trust_and_the_blocklist_with_its_transport(tmp_path: Path) -> None:
    with mesh_of(tmp_path, "abc") as (a, b, c):
        for _ in range(20):
            for node in (a, b, c):
                node.step(0.01)
        assert set(a.peer_dids.values()) == {b.did, c.did}  # their signed `have`s bound them
        for house_a in house(a.database, a.settings):
            house_a.reputation.evaluate(c.did, -0.9, reason="lies")
            house_a.reputation.block(b.did, "spam")
        a.last_trust = 0.0
        a.step(0.01)
        transport = a.transport
        assert isinstance(transport, InMemoryTransport)
        assert transport.scores["c"] < -0.5 and transport.scores["b"] == 0.0
        assert transport.blocked == {"b"}
        updates = transport.trust_updates
        a.last_trust = 0.0
        a.step(0.01)
        assert transport.trust_updates == updates  # unchanged: not sent again


# ---- distributed notes: F2F replication through friends -------------------------------------------------------------


def befriend(node: MeshNode, *others: MeshNode, tags: tuple[str, ...] = ("friend",)) -> None:
    """`others` become `node`'s peers tagged `tags` (the owner's decision)."""
    with node.managers() as managers:
        for other in others:
            peer = managers.peers.add(f"p{other.transport.peer_id}", did=other.did)
            managers.peers.set_tags(peer.id, tags)


def rounds(nodes: list[MeshNode], n: int = 8) -> None:
    for _ in range(n):
        for node in nodes:
            node.step(0)


def peer_notes(node: MeshNode) -> list[Note]:
    with node.managers() as managers:
        notes = managers.repos.session.query(Note).filter(Note.source == "peer").all()
        managers.repos.session.expunge_all()
        return notes


def test_a_public_note_reaches_a_friend_of_a_friend_once_and_a_private_one_never_leaves(tmp_path: Path) -> None:
    with mesh_of(tmp_path, "abcd") as nodes:
        a, b, c, d = nodes
        befriend(a, b)
        befriend(b, a, c)
        befriend(b, d, tags=("colleague",))  # d is b's peer, not its friend
        befriend(c, b)
        befriend(d, b)
        with a.managers() as managers:
            private = managers.notes.add("my private musing", llm_id="local-model", tags=["secret"])
            public = managers.notes.add(
                "the #tides turn at noon, @bob", llm_id="local-model", tags=["mine"], priority=2
            )
            sent = managers.notes.share(public.id)
            assert [e["recipient"] for e in sent] == [b.did]
            assert "public" in managers.repos.notes.get(public.id).tags
            assert managers.repos.notes.get(private.id).tags == ["secret"]
        rounds(nodes)
        [at_b], [at_c] = peer_notes(b), peer_notes(c)
        assert at_b.text == at_c.text == "the #tides turn at noon, @bob"
        assert f"origin:{a.did}" in at_b.tags and "hops:1" in at_b.tags and f"peer:{a.did}" in at_b.tags
        assert f"origin:{a.did}" in at_c.tags and "hops:2" in at_c.tags and f"peer:{b.did}" in at_c.tags
        for note in (at_b, at_c):  # a's local fields are stripped; the parsed marks travel
            assert not {"mine", "public", "secret"} & set(note.tags) and {"#tides", "@bob"} <= set(note.tags)
            assert note.llm_id is None and note.author_id is None and not note.hidden and note.priority == 2
            assert note.read is False
        assert peer_notes(d) == [] and peer_notes(a) == []  # no friend relays to d; nothing comes back to a
        for node in nodes:  # the private note left a in no container, anywhere
            with node.managers() as managers:
                bodies = [json.dumps(r.body) for r in managers.repos.session.query(MeshContainer).all()]
                assert not any("private musing" in body for body in bodies)
        with c.managers() as managers:  # a's signature, carried through b: c knows whose words they are
            [row] = managers.repos.session.query(MeshContainer).filter(MeshContainer.local_tier == "note").all()
            assert row.sender == b.did and row.body["payload"]["note"]["sender"] == a.did
            assert check(encode(row.body["payload"]["note"])).sender == a.did


def test_a_relay_loop_applies_a_note_once_and_the_hop_limit_and_blocks_hold(tmp_path: Path) -> None:
    with mesh_of(tmp_path, "abc") as nodes:
        a, b, c = nodes
        befriend(a, b, c)
        befriend(b, a, c)
        befriend(c, a, b)  # a triangle: every note arrives at b and c from a and again from each other
        with a.managers() as managers:
            managers.notes.share(managers.notes.add("round and round").id)
        rounds(nodes, 12)
        for node in (b, c):
            assert [n.text for n in peer_notes(node)] == ["round and round"]
        with b.managers() as managers:  # c's relay reached b, and was not taken or relayed again
            rows = (
                managers.repos.session.query(MeshContainer)
                .filter(MeshContainer.type == "note", MeshContainer.recipient == b.did)
                .all()
            )
            assert sorted(r.sender for r in rows) == sorted([a.did, c.did])
            assert sum(1 for r in rows if r.local_tier == "note") == 1
        assert peer_notes(a) == []
        with c.managers() as managers:
            managers.reputation.block(a.did, "no more of a's notes")
        with b.managers() as managers:
            managers.notes.share(managers.notes.add("b speaks").id)
        with a.managers() as managers:
            managers.notes.share(managers.notes.add("a again").id)
        rounds(nodes, 12)
        assert sorted(n.text for n in peer_notes(c)) == ["b speaks", "round and round"]  # a's, even via b: no
        assert "b speaks" in [n.text for n in peer_notes(a)]


def test_a_note_goes_no_further_than_mesh_note_hops(tmp_path: Path) -> None:
    hub = InMemoryHub()
    nodes = [
        MeshNode(Database.open(tmp_path / n), settings_for(tmp_path / n, sync_every_s=0.01, note_hops=1), hub.join(n))
        for n in "abc"
    ]
    try:
        for node in nodes:
            node.start()
        a, b, c = nodes
        with a.managers() as managers:
            with pytest.raises(ValueError, match="no friends"):  # no friend yet: nothing leaves, nothing is marked
                managers.notes.share(managers.notes.add("too early").id)
            assert managers.repos.notes.list(limit=5)[0].tags == [] and managers.mesh.outbox() == []
        befriend(a, b)
        befriend(b, a, c)
        befriend(c, b)
        with a.managers() as managers:
            managers.notes.share(managers.notes.add("only to my friends").id)
        rounds(nodes)
        assert [n.text for n in peer_notes(b)] == ["only to my friends"] and peer_notes(c) == []
    finally:
        for node in nodes:
            node.stop()
            node.database.close()


def test_a_notes_mentions_and_hashtags_are_parsed_once_and_an_address_is_no_mention() -> None:
    assert marks_of("@ada, see #tides and #tides-2 (#tides again); mail bob@example.com &#39; then @bob.") == (
        ["ada", "bob"],
        ["tides", "tides-2"],
    )
    assert marks_of("nothing to mark: 3#4, a@b") == ([], [])
