"""The loop-breakers HMP names beyond the first seven, chosen by the escalation through ticks: world check (a fresh
feed item, or a fetch asked for), task switch (and the return to the task when the loop ends), goal reformulation,
random iteration (a thinking method), interest memory, the rationale reflex, asking the mesh (through the consent
model; with no peer it says so and falls back), moving the task to a simulated environment (a Stelis rehearsal whose
chronicle returns); the persona's own strategies and thinking methods as data it lists, adds and (with consent)
deletes; notes.update and the soft notes.delete."""

from __future__ import annotations

import json

from nodes.reflexes.anti_stagnation.escalation import Escalation
from nodes.state import TickState
from tests.fakes.llm import FakeLLM

LOOP = "I keep thinking that the lighthouse beam sweeps the same circle over the water."
FRESH = "Bread rises because yeast breathes out carbon dioxide into the dough."


def block(*commands: tuple[str, dict], text: str = LOOP) -> str:
    items = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return text + "\n# Commands:\n" + json.dumps(items) + "\n# End commands"


def prompts(fake: FakeLLM) -> list[str]:
    return [c["prompt"] for c in fake.calls if c["json_schema"] is None]


def stimulus(prompt: str) -> str:
    return prompt.split('from="memories and documents brought up to break a loop">', 1)[1].split("</data", 1)[0]


def test_the_world_check_brings_a_fresh_feed_item_into_a_loop_with_no_new_data(agent_factory):
    fake = FakeLLM("fake", responses=[LOOP] * 5 + [FRESH])
    agent = agent_factory(fake)
    with agent.services.db.unit() as repos:
        feed, _ = repos.feeds.subscribe("http://tides.test/rss", "tides", ["sea"])
        repos.feeds.add_item(
            feed,
            "g1",
            "Spring tide tonight (Tide News)\nThe highest tide of the year.",
            "http://tides.test/1",
            agent.services.clock(),
        )
    states = [agent.tick() for _ in range(3)]
    assert states[2]["novelty"]["diagnosis"] == "no_new_data"
    assert states[2]["novelty"]["mechanisms"] == ["world_check"]  # no knowledge base: the world comes first
    with agent.services.db.unit() as repos:
        assert repos.feeds.unread_count() == 0  # read by the check
        assert repos.config.fetch_now is False
    fourth = agent.tick()  # still looping, no unread item left: the loop is asked to fetch the feeds at once
    assert "News from outside (a feed): Spring tide tonight" in stimulus(prompts(fake)[3])
    assert fourth["novelty"]["mechanisms"] == ["world_check", "ask_human"]
    with agent.services.db.unit() as repos:
        assert repos.config.fetch_now is True
    fifth = agent.tick()
    assert "I asked for fresh news from my feeds" in stimulus(prompts(fake)[-1])
    [last_added] = fifth["stagnation"]["added"]
    agent.tick()  # novelty back, right after the last mechanism was added: that one gets the credit
    with agent.services.db.unit() as repos:
        world, last = repos.strategies.find("world_check"), repos.strategies.find(last_added)
        assert (world.uses, world.helped) == (1, 0) and (last.uses, last.helped) == (1, 1)


def test_task_switch_goal_reformulation_and_the_return_to_the_task(agent_factory, monkeypatch):
    from nodes.reflexes.anti_stagnation import escalation

    fake = FakeLLM("fake", responses=[LOOP] * 5 + [FRESH, "And then some more about yeast and flour."])
    agent = agent_factory(fake)
    with agent.services.db.unit() as repos:
        goal = repos.goals.add("Understand the lighthouse")
        repos.tasks.add("Measure the beam", goal_id=goal.id, priority=5)
        repos.tasks.add("Bake bread", priority=1)
    agent.tick()
    with agent.services.db.unit() as repos:  # the goal, seen while looping on "repeated thoughts"
        state = TickState(
            thread_id="main",
            tick=2,
            llm={"llm_id": "fake"},
            emotions=[],
            context_report={"recalled": [], "budget_tokens": 4000},
            prompt_tokens=100,
        )
        repeated = Escalation(agent.services, agent.services.managers.over(repos), state, LOOP, lambda e: None).run(
            {"streak": 5, "diagnosis": "repeated_thoughts"}, 4
        )
    assert repeated["mechanisms"] == ["flashback", "meta_analysis", "rationale_reflex", "goal_reformulation"]
    assert "My goal 1 (“Understand the lighthouse”) may be too vague or too big" in repeated["instruction"]

    monkeypatch.setattr(escalation, "diagnose", lambda *args: "monotone_context")
    states = [agent.tick() for _ in range(4)]
    assert states[-1]["novelty"]["mechanisms"] == ["random_iteration", "change_context", "task_switch"]
    assert states[-1]["stagnation"]["task_switch"] == {"from": 1, "from_title": "Measure the beam", "to": 2}
    last = prompts(fake)[-1]
    assert "I set task 1 (“Measure the beam”) aside for now and turn to task 2 (“Bake bread”)" not in last
    agent.tick()  # the prompt of this tick carries the switch; novelty comes back
    assert "I set task 1 (“Measure the beam”) aside for now and turn to task 2 (“Bake bread”)" in prompts(fake)[-1]
    assert "A way of thinking drawn at random (" in prompts(fake)[-1]
    agent.tick()
    fenced = prompts(fake)[-1].split('from="results of my commands">', 1)[1].split("</data", 1)[0]
    assert "My thoughts move again: back to task 1 (“Measure the beam”)" in fenced


