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
