"""The persona's own catalogues through ticks (HMP agent_tables, ratings, external_services, external_accounts):
a table made, filled and read; ratings that order the loop-breakers; services and accounts that name where a
secret lives but never hold it; deletes archive, need consent and restore."""

from __future__ import annotations

import json

from nodes.reflexes.anti_stagnation.escalation import plan
from tests.fakes.llm import FakeLLM


def block(*commands: tuple[str, dict], text: str) -> str:
    items = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return text + "\n# Commands:\n" + json.dumps(items) + "\n# End commands"


def test_tables_ratings_services_and_accounts(agent_factory, monkeypatch):
    monkeypatch.setenv("TIDE_API_KEY", "s3cr3t-value")
    fake = FakeLLM(
        "fake",
        responses=[
            block(
                ("agent_tables.add", {"name": "tides", "columns": ["date", "height_m"], "description": "high tides"}),
                ("agent_tables.insert", {"table": "tides", "row": {"date": "2026-11-24", "height_m": 4.2}}),
                ("agent_tables.insert", {"table": "tides", "row": {"date": "2026-11-25", "height_m": 4.6}}),
                ("agent_tables.insert", {"table": "tides", "row": {"wind": "strong"}}),
                ("agent_tables.read", {"table": "tides", "where": {"date": "2026-11-25"}}),
                text="Tides in a table.",
            ),
            block(
                ("ratings.add", {"subject": "strategy:flashback", "score": -4, "comment": "old memories bore me"}),
                ("ratings.add", {"subject": "strategy:flashback", "score": -5}),
                ("external_services.add", {"name": "tide-api", "url": "https://tides.test", "kind": "api"}),
                (
                    "external_accounts.add",
                    {"name": "my-tides", "service": "tide-api", "handle": "lumen", "credential_env": "TIDE_API_KEY"},
                ),
                ("external_accounts.add", {"name": "leak", "service": "tide-api", "credential_env": "s3cr3t-value"}),
                ("external_accounts.add", {"name": "nowhere", "service": "ghost-api"}),
                text="Catalogues.",
            ),
            block(
                ("external_accounts.list", {}),
                ("ratings.list", {}),
                ("agent_tables.list", {}),
                ("agent_tables.delete", {"name": "tides"}),
                text="Looking.",
            ),
            block(("memory.restore", {"tier": "table", "ref": "1"}), text="Bringing the table back."),
        ],
    )
    agent = agent_factory(fake, consent={"auto_approve": ["agent_tables.delete"]})
    made, first, second, wrong, read = agent.tick()["executed"]
    assert made["result"] == "table tides(date, height_m) made" and first["result"] == "row 1 added to tides"
    assert wrong["status"] == "failed" and "tides has no column 'wind'" in wrong["result"]
    assert read["result"] == "[2] date='2026-11-25', height_m=4.6"
    rated, rerated, service, account, leak, nowhere = agent.tick()["executed"]
    assert rated["result"] == "rating 1 added: strategy:flashback -4" and rerated["result"].startswith(
        "rating 1 changed"
    )
    assert service["result"] == "service tide-api added" and account["result"] == "account my-tides at tide-api added"
    assert leak["status"] == "invalid" and "never a secret itself" in leak["result"]
    assert nowhere["status"] == "failed" and "no external service 'ghost-api'" in nowhere["result"]
    accounts, ratings, tables, deleted = agent.tick()["executed"]
    assert accounts["result"] == "- [3] my-tides at tide-api as lumen (secret in $TIDE_API_KEY)"
    assert ratings["result"] == "- [1] strategy:flashback: -5"
    assert tables["result"] == "- tides(date, height_m): 2 row(s) — high tides"
    assert deleted["result"].startswith("table tides archived")
    with agent.services.db.unit() as repos:
        assert repos.tables.list() == []
        stored = json.dumps([r.data for r in repos.records.list("external_account")])
        assert "s3cr3t-value" not in stored
        assert repos.records.scores("strategy:") == {"flashback": -5.0}
    agent.tick()
    with agent.services.db.unit() as repos:
        assert [t.name for t in repos.tables.list()] == ["tides"]


def test_a_rated_strategy_moves_among_its_equals():
    assert plan("repeated_thoughts")[:3] == ["flashback", "meta_analysis", "rationale_reflex"]
    assert plan("repeated_thoughts", None, {"flashback": -5, "rationale_reflex": 2})[:3] == [
        "rationale_reflex",
        "meta_analysis",
        "flashback",
    ]
