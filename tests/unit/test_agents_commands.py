"""agents.* and messages.send to a peer through a tick: what the commands changed in the peers table and the A2A
outbox, the owner's approval for adding/removing a peer and for a message leaving the machine, the outbox's retries
and an answer becoming a note from the peer; a spawned child and its parent become each other's peers."""

from __future__ import annotations

import json
from datetime import timedelta

from managers import ManagerDeps, Managers
from nodes.commands import registry
from nodes.context import utcnow
from tests.fakes.llm import FakeLLM
from tests.fakes.managers import answer, managers_over


def block(*commands: tuple[str, dict]) -> str:
    items = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return "I think about my peers.\n# Commands:\n" + json.dumps(items) + "\n# End commands"


def test_adding_a_peer_waits_for_the_owner_then_list_info_and_remove_change_the_table(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            block(("agents.add", {"name": "ada", "url": "http://127.0.0.1:8801/", "note": "met at the harbour"})),
            block(("agents.list", {}), ("agents.info", {"peer": "ada"})),
            block(("agents.remove", {"peer": "ada"})),
            "Quiet.",
        ],
    )
    agent = agent_factory(fake)
    state = agent.tick()
    assert [e["status"] for e in state["executed"]] == ["pending_approval"]
    db = agent.services.db
    with db.unit() as repos:
        assert repos.peers.list() == []  # nothing until the owner says yes
        approval = repos.approvals.pending()[0]
        assert (approval.type, approval.effect) == ("agents.add", "modify_self")
    answer(db, approval.id, approve=True, by="human", now=utcnow())
    state = agent.tick()  # runs the approved add, then this tick's list and info
    by_type = {e["type"]: e for e in state["executed"]}
    assert by_type["agents.add"]["status"] == "executed"
    with db.unit() as repos:
        [peer] = repos.peers.list()
        assert (peer.name, peer.a2a_url, peer.added_by, peer.note, peer.blocked) == (
            "ada",
            "http://127.0.0.1:8801",
            "persona",
            "met at the harbour",
            False,
        )
    assert (
        "- ada: http://127.0.0.1:8801; no DID yet; trust none yet; last seen never" in by_type["agents.list"]["result"]
    )
    assert (
        "trust none yet" in by_type["agents.info"]["result"]
        and "met at the harbour" in by_type["agents.info"]["result"]
    )
    state = agent.tick()
    assert [e["status"] for e in state["executed"]] == ["pending_approval"]
    with db.unit() as repos:
        approval = repos.approvals.pending()[0]
    answer(db, approval.id, approve=True, by="human", now=utcnow())
    agent.tick()
    with db.unit() as repos:
        assert repos.peers.list() == []


def test_a_message_to_a_peer_is_external_and_waits_in_the_outbox_until_delivered(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            block(
                ("messages.send", {"to": "ada", "text": "Shall we talk about tides?"}),
                ("messages.send", {"to": "nobody", "text": "Hello?"}),
                ("messages.send", {"text": "Hello, human."}),
            )
        ],
    )
    agent = agent_factory(fake, consent={"auto_approve": ["messages.send"]})
    db = agent.services.db
    with db.unit() as repos:
        managers_over(repos).peers.add("ada", a2a_url="http://127.0.0.1:8801")
    state = agent.tick()
    assert [e["status"] for e in state["executed"]] == ["executed", "failed", "executed"]
    assert "queued for ada over A2A" in state["executed"][0]["result"]
    assert "no peer 'nobody'" in state["executed"][1]["result"]
    with db.unit() as repos:
        [row] = repos.peers.outbox()
        assert (row.peer_name, row.url, row.text, row.status, row.attempts) == (
            "ada",
            "http://127.0.0.1:8801",
            "Shall we talk about tides?",
            "pending",
            0,
        )
        # ada was added with the owner's approval: writing to her is the persona's own act (nothing to audit)
        assert [e for e in repos.audit.recent(20) if e.type == "messages.send"] == []
    spec = registry().specs["messages.send"]
    assert spec.effect_for({"to": "http://127.0.0.1:8801", "text": "hi"}) == "external"
    assert spec.effect_for({"to": "ada", "text": "hi"}) == "write_self"

    clock = [utcnow()]
    deps = ManagerDeps(settings=agent.services.settings, clock=lambda: clock[0])
    with db.unit() as repos:  # ada is down: retried later, not lost
        peers = Managers(repos, deps).peers
        peers.undelivered(row.id, "connection refused", retry_after_s=10, max_attempts=3)
        assert peers.due() == []
    clock[0] += timedelta(seconds=11)
    with db.unit() as repos:
        peers = Managers(repos, deps).peers
        assert [r.id for r in peers.due()] == [row.id]
        peers.delivered(row.id, reply="Yes — the tide turns at six.")
    with db.unit() as repos:
        sent = repos.peers.outbox_row(row.id)
        assert (sent.status, sent.attempts, sent.reply) == ("sent", 2, "Yes — the tide turns at six.")
        [note] = repos.notes.list(source="peer")
        assert note.text == "Yes — the tide turns at six." and "from:ada" in note.tags and not note.read
        assert repos.peers.find("ada").last_seen is not None


def test_a_message_nobody_can_deliver_is_given_up_after_the_attempts_and_kept(agent_factory):
    agent = agent_factory(FakeLLM("fake"))
    with agent.services.db.unit() as repos:
        peers = managers_over(repos).peers
        peers.add("ada", a2a_url="http://127.0.0.1:8801")
        note, _ = peers.send("ada", "Hello", thread_id="main", llm_id=None, now=utcnow())
        [row] = repos.peers.outbox()
        for _ in range(3):
            peers.undelivered(row.id, "timed out", retry_after_s=1, max_attempts=3)
        assert (row.status, row.attempts, row.last_error, row.note_id) == ("failed", 3, "timed out", note.id)


def test_a_spawned_child_and_its_parent_are_each_others_peers(persona, tmp_path):
    from memory import Database
    from tests.conftest import make_agent

    fake = FakeLLM("fake", responses=[block(("persona.spawn", {"name": "Mira", "mode": "newborn"}))])
    agent = make_agent(tmp_path / "data", fake, persona_dir=str(persona), consent={"auto_approve": ["persona.spawn"]})
    state = agent.tick()
    assert state["executed"][0]["status"] == "executed", state["executed"]
    with agent.services.db.unit() as repos:
        [child] = repos.peers.list()
        assert (child.name, child.added_by, child.note) == ("Mira", "spawn", "my child (newborn)")
    child_db = Database.open(_child_data_dir(state))
    try:
        with child_db.unit() as repos:
            [parent] = repos.peers.list()
            assert (parent.name, parent.added_by) == (agent.services.persona.display_name, "spawn")
    finally:
        child_db.close()
        agent.services.db.close()


def _child_data_dir(state) -> str:
    """Where the spawn said the child lives (its start command names the data dir)."""
    import re

    result = state["executed"][0]["result"]
    return re.search(r"--data-dir (\S+)", result).group(1)
