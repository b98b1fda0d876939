"""Validator conflict: trust drifts away from dissenters, who are excluded below min_trust; per-command thresholds."""

import json

from memory.models import LLMRegistryEntry
from tests.fakes.llm import FakeLLM


def commands(*cmds) -> str:
    return (
        "A thought.\n# Commands:\n"
        + json.dumps([{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(cmds, 1)])
        + "\n# End commands"
    )


def trust_in_db(agent, llm_id):
    with agent.services.db.unit() as repos:
        return repos.session.get(LLMRegistryEntry, llm_id).trust_score


def test_a_dissenting_validator_loses_trust_and_is_excluded(agent_factory):
    main = FakeLLM("main", responses=[commands(("notes.add", {"text": "tide table"}))])
    agrees = [FakeLLM(f"v{i}", json_answer={"rating": 2, "comment": "fine"}) for i in (1, 2)]
    dissent = FakeLLM("v3", json_answer={"rating": -3, "comment": "no"})
    agent = agent_factory(
        main, *agrees, dissent, validators=("v1", "v2", "v3"), trust={"v1": 0.9, "v2": 1.0, "v3": 0.38}
    )
    first = agent.tick()
    votes = {v["LLM"]: v for v in first["validation"]["validators"]}
    assert first["validation"]["rating"] == round((2 * 0.9 + 2 * 1.0 - 3 * 0.38) / 2.28, 3)
    assert (
        votes["v3"]["trust_after"] == 0.33 and votes["v1"]["trust_after"] == 0.91 and votes["v2"]["trust_after"] == 1.0
    )
    assert trust_in_db(agent, "v3") == 0.33 and trust_in_db(agent, "v1") == 0.91
    agent.tick()
    assert trust_in_db(agent, "v3") == 0.28
    with agent.services.db.unit() as repos:
        warnings = [p.value for p in repos.processes.open("main") if p.name == "validation.trust"]
    assert len(warnings) == 1 and warnings[0].startswith("validator v3 excluded: trust 0.28 fell below 0.3")
    asked = len(dissent.calls)
    third = agent.tick()
    assert len(dissent.calls) == asked  # no longer asked
    assert [v["LLM"] for v in third["validation"]["validators"]] == ["v1", "v2"] and third["validation"][
        "rating"
    ] == 2.0


def test_self_validation_does_not_drift(agent_factory):
    main = FakeLLM("main", responses=["ok"], json_answer={"rating": -3, "comment": "harsh on myself"})
    agent = agent_factory(main, validators=("main",), trust={"main": 0.5})
    agent.tick()
    assert trust_in_db(agent, "main") == 0.5


def test_excluding_every_validator_blocks_commands_instead_of_passing_them(agent_factory):
    main = FakeLLM("main", responses=[commands(("notes.add", {"text": "x"}))])
    judge = FakeLLM("judge", json_answer={"rating": 3, "comment": "fine"})
    agent = agent_factory(main, judge, validators=("judge",), trust={"judge": 0.1})
    state = agent.tick()
    assert state["validation"]["passed"] is False and "commands blocked" in state["validation"]["skipped"]
    assert state["executed"][0]["status"] == "unvalidated" and judge.calls == []


def test_per_command_thresholds_by_type(agent_factory):
    main = FakeLLM(
        "main",
        responses=[
            commands(
                ("messages.send", {"text": "hi"}),
                ("notes.add", {"text": "n"}),
                ("config.update", {"key": "memory.recall_k", "value": 4}),
            )
        ],
    )
    judge = FakeLLM("judge", json_answer={"rating": 2, "comment": "good"})
    agent = agent_factory(main, judge, validators=("judge",))
    agent.services.settings.reflexes.command_thresholds = {"messages.send": 3, "notes.add": 1}
    state = agent.tick()
    status = {e["type"]: (e["status"], e["result"]) for e in state["executed"]}
    assert status["messages.send"] == ("unvalidated", "validation rating 2.0 below +3")
    assert status["notes.add"][0] == "executed"
    assert status["config.update"][0] == "executed"  # dangerous (+2 by default), and the rating is +2
    with agent.services.db.unit() as repos:
        assert repos.config.get("persona/memory.recall_k") == 4
