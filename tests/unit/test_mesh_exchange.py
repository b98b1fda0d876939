"""Peers matter to the mind (managers/exchange.py, managers/peers.py `met`): a DID proven on the mesh is a peer the
persona sees; a peer's consensus case, goal or offer reaches it as a note from that peer (data), listed by mesh.cases,
mesh.goals and mesh.offers; a goal is made the persona's own, and an offered strategy, thinking method or model address
is used, only through accept_* (the `modify_self` commands the owner approves: tests/unit/test_every_command.py);
CogSync
carries a concept's links. Two personas' managers over their own SQLite databases; containers signed with real keys and
handed over as bytes, the door's way in. (The same between real libp2p doors:
tests/integration/test_mesh_peers_mind.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from managers import ManagerDeps, Managers
from managers.audience import SHAREABLE, Audience, Role
from managers.errors import NotFound, Refused
from memory import Database
from memory.models import Goal, MeshContainer, Note
from persona.settings import MeshSettings, Settings
from reach.hmp.containers import encode, seal
from reach.hmp.identity import Identity


class Persona:
    def __init__(self, root: Path, name: str) -> None:
        self.settings = Settings(data_dir=str(root / name), mesh=MeshSettings(enabled=True))
        self.db = Database.open(root / name)

    @contextmanager
    def house(self, audience: Audience | None = None) -> Iterator[Managers]:
        with self.db.unit() as repos:
            if audience is None:
                yield Managers(repos, ManagerDeps(settings=self.settings))
            else:
                yield Managers(repos, ManagerDeps(settings=self.settings), actor=audience)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Persona, Persona]]:
    a, b = Persona(tmp_path, "a"), Persona(tmp_path, "b")
    try:
        yield a, b
    finally:
        a.db.close()
        b.db.close()


def hand_over(sender: Persona, receiver: Persona, type_: str | None = None) -> list[str]:
    """What waits in the sender's outbox (of one type), received by the receiver as the door would: the outcomes."""
    with sender.house() as house:
        bodies = [c for c in house.mesh.outbox() if type_ is None or c["type"] == type_]
        house.mesh.mark_sent([c["id"] for c in bodies])
    with receiver.house() as house:
        return [house.mesh.receive(encode(c)).status for c in bodies]


def peer_notes(persona: Persona, tag: str) -> list[Note]:
    with persona.house() as house:
        rows = [n for n in house.repos.session.query(Note).filter(Note.source == "peer").all() if tag in (n.tags or [])]
        house.repos.session.expunge_all()
        return rows


def test_a_did_met_on_the_mesh_is_a_peer_the_persona_sees_and_a_guest_does_not(pair) -> None:
    a, _ = pair
    stranger = Identity.generate().did
    with a.house() as house:
        met = house.peers.met(
            stranger, transport="12D3KooWStranger", offers={"topics": ["tides"], "agent": "anima", "secret": "not kept"}
        )
        assert (met.added_by, met.offers) == ("met", {"agent": "anima", "topics": ["tides"]})
        shown, more = house.peers.for_prompt()
        assert [(p.name, p.did, p.met) for p in shown] == [(met.name, stranger, True)] and more == 0
    from nodes.steps.s04_prepare_context.standing import peer_lines

    with a.house() as house:
        [line] = peer_lines(house, Audience(Role.OWNER), "en")
        assert line.startswith(f"- {met.name}; {stranger}; trust: none yet") and "not added by my owner" in line
        assert "tides" not in line  # what a peer says of itself is not in the prompt's block
        assert peer_lines(house, Audience(Role.GUEST, person_id=2), "en") == []  # not the guest's to see
        house.peers.set_tags(met.id, [SHAREABLE])
    with a.house() as house:
        assert len(peer_lines(house, Audience(Role.GUEST, person_id=2), "en")) == 1


