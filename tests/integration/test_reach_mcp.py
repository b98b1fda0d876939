"""MCP, outward: the persona calls tools of real MCP servers (tests/integration/mcp_tools_server.py, started over
stdio by the SDK, and over streamable HTTP) through `mcp.call` in its JSON commands, ticking on a scripted model.
Consent gates every call, only allowed tools run, answers are cut to the budget, a slow tool times out, and every
call is a process_log row the next prompt shows fenced as data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nodes.context import utcnow
from tests.fakes.llm import FakeLLM
from tests.fakes.managers import answer
from tests.integration.servers import free_port, wait_port

SERVER = Path(__file__).with_name("mcp_tools_server.py")


def block(*commands: tuple[str, dict]) -> str:
    items = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return "Let me use a tool.\n# Commands:\n" + json.dumps(items) + "\n# End commands"


def stdio_server(allow: list[str], **more) -> dict:
    return {"transport": "stdio", "command": sys.executable, "args": [str(SERVER)], "allow": allow, **more}


def think_prompts(fake: FakeLLM) -> list[str]:
    return [c["prompt"] for c in fake.calls if c["json_schema"] is None]


def rows(agent, name: str = "mcp.call"):
    with agent.services.db.unit() as repos:
        return [r for r in repos.processes.recent(100) if r.name == name]


def test_a_tool_call_waits_for_approval_runs_once_and_its_answer_is_data(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            block(("mcp.call", {"server": "tools", "tool": "add", "args": {"a": 2, "b": 40}})),
            "Waiting.",
            "I see the sum.",
        ],
    )
    agent = agent_factory(fake, mcp={"servers": {"tools": stdio_server(["add", "echo"])}})
    state = agent.tick()
    assert [e["status"] for e in state["executed"]] == ["pending_approval"]
    assert rows(agent) == []  # nothing left the process on the model's word
    with agent.services.db.unit() as repos:
        approval = repos.approvals.pending()[0]
        assert (approval.type, approval.effect) == ("mcp.call", "external")
    answer(agent.services.db, approval.id, approve=True, by="human", now=utcnow())
    state = agent.tick()
    ran = [e for e in state["executed"] if e.get("approval_id") == approval.id]
    assert ran[0]["status"] == "executed" and ran[0]["result"] == "42"
    [row] = rows(agent)
    assert row.status == "ok" and row.value == 'tools.add({"a": 2, "b": 40}) → 42' and "mcp:tools" in row.tags
    agent.tick()
    prompt = think_prompts(fake)[-1]
    fenced = prompt.split('from="results of my commands">', 1)[1].split("</data", 1)[0]
    assert f"[process {row.id} mcp.call: ok] tools.add" in fenced
    assert len(rows(agent)) == 1  # approved once, ran once


def test_allow_list_budget_tool_errors_timeouts_and_no_inherited_secrets(agent_factory, monkeypatch):
    monkeypatch.setenv("ANIMA_TEST_SECRET", "hunter2")
    calls = [
        ("mcp.call", {"server": "tools", "tool": "long_text", "args": {"size": 50000}}),
        ("mcp.call", {"server": "tools", "tool": "fail", "args": {"reason": "the sea is dry"}}),
        ("mcp.call", {"server": "tools", "tool": "env_probe"}),
        ("mcp.call", {"server": "tools", "tool": "add", "args": {"a": 1, "b": 1}}),
        ("mcp.call", {"server": "slow", "tool": "sleep", "args": {"seconds": 30}}),
        ("mcp.call", {"server": "nowhere", "tool": "x"}),
    ]
    fake = FakeLLM("fake", responses=[block(*calls), "Thinking."])
    agent = agent_factory(
        fake,
        consent={"auto_approve": ["mcp.call"]},
        mcp={
            "output_chars": 500,
            "servers": {
                "tools": stdio_server(["long_*", "fail", "env_probe"]),
                "slow": stdio_server(["sleep"], timeout_s=3),
            },
        },
    )
    state = agent.tick()
    results = {e["cmd_id"]: e for e in state["executed"]}
    assert results["c1"]["status"] == "executed" and len(results["c1"]["result"]) < 600
    assert results["c1"]["result"].endswith("more characters cut)")
    assert results["c2"]["status"] == "failed" and "the sea is dry" in results["c2"]["result"]
    assert "ANIMA_TEST_SECRET" not in results["c3"]["result"] and "PATH" in results["c3"]["result"]
    assert results["c4"]["status"] == "failed" and "not in the server's allow list" in results["c4"]["result"]
    assert results["c5"]["status"] == "failed" and "no answer within 3 s" in results["c5"]["result"]
    assert results["c6"]["status"] == "failed" and "no MCP server 'nowhere'" in results["c6"]["result"]
    statuses = [(r.value.split("(")[0], r.status) for r in rows(agent)]
    assert statuses == [
        ("tools.long_text", "ok"),
        ("tools.fail", "error"),
        ("tools.env_probe", "ok"),
        ("slow.sleep", "timeout"),
    ]


def test_listing_tools_is_read_only_until_it_asks_the_server(agent_factory):
    fake = FakeLLM("fake", responses=[block(("mcp.list", {})), block(("mcp.list", {"refresh": True})), "Thinking."])
    agent = agent_factory(
        fake, consent={"auto_approve": ["mcp.list"]}, mcp={"servers": {"tools": stdio_server(["add", "echo"])}}
    )
    first = agent.tick()["executed"][0]
    assert first["status"] == "executed" and "tools not listed yet" in first["result"]
    second = agent.tick()["executed"][0]
    assert second["status"] == "executed"
    assert "add(a*: integer, b*: integer) — Add two integers." in second["result"]
    assert "sleep(seconds: number) — Sleeps. (not allowed)" in second["result"]


@pytest.fixture(scope="module")
def http_tools_server():
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ},
    )
    try:
        wait_port(port, 60, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_a_streamable_http_server(agent_factory, http_tools_server):
    fake = FakeLLM("fake", responses=[block(("mcp.call", {"server": "web", "tool": "echo", "args": {"text": "ahoy"}}))])
    agent = agent_factory(
        fake,
        consent={"auto_approve": ["mcp.call"]},
        mcp={"servers": {"web": {"transport": "http", "url": http_tools_server, "allow": ["*"]}}},
    )
    [done] = agent.tick()["executed"]
    assert (done["status"], done["result"]) == ("executed", "echo: ahoy")
