"""Rows of the source designs whose tests asserted too little (issue 33): each now asserts the effect itself.
The escalation's `pause` applied by the loop, concentration by emotions, `goals.update` of a failed goal, the drive
contexts of curiosity and goal, a named seed an Epos continuation starts from."""

from __future__ import annotations

import json
from typing import Any

import graph.loop.driver as driver
from tests.fakes.llm import FakeLLM

NEW_THOUGHT = "The tide came in faster tonight; perhaps the moon's phase explains it."
LOOP = "I keep thinking that the lighthouse beam sweeps the same circle over the water."
EXHAUSTED = {"emotions": [{"emotion": "fatigue", "strength": 5, "reason": "the same circle again"}]}


def block(*commands: tuple[str, dict[str, Any]]) -> str:
    cmds = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return "A thought.\n# Commands:\n" + json.dumps(cmds) + "\n# End commands"


def test_the_escalations_pause_is_the_wait_after_the_tick(agent_factory, monkeypatch):
    """Overload (strong fatigue) puts `pause` first; the tick's pause_s becomes reflexes.stagnation_pause_s and the
    loop waits exactly that long after that tick — and not after the ticks before it."""
    fake = FakeLLM("fake", responses=[NEW_THOUGHT, LOOP, LOOP, LOOP], json_answer=EXHAUSTED)
    agent = agent_factory(fake, reflexes={"emotion_every": 1, "stagnation_pause_s": 123.0})
    waits: list[float] = []
    monkeypatch.setattr(driver, "pause", lambda agent, stopper, seconds, **kw: waits.append(seconds) or False)
    result = driver.run_loop(agent, ticks=5)
    assert result.ticks_run == 5
    state = result.last_state
    novelty = state["novelty"]
    assert novelty["diagnosis"] == "overload" and novelty["mechanisms"][0] == "pause", novelty
    assert state["stagnation"]["pause_s"] == 123.0 and state["pause_s"] == 123.0
    # ticks 1-3 (new, new, the first repeat: reflex-lite) wait the configured 0 s; tick 4 escalates and waits the
    # escalation's pause; the fifth, the last asked for, waits nothing
    assert waits == [0.0, 0.0, 0.0, 123.0, 0.0]


def recent_thoughts_in(prompt: str) -> str:
    return prompt.split("# My recent thoughts", 1)[1].split("\n#", 1)[0]


def test_concentration_by_emotions_keeps_the_thoughts_felt_so_with_or_and_and(agent_factory):
    fake = FakeLLM("fake", responses=["About the storm.", "About bread.", "About the harbour.",
                                      block(("cycle.concentration", {"emotions": ["anxiety"]})), "Focused.",
                                      block(("cycle.concentration", {"emotions": ["anxiety"], "tags": ["sea"],
                                                                     "mode": "and"})), "Focused again."])
    agent = agent_factory(fake)
    for _ in range(3):
        agent.tick()
    with agent.services.db.unit() as repos:
        storm, bread, harbour = repos.messages.recent("main", 3)  # oldest first
        storm.emotions, storm.tags = ["anxiety:4"], ["sea"]
        bread.emotions, bread.tags = ["joy:3"], ["sea"]
        harbour.emotions, harbour.tags = ["Anxiety:2"], ["town"]
    state = agent.tick()
    assert state["executed"][0]["result"] == "concentration on: tags [], emotions ['anxiety'] (or)"
    with agent.services.db.unit() as repos:
        cycle = repos.config.cycle("main")
        assert (cycle["context_mode"], cycle["focus_emotions"], cycle["focus_logic"]) == ("concentration", ["anxiety"], "or")
    agent.tick()
    recent = recent_thoughts_in([c["prompt"] for c in fake.calls if "My recent thoughts" in c["prompt"]][-1])
    assert "About the storm." in recent and "About the harbour." in recent and "About bread." not in recent
    agent.tick()  # both the emotion and the tag: only the storm was anxious *and* about the sea
    agent.tick()
    recent = recent_thoughts_in([c["prompt"] for c in fake.calls if "My recent thoughts" in c["prompt"]][-1])
    assert "About the storm." in recent and "About the harbour." not in recent and "About bread." not in recent