def test_a_peers_case_reaches_the_persona_as_a_note_it_votes_on(pair) -> None:
    a, b = pair
    with a.house() as house:
        case = house.mesh.open_case("Share the owner's notes with peers?", ["only with consent", "freely"])
        mine = house.mesh.open_case("A claim: the tide turns at six", kind="claim")
    assert hand_over(a, b) == ["accepted"] * 4
    [note] = [n for n in peer_notes(b, "mesh:case") if case["id"] in n.text]
    assert "Share the owner's notes with peers?" in note.text and "mesh.vote" in note.text
    assert len(peer_notes(b, "mesh:case")) == 2  # the claim too, once each
    with b.house() as house:
        listed = {c["id"]: c for c in house.exchange.cases()}
        assert set(listed) == {case["id"], mine["id"]} and listed[case["id"]]["my_vote"] is None
        solutions = listed[case["id"]]["solutions"]
        assert sorted(solutions.values()) == ["freely", "only with consent"]
        keep = next(sid for sid, text in solutions.items() if text == "only with consent")
        house.mesh.vote(case["id"], solution=keep)
    with b.house() as house:
        assert {c["id"]: c["my_vote"] for c in house.exchange.cases()}[case["id"]] == {
            "case": case["id"],
            "solution": keep,
        }
        assert [c["id"] for c in house.exchange.cases(unvoted=True)] == [mine["id"]]  # what still waits for me
    assert hand_over(b, a, "vote") == ["accepted"]
    with a.house() as house:
        assert house.mesh.tally(case["id"]).votes == 1
        assert peer_notes(a, "mesh:case") == []  # my own cases are no news to me


def test_cogsync_carries_a_concepts_links(pair) -> None:
    a, b = pair
    with a.house() as house:
        tide, moon, sea = (
            house.repos.concepts.add(n, d, tags=["tides"])
            for n, d in (("spring tide", "The highest tide."), ("moon", "Pulls the sea."), ("sea", "Salt water."))
        )
        house.repos.links.add(tide.id, moon.id, "caused_by", weight=2.0)
        house.repos.links.add(tide.id, sea.id, "part_of")
        [sent] = [c for c in house.mesh.publish("tides", tier="concept") if c["payload"]["name"] == "spring tide"]
        assert sorted((item["relation"], item["target"], item["weight"]) for item in sent["payload"]["links"]) == [
            ("caused_by", "moon", 2.0),
            ("part_of", "sea", 1.0),
        ]
    with b.house() as house:
        house.mesh.subscribe("tides")
        local_sea = house.repos.concepts.add("sea", "Mine.")  # b knows a sea of its own: the link goes to it
    assert hand_over(a, b) == ["accepted"] * 3
    with b.house() as house:
        [learned] = [c for c in house.repos.concepts.list(limit=50) if c.name.startswith("spring tide (from ")]
        edges = {
            (house.repos.concepts.get(item.target_id).name, item.relation, item.weight)
            for item in house.repos.links.list(learned.id)
            if item.source_id == learned.id
        }
        moon = next(c.name for c in house.repos.concepts.list(limit=50) if c.name.startswith("moon (from "))
        assert edges == {(moon, "caused_by", 2.0), ("sea", "part_of", 1.0)}  # moon: the one learned from a
        assert all("from:peer" in (item.tags or []) for item in house.repos.links.list(learned.id))
        assert house.repos.concepts.get(local_sea.id).description == "Mine."


def test_links_ride_only_on_a_concept_and_within_bounds(pair) -> None:
    a, _ = pair
    peer = Identity.generate()
    with a.house() as house:
        house.mesh.subscribe("tides")
        diary = seal(
            peer, "cogsync", {"kind": "diary", "text": "x", "links": [{"relation": "r", "target": "t"}]}, topic="tides"
        )
        many = seal(
            peer,
            "cogsync",
            {
                "kind": "concept",
                "name": "n",
                "text": "x",
                "links": [{"relation": "r", "target": f"t{i}"} for i in range(21)],
            },
            topic="tides",
        )
        outcomes = [house.mesh.receive(encode(c)) for c in (diary, many)]
        assert [(o.status, o.reason) for o in outcomes] == [("refused", "malformed")] * 2
        assert "only a concept carries links" in outcomes[0].detail