def test_the_persona_curates_its_strategies_and_thinking_methods(agent_factory):
    mine = "Ask why five times, each time of the answer before."
    fake = FakeLLM(
        "fake",
        responses=[
            block(
                (
                    "stagnation_strategies.add",
                    {"name": "five_whys", "instruction": mine, "class": "external", "cost": 1},
                ),
                ("thinking_methods.add", {"name": "reverse", "instruction": "Start from the end and work back."}),
                ("stagnation_strategies.delete", {"name": "read_kb"}),
                ("thinking_methods.list", {}),
            ),
            LOOP,
            LOOP,
            LOOP,
            block(("stagnation_strategies.list", {})),
        ],
    )
    agent = agent_factory(fake, consent={"auto_approve": ["stagnation_strategies.delete"]})
    added, method, deleted, methods = agent.tick()["executed"]
    assert added["result"] == "strategy 16 five_whys added (external, cost 1)"
    assert method["result"].startswith("thinking method 6 reverse added")
    assert deleted["result"].startswith("stagnation strategy read_kb archived")
    assert "- [6] reverse, drawn 0×: Start from the end and work back." in methods["result"]
    for _ in range(3):
        state = agent.tick()
    assert state["novelty"]["diagnosis"] == "no_new_data" and state["novelty"]["mechanisms"][0] == "five_whys"
    listing = agent.tick()["executed"][0]["result"]
    assert mine in prompts(fake)[-1].split("My recent thoughts")[-1]  # the persona's own strategy led the thought
    assert "five_whys (external, cost 1): used 1×, helped 0× — Ask why five times" in listing
    assert "read_kb" not in listing


def test_notes_update_and_soft_delete(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            block(("notes.add", {"text": "buy rope"}), text="A note to self."),
            block(
                ("notes.update", {"id": 2, "text": "buy two ropes", "priority": 2}),
                ("notes.update", {"id": 1, "text": "I never said that"}),
                ("notes.update", {"id": 1, "tags": ["sea"]}),
                ("notes.delete", {"id": 2}),
                text="Tidying notes.",
            ),
            block(("notes.list", {}), text="Listing notes."),
            block(("memory.restore", {"tier": "note", "ref": "2"}), text="Bringing it back."),
        ],
    )
    agent = agent_factory(fake, consent={"auto_approve": ["notes.delete"]})
    with agent.services.db.unit() as repos:
        repos.notes.add("Remember the tide table.", source="user")
    agent.tick()
    results = [e["result"] for e in agent.tick()["executed"]]
    assert results[0] == "note 2 updated"
    assert "I change only the text of my own notes" in results[1] and results[2] == "note 1 updated"
    assert results[3].startswith("note 2 deleted")
    with agent.services.db.unit() as repos:
        assert (repos.notes.get(2).text, repos.notes.get(2).priority, repos.notes.get(2).hidden) == (
            "buy two ropes",
            2,
            True,
        )
        assert (repos.notes.get(1).text, repos.notes.get(1).tags) == ("Remember the tide table.", ["sea"])
    listing = agent.tick()["executed"][0]["result"]
    assert "buy two ropes" not in listing and "Remember the tide table." in listing
    agent.tick()
    with agent.services.db.unit() as repos:
        assert repos.notes.get(2).hidden is False


def test_ask_the_mesh_with_no_peer_says_so_and_falls_back(agent_factory):
    fake = FakeLLM("fake", responses=[LOOP] * 4)
    agent = agent_factory(fake, mesh={"enabled": True})
    with agent.services.db.unit() as repos:
        feed, _ = repos.feeds.subscribe("http://tides.test/rss", "tides", ["sea"])
        repos.feeds.add_item(
            feed,
            "g1",
            "Spring tide tonight (Tide News)\nThe highest tide of the year.",
            "http://tides.test/1",
            agent.services.clock(),
        )
    third = [agent.tick() for _ in range(3)][-1]
    assert third["novelty"]["diagnosis"] == "no_new_data"
    assert third["novelty"]["mechanisms"] == ["world_check"]  # ask_mesh came first in the plan, but no peer
    assert third["stagnation"]["plan"][0] == "ask_mesh"
    assert third["stagnation"]["mesh_unavailable"] == "no peer on the mesh is known yet"
    agent.tick()
    assert "I wanted to ask the mesh for something new, but no peer on the mesh is known yet" in stimulus(
        prompts(fake)[3]
    )
    with agent.services.db.unit() as repos:
        assert repos.approvals.pending() == [] and repos.mesh.outbox(10) == []


