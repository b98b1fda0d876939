"""HMP's delivery of abstracts (auto/manual, the setting `memory.abstracts` and the command `abstracts.mode`):
auto makes them on their triggers and shows the newest in the next prompt; manual makes none on the automatic
triggers, shows none, and delivers one only when the persona requests it."""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.llm import FakeLLM

SUMMARY = "Tides, gulls and a green lighthouse."
THOUGHTS = [
    "The tide tables say high water at nine.",
    "Gulls follow the ferry out of the harbour.",
    "The lighthouse was painted green last spring.",
    "Bread rises faster in a warm kitchen.",
]


def block(*commands: tuple[str, dict[str, Any]], text: str = "A thought.") -> str:
    cmds = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return text + "\n# Commands:\n" + json.dumps(cmds) + "\n# End commands"


def answers(prompt: str) -> dict[str, Any]:
    if "abstract" in prompt.lower():
        return {"title": "The sea week", "tags": ["sea"], "summary": SUMMARY}
    return {"emotions": [{"emotion": "curiosity", "strength": 3, "reason": "the sea"}]}


def prompts(fake: FakeLLM) -> list[str]:
    return [c["prompt"] for c in fake.calls if c["json_schema"] is None]


def made(agent) -> list[tuple[str, str]]:
    with agent.services.db.unit() as repos:
        return [(a.trigger, a.title) for a in repos.abstracts.list(limit=10)]


def test_auto_delivery_makes_an_abstract_on_its_trigger_and_puts_it_in_the_next_prompt(agent_factory):
    fake = FakeLLM("fake", responses=THOUGHTS, json_answer=answers)
    agent = agent_factory(fake, memory={"abstract_every": 2, "abstracts": "auto"})
    agent.tick()
    assert SUMMARY not in prompts(fake)[-1]
    second = agent.tick()
    assert second["memory_upkeep"]["abstract"] is not None and made(agent) == [("every_n", "The sea week")]
    agent.tick()
    assert f"The sea week] {SUMMARY}" in prompts(fake)[-1]  # delivered unasked


def test_manual_delivery_makes_none_on_the_triggers_and_delivers_only_what_is_requested(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            THOUGHTS[0],
            block(("goals.update", {"id": 1, "status": "completed", "reason": "I know the tides"}), text=THOUGHTS[1]),
            THOUGHTS[2],
            block(("abstracts.add", {}), text=THOUGHTS[3]),
            "Quiet.",
            block(("abstracts.read", {"id": 1}), text="Let me read it."),
            "Done.",
        ],
        json_answer=answers,
    )
    agent = agent_factory(fake, memory={"abstract_every": 2, "abstracts": "manual"})
    with agent.services.db.unit() as repos:
        repos.goals.add("Learn the tides")
    agent.tick()
    agent.tick()  # the every-N tick, and a goal closed: neither makes an abstract
    third = agent.tick()
    assert made(agent) == [] and "abstract" not in third["memory_upkeep"]
    with agent.services.db.unit() as repos:
        assert repos.config.get("memory/abstract_request/main") is None
        refused = [p.value for p in repos.processes.listing(limit=50) if p.name == "memory.abstract"]
    assert any("abstracts are manual (goal_closed" in v for v in refused), refused
    agent.tick()  # the persona asks for one (commands run after the upkeep): it is made in the next tick's upkeep
    assert made(agent) == []
    agent.tick()
    assert made(agent) == [("requested", "The sea week")]
    read = agent.tick()["executed"][0]["result"]  # this tick's prompt only said that it waits
    assert SUMMARY not in prompts(fake)[5]
    assert "My abstracts wait until I ask for them (manual): the newest is abstract 1" in prompts(fake)[5]
    assert SUMMARY in read  # delivered on request
    agent.tick()
    assert SUMMARY in prompts(fake)[-1]  # as the command's result, fenced with the others


def test_abstracts_mode_switches_one_thread_between_auto_and_manual(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            block(("abstracts.mode", {"mode": "manual"})),
            THOUGHTS[0],
            block(("abstracts.mode", {"mode": "auto"})),
            THOUGHTS[1],
            "Quiet.",
        ],
        json_answer=answers,
    )
    agent = agent_factory(fake, memory={"abstract_every": 2, "abstracts": "auto"})
    assert agent.tick()["executed"][0]["result"] == "abstracts: manual"
    agent.tick()  # tick 2: the every-N trigger, but this thread is manual now
    assert made(agent) == []
    with agent.services.db.unit() as repos:
        assert repos.config.cycle("main")["abstracts_mode"] == "manual"
    assert agent.tick()["executed"][0]["result"] == "abstracts: auto"
    agent.tick()  # tick 4: auto again
    assert made(agent) == [("every_n", "The sea week")]
    agent.tick()
    assert f"The sea week] {SUMMARY}" in prompts(fake)[-1]