def test_a_peers_goal_is_a_note_until_accepted_and_its_publisher_hears_of_it(pair) -> None:
    a, b = pair
    with a.house() as house:
        goal = house.goals.add(
            "Map the harbour's shoals",
            description="Every sandbank, with depths.",
            horizon="long",
            success_criteria=["a chart"],
            tags=["sea"],
        )
        published = house.exchange.publish_goal(goal.id)
        with pytest.raises(Refused, match="published already"):
            house.exchange.publish_goal(goal.id)
    assert published["payload"]["local"] == f"goal {goal.id}" and published["payload"]["tags"] == ["sea"]
    assert hand_over(a, b) == ["accepted"]
    [note] = peer_notes(b, "mesh:goal")
    assert "Map the harbour's shoals" in note.text and "mesh.goal_accept" in note.text
    with b.house() as house:
        before = house.repos.session.query(Goal).count()
        [pending] = house.exchange.peer_goals()
        assert (pending.id, pending.state, pending.payload["title"]) == (
            published["id"],
            "pending",
            "Map the harbour's shoals",
        )
        assert house.repos.session.query(Goal).count() == before  # nothing is the persona's before it accepts
        goal_id, status = house.exchange.accept_goal(published["id"])
        assert (status["recipient"], status["payload"]) == (
            published["sender"],
            {"goal": published["id"], "status": "accepted"},
        )
    with b.house() as house:
        taken = house.goals.get(goal_id)
        assert (taken.title, taken.horizon, taken.success_criteria) == ("Map the harbour's shoals", "long", ["a chart"])
        assert "from:peer" in taken.tags
        assert house.repos.taints.of("goal", [goal_id])[str(goal_id)][0]["origin"] == "peer"  # fenced where shown
        assert [g.state for g in house.exchange.peer_goals()] == ["accepted"]
        with pytest.raises(Refused, match="taken already"):
            house.exchange.accept_goal(published["id"])
        with pytest.raises(Refused, match="theirs to publish"):
            house.exchange.publish_goal(goal_id)
    assert hand_over(b, a, "goal_status") == ["accepted"]
    [told] = peer_notes(a, "mesh:goal")
    assert "accepted my published goal “Map the harbour's shoals”" in told.text


def test_a_declined_goal_is_set_aside_and_an_unknown_one_is_not_found(pair) -> None:
    a, b = pair
    with a.house() as house:
        published = house.exchange.publish_goal(house.goals.add("Count the gulls").id)
    hand_over(a, b)
    with b.house() as house:
        house.exchange.decline_goal(published["id"])
        assert [g.state for g in house.exchange.peer_goals()] == ["declined"]
        with pytest.raises(Refused, match="declined"):
            house.exchange.accept_goal(published["id"])
        with pytest.raises(NotFound):
            house.exchange.accept_goal("sha256:" + "0" * 64)
    with a.house() as house:
        assert house.mesh.outbox() == []  # declining tells the publisher nothing


def test_offered_strategies_and_methods_wait_unused_until_accepted(pair) -> None:
    a, b = pair
    with a.house() as house:
        house.strategies.add_strategy(
            name="start-with-an-analogy",
            instruction="Begin with an analogy from the sea.",
            mechanism_class="context",
            cost=1,
        )
        house.strategies.add_method(name="check-the-converse", instruction="Ask whether the converse also holds.")
        house.exchange.offer("strategy", "start-with-an-analogy")
        house.exchange.offer("thinking_method", "check-the-converse")
        with pytest.raises(Refused, match="built in"):
            house.exchange.offer("strategy", house.strategies.strategies()[0].name)
    assert hand_over(a, b) == ["accepted", "accepted"]
    assert len(peer_notes(b, "mesh:offer")) == 2
    with b.house() as house:
        offers = {o.type: o for o in house.exchange.offers()}
        assert {o.state for o in offers.values()} == {"pending"}
        assert "start-with-an-analogy" not in {s.name for s in house.strategies.strategies()}  # unused while pending
        assert "check-the-converse" not in {m.name for m in house.strategies.methods()}
        assert house.exchange.accept_offer(offers["strategy"].id) == "strategy start-with-an-analogy"
        house.exchange.decline_offer(offers["thinking_method"].id)
    with b.house() as house:
        strategy = house.strategies.find_strategy("start-with-an-analogy")
        assert (strategy.instruction, strategy.mechanism_class, strategy.cost) == (
            "Begin with an analogy from the sea.",
            "context",
            1,
        )
        assert strategy.origin["container"] == offers["strategy"].id
        assert "check-the-converse" not in {m.name for m in house.strategies.methods()}
        assert {o.type: o.state for o in house.exchange.offers()} == {
            "strategy": "accepted",
            "thinking_method": "declined",
        }
        with pytest.raises(Refused, match="theirs to offer"):
            house.exchange.offer("strategy", "start-with-an-analogy")


