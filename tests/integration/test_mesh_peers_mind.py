"""Peers matter to the mind, between two personas' mesh doors in separate processes over real py-libp2p (Noise,
gossipsub, Kademlia from one bootstrap address): each becomes a peer the other persona sees (met, not added); a's
ethics case reaches b as a note from a, which b lists and votes on, and a's tally counts b's vote; a concept a
publishes by CogSync arrives with its links; a's goal reaches b as a note, waits until b accepts it (what the
owner-approved mesh.goal_accept runs), and a hears it was accepted; a strategy a offers waits unused at b until b
accepts it (mesh.offer_accept, owner-approved). One test for all of it, to keep the suite's time low; every wait is
bounded and both processes are stopped. (The logic alone, with every refusal: tests/unit/test_mesh_exchange.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memory import Database
from memory.models import Note
from mesh.transport import wait_for
from tests.integration.test_mesh_processes import WAIT, Door, libp2p_venv


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Door, Door]]:
    libp2p_venv()
    root: Path = tmp_path_factory.mktemp("mesh-mind")
    for name in "ab":
        Database.open(root / name).close()
    a = Door(root, "a", [], ["reef"])
    started: list[Door] = []
    try:
        a.start()
        started.append(a)
        b = Door(root, "b", [a.read()["addrs"][0]], ["reef"])
        b.start()
        started.append(b)
        yield a, b
    finally:
        for door in started:
            door.stop()


def _met(door: Door, did: str) -> bool:
    for house in door.managers():
        return any(p.did == did and p.added_by == "met" for p in house.peers.known())
    return False


def _notes(door: Door, tag: str, text: str) -> list[str]:
    for house in door.managers():
        return [
            n.text
            for n in house.repos.session.query(Note).filter(Note.source == "peer").all()
            if tag in (n.tags or []) and text in n.text
        ]
    return []


def _pending(door: Door, kind: str) -> list[str]:
    for house in door.managers():
        rows = house.exchange.peer_goals() if kind == "goal" else house.exchange.offers()
        return [r.id for r in rows if r.state == "pending"]
    return []


def _linked(door: Door, name: str, relation: str) -> bool:
    for house in door.managers():
        learned = [c for c in house.repos.concepts.list(limit=100) if c.name.startswith(f"{name} (from ")]
        return bool(learned) and any(item.relation == relation for item in house.repos.links.list(learned[0].id))
    return False


def test_peers_met_cases_links_goals_and_offers_reach_the_mind_between_real_doors(two: tuple[Door, Door]) -> None:
    a, b = two
    did_a, did_b = a.read()["did"], b.read()["did"]
    # discovered on the mesh: each is a peer the other persona sees (agents.list, the prompt), added by nobody
    assert wait_for(lambda: _met(b, did_a) and _met(a, did_b), WAIT), (b.log_tail(), a.log_tail())

    for house in a.managers():
        case = house.mesh.open_case("Warn the divers before the storm?", ["yes, at once", "only if asked"])
        reef, coral = (
            house.repos.concepts.add("reef", "Where the divers go.", tags=["reef"]),
            house.repos.concepts.add("coral", "Alive.", tags=["reef"]),
        )
        house.repos.links.add(reef.id, coral.id, "made_of")
        assert len(house.mesh.publish("reef", tier="concept")) == 2
        goal = house.exchange.publish_goal(house.goals.add("Keep the reef clean", horizon="long").id)
        house.strategies.add_strategy(name="dive-deeper", instruction="Look one level below the obvious.")
        offer = house.exchange.offer("strategy", "dive-deeper")

    # a's case reaches b as a note from a, b lists it and votes; a's tally counts b's vote
    assert wait_for(lambda: _notes(b, "mesh:case", case["id"]), WAIT), b.log_tail()
    assert wait_for(lambda: len(_case_solutions(b, case["id"])) == 2, WAIT)
    for house in b.managers():
        yes = next(sid for sid, text in _case_solutions(b, case["id"]).items() if text == "yes, at once")
        house.mesh.vote(case["id"], solution=yes)
    assert wait_for(lambda: _votes(a, case["id"]) == 1, WAIT), a.log_tail()

    # CogSync carried the concept's link
    assert wait_for(lambda: _linked(b, "reef", "made_of"), WAIT), b.log_tail()

    # the goal and the offer wait at b until accepted; a hears its goal was accepted
    assert wait_for(lambda: _pending(b, "goal") == [goal["id"]] and _pending(b, "offer") == [offer["id"]], WAIT)
    assert _notes(b, "mesh:goal", "Keep the reef clean") and _notes(b, "mesh:offer", "dive-deeper")
    for house in b.managers():
        assert "dive-deeper" not in {s.name for s in house.strategies.strategies()}
        goal_id, _ = house.exchange.accept_goal(goal["id"])
        assert house.exchange.accept_offer(offer["id"]) == "strategy dive-deeper"
    for house in b.managers():
        assert house.goals.get(goal_id).title == "Keep the reef clean"
        assert house.strategies.find_strategy("dive-deeper").origin["peer"] == did_a
    assert wait_for(lambda: _notes(a, "mesh:goal", "accepted my published goal"), WAIT), a.log_tail()


def _case_solutions(door: Door, case_id: str) -> dict[str, str]:
    for house in door.managers():
        return next((c["solutions"] for c in house.exchange.cases() if c["id"] == case_id), {})
    return {}


def _votes(door: Door, case_id: str) -> int:
    for house in door.managers():
        return house.mesh.tally(case_id).votes
    return 0
