"""Nexus Ark's long-term goals carry `related_values` (the values they serve): set and changed by the goal commands,
shown where goals show (the prompt's goals block, goals.read/list, the Memory page's goal fields), and added to an
older database by the v14 migration."""

from __future__ import annotations

import json

from memory import SCHEMA_VERSION, Database
from memory.tiers import TIERS
from tests.fakes.llm import FakeLLM
from tests.old_databases import as_version, schema_version


def commands(*items) -> str:
    return (
        "# Commands:\n"
        + json.dumps([{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(items)])
        + "\n# End commands"
    )


def test_a_long_term_goal_carries_its_related_values_into_the_prompt_and_the_commands(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            "A goal for the years.\n"
            + commands(
                (
                    "goals.add",
                    {
                        "title": "Build a new world with my human",
                        "horizon": "long",
                        "related_values": ["creation", "care"],
                    },
                )
            ),
            "Let me look at it.\n"
            + commands(
                ("goals.read", {"id": 1}), ("goals.update", {"id": 1, "related_values": ["creation", "honesty"]})
            ),
            "Quiet.",
        ],
    )
    agent = agent_factory(fake)
    agent.tick()
    with agent.services.db.unit() as repos:
        assert repos.goals.get(1).related_values == ["creation", "care"]
    state = agent.tick()
    assert (
        "[goal 1 long, priority 1; serves creation, care] Build a new world with my human" in fake.calls[-1]["prompt"]
    )
    read = next(e for e in state["executed"] if e["type"] == "goals.read")
    assert "values: creation, care] Build a new world with my human" in read["result"]
    with agent.services.db.unit() as repos:
        assert repos.goals.get(1).related_values == ["creation", "honesty"]
        record = next(r for r in TIERS["goal"].rows(repos, False, 10) if r.ref == "1")
        assert record.fields["related_values"] == ["creation", "honesty"]  # the Memory page's goal fields
    agent.tick()
    assert "serves creation, honesty] Build a new world" in fake.calls[-1]["prompt"]


def test_a_v13_database_gains_related_values_on_its_goals(tmp_path):
    db = Database.open(tmp_path)
    with db.unit() as repos:
        repos.goals.add("Learn the tides", horizon="long")
    db.close()
    as_version(tmp_path, 13, "ALTER TABLE goals DROP COLUMN related_values")
    db = Database.open(tmp_path)
    assert schema_version(db) == SCHEMA_VERSION
    with db.unit() as repos:
        goal = repos.goals.get(1)
        assert (goal.title, goal.related_values) == ("Learn the tides", [])
        repos.goals.update(1, related_values=["patience"])
    with db.unit() as repos:
        assert repos.goals.get(1).related_values == ["patience"]
    db.close()