def test_a_model_address_is_added_only_when_accepted_and_after_its_health_check(pair) -> None:
    from tests.integration.servers import scripted_llm_server

    a, b = pair
    with scripted_llm_server() as server:
        with a.house() as house:
            house.models.add(server.url, "scripted", name="harbour-model", api_key="sk-never-travels", check=False)
            offered = house.exchange.offer("model_address", "harbour-model")
        assert offered["payload"] == {
            "name": "harbour-model",
            "base_url": server.url.rstrip("/"),
            "model": "scripted",
            "notes": "harbour-model",
        }
        assert "sk-never-travels" not in encode(offered).decode()
        assert hand_over(a, b) == ["accepted"]
        with b.house() as house:
            assert "harbour-model" not in {e.id for e in house.repos.llm_registry.all()}  # not used while pending
            [pending] = house.exchange.offers()
            assert house.exchange.accept_offer(pending.id) == "model harbour-model"
        with b.house() as house:
            entry = next(e for e in house.repos.llm_registry.all() if e.id == "harbour-model")
            assert (entry.model, entry.config["base_url"], entry.config["from_peer"]) == (
                "scripted",
                server.url.rstrip("/"),
                pending.sender,
            )
            assert "api_key_file" not in entry.config
            assert house.repos.config.added_llms()["harbour-model"]["config"]["from_peer"] == pending.sender
            with pytest.raises(Refused, match="theirs to offer"):
                house.exchange.offer("model_address", "harbour-model")
    bad = seal(Identity.generate(), "model_address", {"name": "m", "base_url": "file:///etc/passwd", "model": "x"})
    with b.house() as house:
        assert house.mesh.receive(encode(bad)).reason == "malformed"


def test_a_model_whose_server_fails_its_check_is_not_added_and_stays_pending(pair) -> None:
    a, b = pair
    peer = Identity.generate()
    offer = seal(peer, "model_address", {"name": "gone", "base_url": "http://127.0.0.1:9/v1", "model": "x"})
    with b.house() as house:
        assert house.mesh.receive(encode(offer)).status == "accepted"
        with pytest.raises(Refused, match="was not added"):
            house.exchange.accept_offer(offer["id"])
    with b.house() as house:
        assert [o.state for o in house.exchange.offers()] == ["pending"]
        assert "gone" not in {e.id for e in house.repos.llm_registry.all()}
        assert house.repos.session.get(MeshContainer, offer["id"]).local_tier is None


def test_a_flood_of_fresh_dids_keeps_the_met_peers_bounded_and_never_pushes_out_an_added_one(pair, monkeypatch) -> None:
    import managers.peers as peers_module

    monkeypatch.setattr(peers_module, "MET_KEPT", 3)
    a, _ = pair
    start = datetime(2026, 1, 1, tzinfo=UTC)
    dids = [Identity.generate().did for _ in range(8)]
    with a.house() as house:
        house.peers.add("ada", did=dids[0])  # the owner's
        tagged = house.peers.met(dids[1], now=start)
        house.peers.set_tags(tagged.id, ["friend"])
        for i, did in enumerate(dids[2:], 2):
            house.peers.met(did, transport=f"12D3KooW{i}", now=start + timedelta(minutes=i))
    with a.house() as house:
        kept = {p.did for p in house.peers.list()}
        assert dids[0] in kept and dids[1] in kept  # added, and touched by the owner: never pushed out
        assert {d for d in dids[2:] if d in kept} == {dids[6], dids[7]}  # the most recently seen of the untouched
        assert len(house.peers.discovered()) == 3


