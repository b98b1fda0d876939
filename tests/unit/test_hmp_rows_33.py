"""Issue 33, HMP rows: concentration by emotions with thresholds, goals' conflicts and metrics, task cycles
resumed after a crash, the ethics model's fields on each audit entry — each through a tick or the manager."""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.llm import FakeLLM


def block(*commands: tuple[str, dict[str, Any]]) -> str:
    cmds = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return "A thought.\n# Commands:\n" + json.dumps(cmds) + "\n# End commands"


def recent_thoughts_in(prompt: str) -> str:
    return prompt.split("# My recent thoughts", 1)[1].split("\n#", 1)[0]


def last_recent(fake: FakeLLM) -> str:
    return recent_thoughts_in([c["prompt"] for c in fake.calls if "My recent thoughts" in c["prompt"]][-1])


def test_concentration_by_emotion_thresholds_keeps_only_the_thoughts_felt_strongly_enough(agent_factory):
    fake = FakeLLM("fake", responses=[
        "About the storm.", "About bread.", "About the harbour.",
        block(("cycle.concentration", {"emotions": ["тревожность:≥2"]})), "Focused.",
        block(("cycle.concentration", {"emotions": ["тревожность:≥2", "joy:>=3"], "mode": "or"})), "Either.",
        block(("cycle.concentration", {"emotions": ["anxiety>=2", "joy:>=3"], "mode": "and"})), "Both."])
    agent = agent_factory(fake)
    for _ in range(3):
        agent.tick()
    with agent.services.db.unit() as repos:
        storm, bread, harbour = repos.messages.recent("main", 3)  # oldest first
        storm.emotions = ["Тревожность:4", "anxiety:3", "joy:3"]
        bread.emotions = ["тревожность:1", "joy:2"]  # anxious, but below the threshold
        harbour.emotions = ["joy:3"]
    state = agent.tick()
    assert state["executed"][0]["result"] == "concentration on: tags [], emotions ['тревожность:≥2'] (or)"
    with agent.services.db.unit() as repos:
        assert repos.config.cycle("main")["focus_emotions"] == ["тревожность:≥2"]
    agent.tick()
    recent = last_recent(fake)
    assert "About the storm." in recent and "About bread." not in recent and "About the harbour." not in recent
    agent.tick()
    agent.tick()
    recent = last_recent(fake)  # or: anxious enough, or joyful enough
    assert "About the storm." in recent and "About the harbour." in recent and "About bread." not in recent
    agent.tick()
    agent.tick()
    recent = last_recent(fake)  # and: both thresholds met — only the storm
    assert "About the storm." in recent and "About the harbour." not in recent and "About bread." not in recent