def test_ask_the_mesh_asks_the_trusted_peers_through_the_consent_model(agent_factory):
    from managers import ManagerDeps, Managers
    from reach.hmp.identity import Identity

    fake = FakeLLM("fake", responses=[LOOP] * 5)
    agent = agent_factory(fake, mesh={"enabled": True}, reflexes={"mesh_ask_peers": 3})
    trusted, fair, shunned = (Identity.generate().did for _ in range(3))
    deps = ManagerDeps(settings=agent.services.settings, clock=agent.services.clock)
    with agent.services.db.unit() as repos:
        reputation = Managers(repos, deps).reputation
        for did, score in ((trusted, 0.9), (fair, 0.6), (shunned, -0.9)):
            reputation.evaluate(did, score)
    third = [agent.tick() for _ in range(3)][-1]
    assert third["novelty"]["mechanisms"] == ["ask_mesh"]
    asked = third["stagnation"]["mesh_asked"]
    assert list(asked) == [trusted, fair]  # the most trusted first; the distrusted one is not asked
    with agent.services.db.unit() as repos:
        pending = sorted(repos.approvals.pending(), key=lambda a: a.id)
        assert [(a.type, a.args["to"], a.effect) for a in pending] == [
            ("mesh.ask", trusted, "external"),
            ("mesh.ask", fair, "external"),
        ]
        assert "what would you explore now?" in pending[0].args["text"]
        assert repos.mesh.outbox(10) == []  # nothing left before the human said yes
        Managers(repos, deps).consent.answer(pending[0].id, approve=True, by="owner", now=agent.services.clock())
    fourth = agent.tick()  # the approved ask runs at the start of the next tick; the episode asks no one again
    assert fourth["stagnation"]["mesh_asked"] == asked
    assert "I asked 2 peer(s) on the mesh what they would explore now" in stimulus(prompts(fake)[3])
    with agent.services.db.unit() as repos:
        [sent] = repos.mesh.outbox(10)
        assert (sent.type, sent.recipient) == ("ask", trusted)
        assert "what would you explore now?" in sent.body["payload"]["text"]
        assert len(repos.approvals.pending()) == 1


def test_a_task_moved_to_a_simulated_environment_is_rehearsed_there_and_its_chronicle_returns(
    agent_factory, monkeypatch
):
    from nodes.reflexes.anti_stagnation import escalation

    chronicle = "Rehearsal: in a model harbour the beam swept twelve degrees a second; a timer measures it."
    main_thoughts = iter([LOOP] * 5 + [FRESH, FRESH + " Still fresh."])

    def answer(prompt: str) -> str:
        if "Record what was rehearsed in this simulated environment" in prompt:
            return chronicle
        if "# A simulated environment" in prompt:
            return block(
                ("feeds.subscribe", {"url": "http://harbour.test/rss", "name": "harbour"}),
                text="In the model harbour I time the beam with a stopwatch: twelve degrees a second.",
            )
        return next(main_thoughts)

    fake = FakeLLM("fake", responses=answer)
    agent = agent_factory(fake, reflexes={"simulation_ticks": 2})
    with agent.services.db.unit() as repos:
        repos.tasks.add("Measure the beam", priority=5)
    monkeypatch.setattr(escalation, "diagnose", lambda *args: "monotone_context")
    fifth = [agent.tick() for _ in range(5)][-1]
    assert fifth["novelty"]["mechanisms"] == ["random_iteration", "change_context", "simulate"]
    child = fifth["stagnation"]["simulation"]
    assert child.startswith("main/")
    with agent.services.db.unit() as repos:
        thread = repos.threads.get(child)
        assert (thread.origin, thread.status, thread.label) == (
            "simulation",
            "running",
            "simulation: task 1: Measure the beam",
        )
    sixth = agent.tick()  # the next tick runs in the rehearsal
    assert sixth["thread_id"] == child
    assert "rehearsal of “task 1: Measure the beam” in a simulated environment" in prompts(fake)[-1]
    [subscribe] = sixth["executed"]
    assert subscribe["status"] == "refused" and subscribe["result"].startswith("simulated, not run: feeds.subscribe")
    seventh = agent.tick()  # the second thought of the rehearsal: it ends, its chronicle goes to the parent
    assert seventh["thread_id"] == child
    with agent.services.db.unit() as repos:
        thread = repos.threads.get(child)
        assert (thread.status, thread.chronicle) == ("completed", chronicle)
        assert repos.feeds.list() == []  # the simulated subscription never happened
        assert repos.approvals.pending() == []
    eighth = agent.tick()
    assert eighth["thread_id"] == "main"
    assert chronicle in prompts(fake)[-1]  # the anchor in the parent shows the chronicle
