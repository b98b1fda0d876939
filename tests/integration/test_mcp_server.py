"""MCP, inward: the persona served as an MCP server — `run.py mcp` over stdio (a real client session from the SDK
starts it as a subprocess) and the web app's /mcp over streamable HTTP (uvicorn on loopback, behind the token
guard). A note posted through MCP reaches the persona's next prompt as fenced data, and its answer comes back
through read_messages."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client

from graph.loop.driver import run_loop
from persona.settings import Overrides
from tests.conftest import make_agent
from tests.fakes.llm import FakeLLM
from tests.integration.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 90


def block(*commands: tuple[str, dict]) -> str:
    items = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return "I think about the sea.\n# Commands:\n" + json.dumps(items) + "\n# End commands"


def seeded(tmp_path: Path, fake: FakeLLM):
    agent = make_agent(tmp_path, fake)
    with agent.services.db.unit() as repos:
        goal = repos.goals.add("Learn the names of the winds")
        repos.tasks.add("Read about the mistral", goal_id=goal.id, priority=3)
        repos.diary.add("The mistral blows cold down the Rhône valley.")
    run_loop(agent, ticks=1)  # a session, and the first thought
    return agent


async def exercise(session: ClientSession) -> dict:
    await session.initialize()
    tools = {t.name for t in (await session.list_tools()).tools}
    posted = await session.call_tool("post_note", {"text": "Which wind is the coldest?", "priority": 2})
    goals = await session.call_tool("list_goals", {})
    tasks = await session.call_tool("list_tasks", {})
    found = await session.call_tool("search_memory", {"query": "mistral Rhône", "k": 3})
    bad = await session.call_tool("search_memory", {"query": "x", "tiers": ["nonsense"]})
    templates = {t.uriTemplate for t in (await session.list_resource_templates()).resourceTemplates}
    identity = await session.read_resource("persona://files/IDENTITY.md")
    sessions = await session.read_resource("anima://sessions")
    first = json.loads(sessions.contents[0].text)[0]["id"]
    transcript = await session.read_resource(f"anima://sessions/{first}")
    return {
        "transcript": transcript.contents[0].text,
        "tools": tools,
        "posted": posted.structuredContent,
        "goals": goals.structuredContent,
        "tasks": tasks.structuredContent,
        "found": found.structuredContent,
        "bad": bad,
        "templates": templates,
        "identity": identity.contents[0].text,
        "sessions": json.loads(sessions.contents[0].text),
    }


def check(result: dict, agent) -> None:
    assert result["tools"] == {"post_note", "read_messages", "search_memory", "list_goals", "list_tasks"}
    note_id = result["posted"]["note_id"]
    with agent.services.db.unit() as repos:
        note = repos.notes.get(note_id)
        assert (note.text, note.source, note.priority, note.tags) == (
            "Which wind is the coldest?",
            "user",
            2,
            ["via:mcp"],
        )
    assert [g["title"] for g in result["goals"]["result"]] == ["Learn the names of the winds"]
    assert [(t["title"], t["priority"]) for t in result["tasks"]["result"]] == [("Read about the mistral", 3)]
    assert any("mistral" in h["text"] for h in result["found"]["hits"])
    assert result["bad"].isError and "not searchable: nonsense" in result["bad"].content[0].text
    assert {"persona://files/{name}", "anima://sessions/{session_id}"} <= result["templates"]
    assert "Lumen" in result["identity"]
    assert result["transcript"].startswith(f"# Session {result['sessions'][0]['id']} — ")
    assert "goal 1 (" in result["transcript"] and "Learn the names of the winds" in result["transcript"]
    assert result["sessions"] and result["sessions"][0]["last_tick"] >= 1 and result["sessions"][0]["goals"] == 1


def test_run_py_mcp_over_stdio_with_a_real_client_session(tmp_path):
    fake = FakeLLM(
        "fake", responses=["The sea is calm.", block(("messages.send", {"text": "The north wind, the bora."}))]
    )
    agent = seeded(tmp_path, fake)
    params = StdioServerParameters(
        command=sys.executable, args=[str(ROOT / "run.py"), "mcp", "--data-dir", str(tmp_path)], cwd=str(ROOT)
    )

    async def go():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            result = await exercise(session)
            agent.tick()  # the persona reads the note posted through MCP and answers it
            result["messages"] = (await session.call_tool("read_messages", {"limit": 10})).structuredContent
            return result

    result = asyncio.run(asyncio.wait_for(go(), TIMEOUT_S))
    check(result, agent)
    prompt = [c["prompt"] for c in fake.calls if c["json_schema"] is None][-1]
    fenced = prompt.split('from="notes to me">', 1)[1].split("</data", 1)[0]
    assert "Which wind is the coldest?" in fenced
    said = [(m["who"], m["text"]) for m in result["messages"]["messages"]]
    assert said[-2:] == [("human", "Which wind is the coldest?"), ("persona", "The north wind, the bora.")]
    agent.services.db.close()


def test_the_web_app_serves_mcp_at_slash_mcp_behind_its_token(tmp_path, monkeypatch):
    from web.server import start_in_thread

    agent = seeded(tmp_path, FakeLLM("fake"))
    monkeypatch.setenv("ANIMA_API_TOKEN", "s3cret")
    port = free_port()
    web = start_in_thread(Overrides.of(data_dir=str(tmp_path)), "127.0.0.1", port)
    url = f"{web.url}/mcp"

    async def go(headers):
        async with (
            streamablehttp_client(url, headers=headers) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            return await exercise(session)

    try:
        result = asyncio.run(asyncio.wait_for(go({"Authorization": "Bearer s3cret"}), TIMEOUT_S))
        check(result, agent)
        import httpx

        refused = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=10)
        assert refused.status_code == 401
    finally:
        web.stop()
        agent.services.db.close()
