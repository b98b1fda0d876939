"""Models at run time, through ticks: the persona chooses its primary model (llm_registry.select) or changes the
registry (llm_registry.update — consent first); the operator does the same from `run.py llm` and the web app's
Controls page; every choice is persisted and a running loop takes it at its next tick; llm_task asks another model
in the background and the answer arrives as a note."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from cli import app
from nodes.context import utcnow
from tests.fakes.llm import FakeLLM
from tests.fakes.managers import answer


def block(*commands: tuple[str, dict]) -> str:
    items = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return "About models.\n# Commands:\n" + json.dumps(items) + "\n# End commands"


def thoughts(fake: FakeLLM) -> int:
    return sum(1 for c in fake.calls if c["json_schema"] is None)


def test_the_persona_selects_a_model_and_its_next_thought_comes_from_it(agent_factory):
    first = FakeLLM("first", responses=[block(("llm_registry.list", {}), ("llm_registry.select", {"id": "second"}))])
    second = FakeLLM("second", responses=["I think with the second model now."])
    agent = agent_factory(first, second)
    state = agent.tick()
    listing, chosen = state["executed"]
    assert "- first (fake), priority 100" in listing["result"] and "[primary]" in listing["result"]
    assert chosen["result"] == "primary model: second"
    agent.tick()
    assert thoughts(first) == 1 and thoughts(second) == 1
    with agent.services.db.unit() as repos:
        assert repos.config.get("llm/selected") == "second"
    reopened = agent_factory(first, second)  # persisted: a new run thinks with it too
    assert reopened.services.llms.primary_id == "second"


def test_an_update_needs_consent_and_the_last_enabled_model_cannot_go(agent_factory):
    first = FakeLLM(
        "first",
        responses=[
            block(("llm_registry.update", {"id": "first", "priority": 1})),
            block(
                ("llm_registry.update", {"id": "first", "enabled": False}),
                ("llm_registry.update", {"id": "second", "enabled": False}),
            ),
        ],
    )
    second = FakeLLM("second", responses=["Second thoughts."])
    agent = agent_factory(first, second)
    assert agent.tick()["executed"][0]["status"] == "pending_approval"
    assert agent.services.llms.primary_id == "first"
    with agent.services.db.unit() as repos:
        approval = repos.approvals.pending()[0]
    answer(agent.services.db, approval.id, approve=True, by="human", now=utcnow())
    agent.tick()  # runs the approved update (after this tick's thought): second now comes first
    assert agent.services.llms.primary_id == "second" and thoughts(second) == 0
    agent.tick()
    assert thoughts(second) == 1


def test_the_last_enabled_model_cannot_be_disabled(agent_factory):
    agent2 = agent_factory(
        FakeLLM(
            "first",
            responses=[
                block(
                    ("llm_registry.update", {"id": "first", "enabled": False}),
                    ("llm_registry.update", {"id": "second", "enabled": False}),
                )
            ],
        ),
        FakeLLM("second"),
        consent={"auto_approve": ["llm_registry.update"]},
    )
    state = agent2.tick()
    done = {e["cmd_id"]: e for e in state["executed"]}
    assert done["c1"]["status"] == "executed"
    assert done["c2"]["status"] == "failed" and "every LLM of the registry is disabled" in done["c2"]["result"]
    assert agent2.services.llms.ids == ["second"]


def test_the_operator_chooses_from_the_cli_and_a_running_loop_takes_it(agent_factory, tmp_path):
    first, second = FakeLLM("first"), FakeLLM("second")
    agent = agent_factory(first, second)
    agent.tick()
    runner = CliRunner()
    said = runner.invoke(app, ["llm", "select", "second", "--data-dir", str(tmp_path)])
    assert said.exit_code == 0 and "primary model: second" in said.output
    agent.tick()  # the loop (another process, in real life) takes it at its next tick
    assert thoughts(second) == 1
    said = runner.invoke(app, ["llm", "update", "second", "--disable", "--data-dir", str(tmp_path)])
    assert said.exit_code == 0
    listing = runner.invoke(app, ["llm", "list", "--json", "--data-dir", str(tmp_path)])
    rows = {r["id"]: r for r in json.loads(listing.output)}
    assert rows["second"]["enabled"] is False and rows["second"]["selected"] is False
    agent.tick()
    assert thoughts(first) == 2 and thoughts(second) == 1
    refused = runner.invoke(app, ["llm", "update", "first", "--disable", "--data-dir", str(tmp_path)])
    assert refused.exit_code == 1 and "every LLM of the registry would be disabled" in refused.output


def test_controls_choose_a_model_from_the_api_and_the_page(web):
    web.agent.tick()
    answer_ = web.client.put("/api/llms/selected", json={"id": "fake"})
    assert answer_.status_code == 200 and answer_.json()[0]["selected"] is True
    missing = web.client.put("/api/llms/selected", json={"id": "nope"})
    assert missing.status_code == 409 and missing.json()["field"] == "id"
    last = web.client.patch("/api/llms/fake", json={"enabled": False})
    assert last.status_code == 409 and "would be disabled" in last.json()["error"]
    bad = web.client.patch("/api/llms/fake", json={"priority": 5000})
    assert bad.status_code == 422 and bad.json()["field"] == "priority"
    assert web.client.patch("/api/llms/ghost", json={"priority": 1}).status_code == 404
    page = web.client.get("/controls").text
    assert 'data-testid="llm-models"' in page and 'data-testid="selected-llm"' in page
    saved = web.client.post(
        "/controls/llms/fake", data={"priority": "42", "enabled": "true", "is_validator": "true"}, headers=web.csrf
    )
    assert saved.status_code == 200 and 'value="42"' in saved.text
    with web.agent.services.db.unit() as repos:
        assert repos.config.get("llm/overrides/fake") == {"priority": 42, "enabled": True, "is_validator": True}
    web.agent.tick()
    assert web.agent.services.llms.entry("fake")["is_validator"] is True


def test_llm_task_asks_another_model_and_the_answer_arrives_as_a_note(agent_factory):
    first = FakeLLM(
        "first",
        responses=[  # HMP's own example shape: target_llm beside the args
            '# Commands:\n[{"cmd_id": "q1", "type": "llm_task", "target_llm": "second", "args": {"task_description": '
            '"Why is the sea salty?"}}]\n# End commands',
            "Waiting for the answer.",
            "I read the answer.",
        ],
    )
    second = FakeLLM("second", responses=["Rivers carry dissolved salts to it."])
    agent = agent_factory(first, second)
    [asked] = agent.tick()["executed"]
    assert asked["status"] == "executed" and "second is asked" in asked["result"]
    assert agent.services.background().wait_idle(30)
    with agent.services.db.unit() as repos:
        [note] = repos.notes.list(source="llm_task")
        assert note.text == "second answers my question “Why is the sea salty?”:\nRivers carry dissolved salts to it."
        assert note.read is False
        [row] = [r for r in repos.processes.recent(20) if r.name == "llm_task"]
        assert row.status == "ok" and row.value.startswith(f"second answered (note {note.id}")
    agent.tick()
    prompt = [c["prompt"] for c in first.calls if c["json_schema"] is None][-1]
    fenced = prompt.split('from="notes to me">', 1)[1].split("</data", 1)[0]
    assert "Rivers carry dissolved salts to it." in fenced
