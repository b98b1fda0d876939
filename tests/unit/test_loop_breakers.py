"""The loop-breakers HMP names beyond the first seven, chosen by the escalation through ticks: world check (a fresh
feed item, or a fetch asked for), task switch (and the return to the task when the loop ends), goal reformulation,
random iteration (a thinking method), interest memory, the rationale reflex; the persona's own strategies and
thinking methods as data it lists, adds and (with consent) deletes; notes.update and the soft notes.delete."""

from __future__ import annotations

import json

from tests.fakes.llm import FakeLLM
from nodes.reflexes.anti_stagnation.escalation import Escalation
from nodes.state import TickState

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
        repos.feeds.add_item(feed, "g1", "Spring tide tonight (Tide News)\nThe highest tide of the year.",
                             "http://tides.test/1", agent.services.clock())
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
        state = TickState(thread_id="main", tick=2, llm={"llm_id": "fake"}, emotions=[],
                          context_report={"recalled": [], "budget_tokens": 4000}, prompt_tokens=100)
        repeated = Escalation(agent.services, repos, state, LOOP, lambda e: None).run(
            {"streak": 5, "diagnosis": "repeated_thoughts"}, 4)
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
    fake = FakeLLM("fake", responses=[
        block(("stagnation_strategies.add", {"name": "five_whys", "instruction": mine, "class": "external", "cost": 1}),
              ("thinking_methods.add", {"name": "reverse", "instruction": "Start from the end and work back."}),
              ("stagnation_strategies.delete", {"name": "read_kb"}), ("thinking_methods.list", {})),
        LOOP, LOOP, LOOP, block(("stagnation_strategies.list", {}))])
    agent = agent_factory(fake, consent={"auto_approve": ["stagnation_strategies.delete"]})
    added, method, deleted, methods = agent.tick()["executed"]
    assert added["result"] == "strategy 14 five_whys added (external, cost 1)"
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
    fake = FakeLLM("fake", responses=[
        block(("notes.add", {"text": "buy rope"}), text="A note to self."),
        block(("notes.update", {"id": 2, "text": "buy two ropes", "priority": 2}),
              ("notes.update", {"id": 1, "text": "I never said that"}), ("notes.update", {"id": 1, "tags": ["sea"]}),
              ("notes.delete", {"id": 2}), text="Tidying notes."),
        block(("notes.list", {}), text="Listing notes."),
        block(("memory.restore", {"tier": "note", "ref": "2"}), text="Bringing it back.")])
    agent = agent_factory(fake, consent={"auto_approve": ["notes.delete"]})
    with agent.services.db.unit() as repos:
        repos.notes.add("Remember the tide table.", source="user")
    agent.tick()
    results = [e["result"] for e in agent.tick()["executed"]]
    assert results[0] == "note 2 updated"
    assert "I change only the text of my own notes" in results[1] and results[2] == "note 1 updated"
    assert results[3].startswith("note 2 deleted")
    with agent.services.db.unit() as repos:
        assert (repos.notes.get(2).text, repos.notes.get(2).priority, repos.notes.get(2).hidden) == ("buy two ropes", 2, True)
        assert (repos.notes.get(1).text, repos.notes.get(1).tags) == ("Remember the tide table.", ["sea"])
    listing = agent.tick()["executed"][0]["result"]
    assert "buy two ropes" not in listing and "Remember the tide table." in listing
    agent.tick()
    with agent.services.db.unit() as repos:
        assert repos.notes.get(2).hidden is False