def test_an_a2a_agent_written_to_by_its_url_is_met_with_what_its_card_offers(pair) -> None:
    a, _ = pair
    url = "http://127.0.0.1:8802"
    now = datetime(2026, 3, 1, tzinfo=UTC)
    with a.house() as house:
        house.peers.send(url, "Do you know the tides?", thread_id=None, llm_id=None, now=now, kind="plain")
        [row] = house.repos.peers.outbox()
        assert house.peers.known() == []  # writing to it is not meeting it: it must answer first
        house.peers.delivered(
            row.id,
            reply="I do.",
            agent={"agent": "Juniper", "description": "A tide table.", "skills": ["tides", "moon"], "extra": "dropped"},
        )
    with a.house() as house:
        [met] = house.peers.known()
        assert (met.name, met.a2a_url, met.added_by, met.did) == ("agent-127-0-0-1-8802", url, "met", None)
        assert met.offers == {"agent": "Juniper", "description": "A tide table.", "skills": ["tides", "moon"]}
        house.peers.add("juniper", a2a_url=url)  # the owner's add takes the same row over
    with a.house() as house:
        [juniper] = house.peers.known()
        assert (juniper.id, juniper.name, juniper.added_by) == (met.id, "juniper", "owner")


def test_a_peers_signed_hello_makes_it_a_peer_met_with_the_topics_it_listens_to(pair) -> None:
    a, b = pair
    with a.house() as house:
        house.mesh.subscribe("reef")
        house.mesh.hello()
        did_a = house.mesh.my_did()
    assert hand_over(a, b) == ["accepted"]
    with b.house() as house:
        [met] = house.peers.known()
        assert (met.did, met.added_by, met.offers) == (did_a, "met", {"agent": "anima", "topics": ["reef"]})
        assert "(met, not added)" in _agents_list(house) and "says of itself: anima; topics reef" in _agents_list(house)
    with a.house() as house:
        house.mesh.compose("message", {"text": "hello b"})
    assert hand_over(a, b) == ["accepted"]
    with b.house() as house:  # a name nobody gave it is not a name to label it by: its DID is
        [note] = house.repos.notes.list(source="peer")
        assert f"from:{did_a}" in note.tags and not any(t.startswith("from:peer-") for t in note.tags)


def _agents_list(house: Managers) -> str:
    from nodes.commands import registry
    from nodes.commands.model import Command
    from nodes.commands.spec import CommandContext

    spec = registry().get("agents.list")
    ctx = CommandContext(
        house=house,
        thread_id="main",
        tick=1,
        llm_id=None,
        settings=house.deps.settings,
        now=datetime.now(UTC),
    )
    return spec.handler(Command(cmd_id="c1", type="agents.list", args={}), ctx).output


def test_a_v27_database_turns_the_dids_seen_on_the_mesh_into_peers_met(tmp_path: Path) -> None:
    import json

    from memory.db import SCHEMA_VERSION
    from tests.old_databases import as_version, schema_version

    seen, added = Identity.generate().did, Identity.generate().did
    Database.open(tmp_path).close()
    discovered = json.dumps(
        {
            seen: {
                "transport": "12D3KooWSeen",
                "first_seen": "2026-01-01T10:00:00+00:00",
                "last_seen": "2026-01-02T10:00:00+00:00",
            },
            added: {
                "transport": "x",
                "first_seen": "2026-01-01T10:00:00+00:00",
                "last_seen": "2026-01-01T10:00:00+00:00",
            },
        }
    )
    as_version(
        tmp_path,
        27,
        "ALTER TABLE peers DROP COLUMN offers",
        "ALTER TABLE stagnation_strategies DROP COLUMN origin",
        "ALTER TABLE thinking_methods DROP COLUMN origin",
        f"INSERT INTO config (key, value, updated_at) VALUES ('mesh/discovered', '{discovered}', '2026-01-01')",
        "INSERT INTO peers (name, did, p2p_addrs, added_by, note, blocked, tags, created_at) VALUES "
        f"('ada', '{added}', '[]', 'owner', '', 0, '[]', '2026-01-01')",
    )
    db = Database.open(tmp_path)
    with db.unit() as repos:
        rows = {p.did: (p.name, p.added_by, p.offers) for p in repos.peers.list()}
        assert rows == {added: ("ada", "owner", {}), seen: (f"peer-{seen[-8:]}", "met", {})}
        assert repos.config.get("mesh/discovered") is None
        assert repos.peers.find(seen).last_seen.day == 2
    assert schema_version(db) == SCHEMA_VERSION
    db.close()
