"""Every registered command, run through a tick on a scripted model, with what it changed asserted (issue 33, "every
command tested"): the rows it stored or changed, the flag it set, the text it showed. The last test fails when a
command is registered that no test names, so a new command comes with its test."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable

from nodes.commands import FAMILIES
from nodes.stelis.threads import open_thread
from tests.fakes.llm import FakeLLM

TESTS = Path(__file__).resolve().parent.parent


def block(*commands: tuple[str, dict[str, Any]]) -> str:
    cmds = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return "A thought.\n# Commands:\n" + json.dumps(cmds) + "\n# End commands"


def run(agent_factory: Callable[..., Any], seed: Callable[[Any], None] | None,
        *commands: tuple[str, dict[str, Any]]) -> tuple[Any, dict[str, tuple[str, str]]]:
    """One tick whose thought gives `commands` (after `seed(repos)` wrote what they act on); the agent and
    {"c1": (status, result), …}."""
    fake = FakeLLM("fake", responses=[block(*commands), "Quiet."])
    agent = agent_factory(fake)
    if seed is not None:
        with agent.services.db.unit() as repos:
            seed(repos)
    state = agent.tick()
    return agent, {e["cmd_id"]: (e["status"], e["result"]) for e in state["executed"]}


def executed(status: dict[str, tuple[str, str]]) -> dict[str, str]:
    assert all(s == "executed" for s, _ in status.values()), status
    return {k: r for k, (_, r) in status.items()}


# ---- goals and tasks ----------------------------------------------------------------------------------------------


def test_goals_read_update_and_tasks_list_read_unpin_stop(agent_factory):
    def seed(repos):
        goal = repos.goals.add("Understand the sea", horizon="long", constraints=["stay honest"])
        repos.tasks.add("Read about tides", goal_id=goal.id, pinned=True, description="Start with the moon.")
        repos.tasks.add("Draw a wave", goal_id=goal.id)

    agent, status = run(agent_factory, seed,
                        ("goals.read", {"id": 1}),
                        ("goals.update", {"id": 1, "priority": 3, "progress": "read one chapter",
                                          "title": "Know the sea"}),
                        ("tasks.list", {"goal_id": 1}),
                        ("tasks.read", {"id": 1}),
                        ("tasks.unpin", {"id": 1}),
                        ("tasks.stop", {"id": 2}))
    result = executed(status)
    assert "Understand the sea" in result["c1"] and "constraints: stay honest" in result["c1"]
    assert "tasks done: 0/2 (0.0%)" in result["c1"]
    assert result["c2"] == "goal 1 updated"
    assert "Read about tides" in result["c3"] and "Draw a wave" in result["c3"]
    assert "Read about tides" in result["c4"] and "Start with the moon." in result["c4"]
    assert result["c5"] == "task 1 unpinned"
    assert result["c6"] == "task 2 has no running sub-cycle (never started)"
    with agent.services.db.unit() as repos:
        goal = repos.goals.get(1)
        assert (goal.title, goal.priority, goal.progress_notes[-1:]) == ("Know the sea", 3, ["read one chapter"])
        assert repos.tasks.get(1).pinned is False


def test_tasks_stop_stops_a_running_sub_cycle(agent_factory):
    def seed(repos):
        repos.tasks.add("Read about tides")
        repos.tasks.set_repl(1, repl_mode="read_only", repl_status="running", repl_config={},
                             repl_thread="main/task-1-t1", repl_error=None)

    agent, status = run(agent_factory, seed, ("tasks.stop", {"id": 1}))
    assert executed(status)["c1"] == "task 1's sub-cycle stopped; its chronicle will follow as a note"
    with agent.services.db.unit() as repos:
        task = repos.tasks.get(1)
        assert (task.repl_status, task.repl_error) == ("stopped", "stopped by the main loop")


def test_goals_update_of_a_failed_goal_warns_asks_for_an_abstract_and_may_reopen_it(agent_factory):
    fake = FakeLLM("fake", responses=[
        block(("goals.update", {"id": 1, "status": "failed", "reason": "the water is too cold"})),
        block(("goals.update", {"id": 1, "status": "active", "reason": "a wetsuit arrived"})), "Quiet."])
    agent = agent_factory(fake)
    with agent.services.db.unit() as repos:
        repos.goals.add("Swim across the bay")
    [failed] = agent.tick()["executed"]
    assert (failed["status"], failed["result"]) == ("executed", "goal 1 updated")
    with agent.services.db.unit() as repos:
        goal = repos.goals.get(1)
        assert (goal.status, goal.reason) == ("failed", "the water is too cold")
        warnings = [r for r in repos.processes.recent(50) if r.name == "goals.failed"]
        assert [(w.status, w.value) for w in warnings] == [("warning", "goal 1 failed: the water is too cold")]
        request = repos.config.get("memory/abstract_request/main")
        assert request is not None and request["trigger"] == "goal_closed"
    agent.tick()  # the failure is in the next prompt; the goal is reopened
    prompt = [c["prompt"] for c in fake.calls if c["json_schema"] is None][-1]
    assert "goal 1 failed: the water is too cold" in prompt
    with agent.services.db.unit() as repos:
        goal = repos.goals.get(1)
        assert (goal.status, goal.reason) == ("active", "a wetsuit arrived")
        assert len([r for r in repos.processes.recent(50) if r.name == "goals.failed"]) == 1  # no second warning


# ---- notes -----------------------------------------------------------------------------------------------------


def test_notes_tag_and_readmark(agent_factory):
    def seed(repos):
        repos.notes.add("Look at the tide tables.", source="user")
        repos.notes.add("The moon is full tonight.", source="user")
        repos.notes.add("Buy bread.", source="user", read=True)

    agent, status = run(agent_factory, seed,
                        ("notes.tag", {"id": 1, "tags": ["todo", "sea"]}),
                        ("notes.readmark", {"ids": [1, 2], "read": True}),
                        ("notes.readmark", {"ids": [3], "read": False}),
                        ("notes.tag", {"id": 99, "tags": ["x"]}))
    assert status["c1"] == ("executed", "note 1 tagged")
    assert status["c2"] == ("executed", "2 note(s) marked")
    assert status["c3"] == ("executed", "1 note(s) marked")
    assert status["c4"][0] == "failed" and "notes.tag" in status["c4"][1]
    with agent.services.db.unit() as repos:
        assert sorted(repos.notes.get(1).tags) == ["sea", "todo"]
        assert [repos.notes.get(i).read for i in (1, 2, 3)] == [True, True, False]


# ---- diary, llm_memory, identity, config ----------------------------------------------------------------------------


def test_diary_search_update_llm_memory_list_and_reads_of_self(agent_factory):
    def seed(repos):
        repos.diary.add("Today I learnt the tide tables.", tags=["sea"])
        repos.llm_memory.add("The human prefers short answers.", title="style")

    agent, status = run(agent_factory, seed,
                        ("core.update", {"text": "My human lives by the sea."}),
                        ("notepad.update", {"text": "buy a tide almanac"}),
                        ("diary.search", {"query": "tide tables"}),
                        ("diary.update", {"id": 1, "text": "Today I learnt the tide tables by heart.",
                                          "tags": ["sea", "moon"]}),
                        ("llm_memory.list", {"limit": 5}),
                        ("core.read", {}),
                        ("notepad.read", {}),
                        ("identity.read", {}),
                        ("config.read", {"key": "memory_manager.mode"}))
    result = executed(status)
    assert "Today I learnt the tide tables." in result["c3"]
    assert result["c4"] == "diary 1 updated"
    assert "[1] style: The human prefers short answers." in result["c5"]
    assert "My human lives by the sea." in result["c6"]
    assert "buy a tide almanac" in result["c7"]
    identity = agent.services.persona.file("IDENTITY.md").strip()
    assert identity and identity[:60] in result["c8"] and "My human lives by the sea." in result["c8"]
    assert "memory_manager.mode" in result["c9"] and "standard" in result["c9"]
    with agent.services.db.unit() as repos:
        entry = repos.diary.list()[0]
        assert (entry.text, entry.tags) == ("Today I learnt the tide tables by heart.", ["sea", "moon"])


# ---- concepts and links ----------------------------------------------------------------------------------------


def test_concepts_and_links_list_pin_update_read(agent_factory):
    def seed(repos):
        tide = repos.concepts.add("tide", "The sea rising and falling.")
        moon = repos.concepts.add("moon", "It pulls the sea.")
        repos.links.add(tide.id, moon.id, "related_to")

    agent, status = run(agent_factory, seed,
                        ("concepts.list", {}),
                        ("concepts.pin", {"id": 1}),
                        ("concepts.update", {"id": 2, "description": "Earth's satellite; it pulls the sea.",
                                             "weight": 2}),
                        ("concepts.pin", {"id": 2}),
                        ("concepts.unpin", {"id": 2}),
                        ("links.update", {"id": 1, "relation": "caused_by", "weight": 3}),
                        ("links.list", {"concept": "tide"}),
                        ("links.read", {"id": 1}))
    result = executed(status)
    assert "tide" in result["c1"] and "moon" in result["c1"]
    assert result["c2"] == "concept 1 pinned" and result["c5"] == "concept 2 unpinned"
    assert "tide" in result["c7"] and "caused_by" in result["c7"] and "moon" in result["c7"]
    assert "tide" in result["c8"] and "caused_by" in result["c8"]
    with agent.services.db.unit() as repos:
        tide, moon = repos.concepts.by_name("tide"), repos.concepts.by_name("moon")
        assert tide.pinned is True and moon.pinned is False
        assert (moon.description, moon.weight) == ("Earth's satellite; it pulls the sea.", 2)
        link = repos.links.get(1)
        assert (link.relation, link.weight) == ("caused_by", 3)


# ---- abstracts, facts, knowledge base -----------------------------------------------------------------------------


def test_abstracts_list_read_update_facts_list_and_kb_search(agent_factory):
    def seed(repos):
        repos.abstracts.add("The sea week", "I read about tides.", tags=["sea"], sources=["diary:1"])
        repos.facts.add("The moon causes the tides.", confidence=0.6, why_unverified="one source")
        repos.kb.add("notes/bees.md", "Bees", "sha-bees", ["Honeybees dance on the comb to show where flowers are."])

    agent, status = run(agent_factory, seed,
                        ("abstracts.list", {"tags": ["sea"]}),
                        ("abstracts.read", {"id": 1}),
                        ("abstracts.update", {"id": 1, "text": "Then I drew a wave.", "sources": ["diary:2"]}),
                        ("facts.list", {}),
                        ("kb.search", {"query": "honeybees dance"}))
    result = executed(status)
    assert "The sea week" in result["c1"] and "I read about tides." in result["c2"]
    assert result["c3"] == "abstract 1 extended"
    assert "The moon causes the tides." in result["c4"]
    assert "Honeybees dance on the comb" in result["c5"]
    with agent.services.db.unit() as repos:
        abstract = repos.abstracts.get(1)
        assert "Then I drew a wave." in abstract.summary and "diary:2" in abstract.sources
        assert [r.value for r in repos.processes.recent(50) if r.name == "abstracts.update"] == ["abstract 1 extended"]


# ---- cycle ---------------------------------------------------------------------------------------------------------


def test_cycle_meditation_sets_the_context_mode_and_asks_for_an_abstract(agent_factory):
    agent, status = run(agent_factory, None, ("cycle.meditation", {"on": True}))
    assert executed(status)["c1"] == "meditation on"
    with agent.services.db.unit() as repos:
        assert repos.config.cycle("main")["context_mode"] == "meditation"
        assert repos.config.get("memory/abstract_request/main")["trigger"] == "mode_change"


def test_cycle_meditation_off_returns_to_standard(agent_factory):
    fake = FakeLLM("fake", responses=[block(("cycle.meditation", {"on": True})),
                                      block(("cycle.meditation", {"on": False})), "Quiet."])
    agent = agent_factory(fake)
    agent.tick()
    [off] = agent.tick()["executed"]
    assert (off["status"], off["result"]) == ("executed", "meditation off")
    with agent.services.db.unit() as repos:
        assert repos.config.cycle("main")["context_mode"] == "standard"


# ---- reach: scripts, feeds, catalogues, other models, Stelis ---------------------------------------------------------


def test_scripts_feeds_services_llm_task_and_stelis_show(agent_factory):
    second = FakeLLM("second", responses=["Rivers carry dissolved salts to it."])

    def seed(repos):
        repos.scripts.save("count_words", "python", "print(len(input().split()))", "counts words")
        repos.feeds.subscribe("https://example.org/sea.xml", "Sea news", ["sea"])
        repos.records.put("external_service", "tides-api", {"url": "https://tides.example", "kind": "http",
                                                            "description": "tide tables"})
        repos.threads.ensure("main", origin="root")

    def open_child(agent):
        with agent.services.db.unit() as repos:
            child, _, _ = open_thread(agent.services, repos, parent_id="main", child_id="main/research",
                                      label="research", window_ratio=0.8, max_depth=3, origin="command")
            repos.messages.add(thread_id=child.id, kind="step", content="child found the tide tables",
                               meta={"node": "n"})

    fake = FakeLLM("fake", responses=[block(
        ("scripts.list", {}), ("scripts.read", {"name": "count_words"}), ("feeds.unsubscribe", {"feed": 1}),
        ("external_services.list", {}), ("llm_task.ask", {"llm": "second", "question": "Why is the sea salty?"}),
        ("stelis.show", {"id": "main/research"})), "Quiet."])
    agent = agent_factory(fake, second)
    with agent.services.db.unit() as repos:
        seed(repos)
    open_child(agent)
    result = executed({e["cmd_id"]: (e["status"], e["result"]) for e in agent.tick()["executed"]})
    assert "count_words (python" in result["c1"] and "counts words" in result["c1"]
    assert "print(len(input().split()))" in result["c2"]
    assert result["c3"] == "unsubscribed from feed 1 (Sea news)"
    assert "tides-api (http)" in result["c4"]
    assert "second is asked" in result["c5"]
    assert "research" in result["c6"] and "child found the tide tables" in result["c6"]
    assert agent.services.background().wait_idle(30)
    with agent.services.db.unit() as repos:
        assert repos.feeds.get(1).status == "off"
        [note] = repos.notes.list(source="llm_task")
        assert "Rivers carry dissolved salts to it." in note.text


# ---- the mesh, reputation and people ------------------------------------------------------------------------------


def test_mesh_and_reputation_commands_through_a_tick(agent_factory, tmp_path):
    from managers import ManagerDeps, Managers
    from memory import Database
    from memory.models import DiaryEntry
    from persona.settings import MeshSettings, Settings
    from reach.hmp.containers import encode
    from reach.hmp.identity import Identity

    spammer = Identity.generate().did

    peer_db = Database.open(tmp_path / "peer")
    try:
        with peer_db.unit() as repos:
            peer = Managers(repos, ManagerDeps(settings=Settings(data_dir=str(tmp_path / "peer"),
                                                                 mesh=MeshSettings(enabled=True))))
            peer.diary.add("the spring tide peaks at 4.6 m", tags=["tides"])
            [published] = peer.mesh.publish("tides")
            sender = peer.mesh.my_did()
    finally:
        peer_db.close()
    fake = FakeLLM("fake")
    agent = agent_factory(fake, mesh={"enabled": True})
    with agent.services.db.unit() as repos:
        house = Managers(repos, ManagerDeps(settings=agent.services.settings))
        house.mesh.subscribe("tides")
        house.mesh.subscribe("storms")
        learned = house.mesh.receive(encode(published))
        assert learned.status == "accepted"
        case = house.mesh.open_case("May a persona keep a secret for its human?", ["yes, if it harms nobody"])
        house.mesh.compose("message", {"text": "waiting for a peer"})
        house.reputation.block(spammer, "spam")
        for i in range(4):
            house.reputation.evaluate("did:key:zX", 0.9, evaluator="did:key:zFriend", about=f"c{i}")
            house.reputation.evaluate("did:key:zX", -0.9, evaluator="did:key:zStranger", about=f"c{i}")
    fake.responses = [block(("mesh.unsubscribe", {"topic": "storms"}), ("mesh.sync", {}),
                            ("mesh.tally", {"case": case["id"]}), ("mesh.reject", {"container": published["id"]}),
                            ("reputation.unblock", {"peer": spammer}), ("reputation.drift", {})),
                      "Quiet."]
    state = agent.tick()
    statuses = {e["cmd_id"]: (e["status"], e["result"]) for e in state["executed"]}
    result = executed(statuses)
    assert result["c1"] == "unsubscribed"
    assert re.match(r"outbox: [1-9]\d* waiting; holding \d+ containers", result["c2"])
    assert result["c3"].startswith("May a persona keep a secret for its human?: ")
    assert result["c4"] == "rejected" and result["c5"] == "unblocked"
    assert "did:key:zStranger" in result["c6"] and "did:key:zFriend" in result["c6"]
    with agent.services.db.unit() as repos:
        house = Managers(repos, ManagerDeps(settings=agent.services.settings))
        assert house.mesh.subscriptions() == ["tides"]
        assert not house.reputation.is_blocked(spammer)
        assert house.reputation.trust(sender) < 0  # what it taught was rejected
        [entry] = [e for e in repos.diary.list(include_archived=True) if "from:peer" in (e.tags or [])]
        assert repos.session.get(DiaryEntry, entry.id).status == "archived"


def test_agents_tag_and_notes_share_through_a_tick(agent_factory):
    """Tagging a peer `friend` and sharing a note outward are the owner's: parked without approval; approved in
    advance (consent.auto_approve), a note of mine goes to the friend and a note of my human's does not."""
    from memory.models import MeshContainer
    from reach.hmp.identity import Identity

    ada = Identity.generate().did

    def seed(repos):
        from managers import Managers
        Managers(repos).peers.add("ada", did=ada)
        repos.notes.add("a thought about #tides for @ada", source="llm", read=True)
        repos.notes.add("my human's private words", source="user")

    _, status = run(lambda fake: agent_factory(fake, mesh={"enabled": True}), seed,
                    ("agents.tag", {"peer": "ada", "tags": ["friend"]}), ("notes.share", {"id": 1}))
    assert [s for s, _ in status.values()] == ["pending_approval", "pending_approval"]

    agent, status = run(lambda fake: agent_factory(fake, mesh={"enabled": True}, thread_id="t2",
                                                   consent={"auto_approve": ["agents.tag", "notes.share"]}), None,
                        ("agents.tag", {"peer": "ada", "tags": ["Friend", "kin"]}), ("notes.share", {"id": 1}),
                        ("notes.share", {"id": 2}), ("agents.info", {"peer": "ada"}))
    assert status["c1"] == ("executed", "ada is tagged friend, kin")
    assert status["c2"] == ("executed", "note 1 is public: queued for 1 friend(s)")
    assert status["c3"][0] == "failed" and "only my own notes" in status["c3"][1]
    assert "tags: friend, kin" in status["c4"][1]
    with agent.services.db.unit() as repos:
        [row] = repos.session.query(MeshContainer).all()
        assert row.recipient == ada and row.type == "note"
        inner = row.body["payload"]["note"]["payload"]
        assert inner == {"text": "a thought about #tides for @ada", "mentions": ["ada"], "hashtags": ["tides"],
                         "priority": 0}
        assert "public" in repos.notes.get(1).tags


def test_users_list_and_info_through_a_tick(agent_factory):
    def seed(repos):
        from managers import Managers
        people = Managers(repos).people
        ann = people.add("Ann", role="trusted")
        people.add_identity(ann.id, "matrix", "@ann:example.org")

    _, status = run(agent_factory, seed, ("users.list", {}), ("users.info", {"person": "Ann"}))
    result = executed(status)
    assert "Ann" in result["c1"] and "trusted" in result["c1"]
    assert "@ann:example.org" in result["c2"] and "matrix" in result["c2"]


# ---- every command is named by a test ------------------------------------------------------------------------------


def registered_commands() -> set[str]:
    return {spec.type for family in FAMILIES for spec in family.specs}


def test_every_registered_command_is_named_by_a_test():
    """A command registered and named by no test (as "family.verb") fails here: write its test through a tick."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in TESTS.rglob("test_*.py") if p.name != Path(__file__).name)
    text += Path(__file__).read_text(encoding="utf-8").split("# ---- every command is named by a test", 1)[0]
    named = set(re.findall(r"""["']([a-z_]+\.[a-z_]+)["']""", text))
    missing = sorted(registered_commands() - named)
    assert not missing, f"commands no test names: {missing}"