def test_the_drive_contexts_of_curiosity_and_goal_reach_the_prompt_in_words(agent_factory):
    """Nexus Ark's drives come with their reason: curiosity names the weightiest open question (and how many there
    are), the goal's pull names the goal and how far it is done."""
    fake = FakeLLM("fake", responses=["I think about the sea."])
    agent = agent_factory(fake)
    agent.services.settings.timezone = "UTC"
    with agent.services.db.unit() as repos:
        repos.questions.add("Why do tides rise twice a day?", priority=0.9)
        repos.questions.add("What is my human's favourite book?", priority=0.5)
        goal = repos.goals.add("Learn the tide tables", priority=3)
        repos.tasks.add("Read the almanac", goal_id=goal.id)
        done = repos.tasks.add("Find the almanac", goal_id=goal.id)
        repos.tasks.update(done.id, status="done")
    state = agent.tick()
    details = state["drives"]["details"]
    levels = state["drives"]["levels"]
    assert levels["curiosity"] >= 0.4 and levels["goal"] >= 0.4, levels  # both above inject_at: both shown
    prompt = [c["prompt"] for c in fake.calls if c["json_schema"] is None][-1]
    assert (f"curiosity {levels['curiosity']:.2f}: I keep wondering: Why do tides rise twice a day? (2 open questions)"
            in prompt), prompt
    assert f'the pull of my goal {levels["goal"]:.2f}: goal {goal.id} "Learn the tide tables" is 50% done' in prompt
    assert details["goal"] == {"goal_id": goal.id, "title": "Learn the tide tables", "priority": 3, "completion": 0.5}
    assert details["curiosity"]["top_question"] == "Why do tides rise twice a day?"


def test_a_named_seed_applied_is_the_text_an_epos_continuation_starts_from(web, tmp_path, monkeypatch):
    """Epos: a named seed saved and applied on the Persona page becomes seed.txt, and a continuation opened on that
    persona begins with exactly that text (not the seed it had before)."""
    from persona.scaffold import scaffold_persona
    from tests.conftest import make_agent

    directory = tmp_path / "own" / "lumen"
    directory.parent.mkdir()
    scaffold_persona("Lumen", directory)
    web.services.overrides = web.services.overrides.replace(persona_dir=str(directory))
    monkeypatch.setenv("ANIMA_PERSONAS_ROOT", str(tmp_path / "personas"))
    before = (directory / "seed.txt").read_text()
    evening = "Lumen's evening notebook, kept by the window:\nThe lamp is lit. Lumen writes:"
    assert evening not in before
    assert web.client.put("/api/persona/seeds/evening", json={"text": evening}).status_code == 200
    assert web.client.post("/api/persona/seeds/evening/apply").status_code == 200
    fake = FakeLLM("fake", responses=[" The harbour is quiet tonight."])
    agent = make_agent(tmp_path / "epos", fake, playbook="epos", persona_dir=str(directory))
    try:
        agent.tick()
        [prompt] = [c["prompt"] for c in fake.calls if c["json_schema"] is None]
        assert prompt.startswith(evening) and before.strip() not in prompt
        with agent.services.db.unit() as repos:
            assert [m.content for m in repos.messages.since("main", 0, ("continuation",))] == [
                " The harbour is quiet tonight."]
        fake.responses = [" The lamp flickers."]
        agent.tick()  # the next step continues the same text: the seed, then what was written
        again = [c["prompt"] for c in fake.calls if c["json_schema"] is None][-1]
        assert again == evening + " The harbour is quiet tonight."
    finally:
        agent.services.db.close()
