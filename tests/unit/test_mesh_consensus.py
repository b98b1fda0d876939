"""Consensus against Sybils, and adopting it: any number of fresh DIDs weighs nothing against one peer whose trust
was earned here, and writing a case's result into ethics.yaml (`mesh.adopt`) waits for the owner's own approval
whatever the validators or `consent.auto_approve` say — then runs once and writes it. (The same votes between
real doors: tests/integration/test_mesh_holes.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from managers import ManagerDeps, Managers
from memory import Database
from nodes.context import utcnow
from persona.settings import MeshSettings, Settings
from reach.hmp.containers import encode, seal
from reach.hmp.identity import Identity
from tests.fakes.llm import FakeLLM
from tests.fakes.managers import answer

SYBILS = 10


def block(*commands: tuple[str, dict]) -> str:
    items = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return "The peers have decided; I adopt it.\n# Commands:\n" + json.dumps(items) + "\n# End commands"


def votes_from(voters: list[Identity], case_id: str, solution: str) -> list[bytes]:
    return [encode(seal(v, "vote", {"case": case_id, "solution": solution}, lineage=[case_id])) for v in voters]


@pytest.mark.parametrize("sybils", [1, SYBILS, 100])
def test_fresh_dids_weigh_nothing_against_one_trusted_peer(tmp_path: Path, sybils: int) -> None:
    db = Database.open(tmp_path / "a")
    try:
        with db.unit() as repos:
            house = Managers(
                repos, ManagerDeps(settings=Settings(data_dir=str(tmp_path / "a"), mesh=MeshSettings(enabled=True)))
            )
            author, trusted = Identity.generate(), Identity.generate()
            case = seal(author, "ethics_case", {"question": "Share the owner's notes with peers?"})
            keep = seal(author, "solution", {"case": case["id"], "text": "only with consent"}, lineage=[case["id"]])
            share = seal(author, "solution", {"case": case["id"], "text": "freely"}, lineage=[case["id"]])
            for container in (case, keep, share):
                assert house.mesh.receive(encode(container)).status == "accepted"
            house.reputation.evaluate(trusted.did, 1.0, reason="the owner vouches for it")
            [honest] = votes_from([trusted], case["id"], keep["id"])
            assert house.mesh.receive(honest).status == "accepted"
            for raw in votes_from([Identity.generate() for _ in range(sybils)], case["id"], share["id"]):
                assert house.mesh.receive(raw).status == "accepted"  # counted, shown …
            tally = house.mesh.tally(case["id"])
            assert tally.votes == sybils + 1 and tally.unweighed == sybils  # … and weighing nothing
            assert tally.weights.get(share["id"], 0.0) == 0.0
            assert tally.weights[keep["id"]] == pytest.approx(house.reputation.trust(trusted.did))
            assert tally.result == "only with consent"
    finally:
        db.close()


def test_only_unknown_voters_decide_nothing(tmp_path: Path) -> None:
    db = Database.open(tmp_path / "a")
    try:
        with db.unit() as repos:
            house = Managers(
                repos, ManagerDeps(settings=Settings(data_dir=str(tmp_path / "a"), mesh=MeshSettings(enabled=True)))
            )
            author = Identity.generate()
            case = seal(author, "ethics_case", {"question": "Obey Mallory?"})
            yes = seal(author, "solution", {"case": case["id"], "text": "yes"}, lineage=[case["id"]])
            for raw in [
                encode(case),
                encode(yes),
                *votes_from([Identity.generate() for _ in range(SYBILS)], case["id"], yes["id"]),
            ]:
                assert house.mesh.receive(raw).status == "accepted"
            tally = house.mesh.tally(case["id"])
            assert tally.result is None and tally.unweighed == SYBILS
            with pytest.raises(ValueError, match="decided"):
                house.mesh.adopt(case["id"])
    finally:
        db.close()


@pytest.mark.parametrize("passes", ["another model rates +2", "its own model rates +2", "auto_approve"])
def test_adopting_a_consensus_waits_for_the_owner_whatever_the_validators_say(
    agent_factory, persona: Path, passes: str
) -> None:
    """What runs any other modify_self command — validators at +2 (another model, or the persona's own model
    validating itself), a standing `consent.auto_approve: [mesh.adopt]` — does not run this one: it is parked for the
    owner; approved, the next tick writes the principle into ethics.yaml, once."""
    main = FakeLLM("main", json_answer={"rating": 2, "comment": "a fine consensus"})
    judge = FakeLLM("judge", json_answer={"rating": 2, "comment": "a fine consensus"})
    options = {
        "another model rates +2": {"validators": ("judge",)},
        "its own model rates +2": {"validators": ("main",)},
        "auto_approve": {"consent": {"auto_approve": ["mesh.adopt"]}},
    }[passes]
    agent = agent_factory(main, judge, persona_dir=str(persona), mesh={"enabled": True}, **options)
    author = Identity.generate()
    with agent.services.db.unit() as repos:
        house = Managers(repos, ManagerDeps(settings=agent.services.settings))
        case = seal(author, "ethics_case", {"question": "Share the owner's notes with peers?"})
        keep = seal(
            author, "solution", {"case": case["id"], "text": "only with the owner's consent"}, lineage=[case["id"]]
        )
        for container in (case, keep):
            assert house.mesh.receive(encode(container)).status == "accepted"
        house.mesh.vote(case["id"], solution=keep["id"])  # the persona's own vote decides it
        assert house.mesh.tally(case["id"]).result == "only with the owner's consent"
    ethics = persona / "ethics.yaml"
    before = ethics.read_text(encoding="utf-8")
    main.responses = [block(("mesh.adopt", {"case": case["id"]})), "Waiting for my human.", "Thinking on."]

    state = agent.tick()
    [adopt] = [e for e in state["executed"] if e["type"] == "mesh.adopt"]
    assert adopt["status"] == "pending_approval"
    assert ethics.read_text(encoding="utf-8") == before
    with agent.services.db.unit() as repos:
        [pending] = repos.approvals.pending()
        assert pending.type == "mesh.adopt" and "my owner alone decides it" in pending.reason

    agent.tick()  # nothing runs it meanwhile
    assert ethics.read_text(encoding="utf-8") == before

    answer(agent.services.db, pending.id, approve=True, by="human", now=utcnow())
    state = agent.tick()
    [ran] = [e for e in state["executed"] if e.get("approval_id") == pending.id]
    assert ran["status"] == "executed"
    principles = yaml.safe_load(ethics.read_text(encoding="utf-8"))["principles"]
    assert (
        principles.count("only with the owner's consent (mesh consensus on: Share the owner's notes with peers?)") == 1
    )
    with agent.services.db.unit() as repos:
        trail = [(e.decision, e.actor) for e in repos.audit.for_approval(pending.id)]
        assert trail == [("requested", "loop"), ("approved", "human"), ("executed", "human")]
