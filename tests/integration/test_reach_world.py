"""World input through ticks, against a local HTTP server (tests/integration/world_server.py) and a real MCP server:
web search through each kind of backend (off when none is configured, and the prompt says so), and RSS/Atom feeds
whose entries become notes with source tags — once each — fetched on the persona's consented command or by the
loop between ticks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from graph.loop.driver import run_loop
from nodes.context import utcnow
from tests.fakes.llm import FakeLLM
from tests.fakes.managers import answer
from tests.integration.world_server import world_server

SERVER = Path(__file__).with_name("mcp_tools_server.py")


def block(*commands: tuple[str, dict], text: str = "I look outside.") -> str:
    items = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return text + "\n# Commands:\n" + json.dumps(items) + "\n# End commands"


def think_prompts(fake: FakeLLM) -> list[str]:
    return [c["prompt"] for c in fake.calls if c["json_schema"] is None]


@pytest.fixture(scope="module")
def world():
    with world_server() as (url, handler):
        yield url, handler


def test_without_a_backend_web_search_is_off_and_the_prompt_says_so(agent_factory):
    # a window the full command guide fits (a small one gets the brief guide: tests/unit/test_budget.py)
    fake = FakeLLM("fake", context_window=32768, responses=[block(("search.web", {"query": "tides"}))])
    agent = agent_factory(fake)
    [done] = agent.tick()["executed"]
    assert done["status"] == "refused" and "no search backend is configured" in done["result"]
    prompt = think_prompts(fake)[0]
    assert "world: web search off (no search backend is configured)" in prompt
    assert "- search.web " in prompt and "— OFF: no search backend is configured" in prompt
    with agent.services.db.unit() as repos:
        assert repos.approvals.pending() == []  # nothing waits for an approval it could never use


def test_search_through_an_http_backend_needs_consent_and_its_results_are_data(agent_factory, world):
    url, handler = world
    fake = FakeLLM(
        "fake", responses=[block(("search.web", {"query": "spring tide", "k": 3})), "Waiting.", "I read it."]
    )
    agent = agent_factory(
        fake, search={"backend": "http", "url": f"{url}/search", "params": {"format": "json"}, "max_results": 5}
    )
    assert agent.tick()["executed"][0]["status"] == "pending_approval"
    assert "spring tide" not in handler.queries  # nothing left on the model's word
    with agent.services.db.unit() as repos:
        approval = repos.approvals.pending()[0]
    answer(agent.services.db, approval.id, approve=True, by="human", now=utcnow())
    ran = [e for e in agent.tick()["executed"] if e.get("approval_id") == approval.id][0]
    assert ran["status"] == "executed"
    assert ran["result"].splitlines() == [
        f"- spring tide — result {i} <http://search.test/{i}>: What the web says about spring tide, part {i}."
        for i in (1, 2, 3)
    ]
    agent.tick()
    fenced = think_prompts(fake)[-1].split('from="results of my commands">', 1)[1].split("</data", 1)[0]
    assert "search.web: ok] 'spring tide' → - spring tide — result 1" in fenced
    assert "world: web search on (http: " in think_prompts(fake)[-1]


def test_search_through_an_openai_compatible_model_and_an_mcp_tool(agent_factory, world):
    url, _ = world
    fake = FakeLLM("fake", responses=[block(("search.web", {"query": "Severn bore"}))])
    agent = agent_factory(
        fake,
        consent={"auto_approve": ["search.web"]},
        search={"backend": "openai", "url": f"{url}/v1", "model": "searcher"},
    )
    [done] = agent.tick()["executed"]
    assert (done["status"], done["result"]) == ("executed", "The Severn bore is a tidal wave (http://bore.test).")

    fake = FakeLLM("fake", responses=[block(("search.web", {"query": "mistral", "k": 2}))])
    agent = agent_factory(
        fake,
        consent={"auto_approve": ["search.web"]},
        mcp={"servers": {"tools": {"command": sys.executable, "args": [str(SERVER)]}}},
        search={"backend": "mcp", "server": "tools", "tool": "web_search"},
    )
    [done] = agent.tick()["executed"]
    assert done["status"] == "executed"
    assert done["result"].splitlines() == [
        "- Result 1 about mistral <http://example.test/1>: Snippet 1: mistral explained.",
        "- Result 2 about mistral <http://example.test/2>: Snippet 2: mistral explained.",
    ]


def feed_notes(agent):
    with agent.services.db.unit() as repos:
        return [(n.text.splitlines()[0], n.tags, n.links, n.read) for n in repos.notes.list(source="feed", limit=50)]


def test_a_subscription_needs_consent_then_entries_become_notes_once(agent_factory, world):
    url, handler = world
    fake = FakeLLM(
        "fake",
        responses=[
            block(
                ("feeds.subscribe", {"url": f"{url}/tides.rss", "tags": ["sea"]}),
                ("feeds.subscribe", {"url": f"{url}/broken.rss"}),
            ),
            block(("feeds.fetch", {}), text="Is there news about the tides?"),
            block(("feeds.list", {}), text="Which feeds do I read, and what waits unread?"),
            "Thinking.",
        ],
    )
    agent = agent_factory(fake)
    assert {e["status"] for e in agent.tick()["executed"]} == {"pending_approval"}
    with agent.services.db.unit() as repos:
        ids = [a.id for a in repos.approvals.pending()]
    for approval_id in ids:
        answer(agent.services.db, approval_id, approve=True, by="human", now=utcnow())
    state = agent.tick()  # the subscriptions run (each fetches once), and feeds.fetch parks
    results = sorted(e["result"] for e in state["executed"] if e.get("approval_id"))
    assert results[0].startswith("subscribed to feed 1; feed 1 (127.0.0.1): 2 new item(s) — Seals return to the bay")
    assert "not an RSS or Atom feed" in results[1]
    assert feed_notes(agent) == [  # a feed lists its newest entry first: it gets the higher id
        ("Seals return to the bay (Tide News)", ["feed", "feed:127.0.0.1", "sea"], "http://tides.test/2", False),
        ("Spring tide tonight (Tide News)", ["feed", "feed:127.0.0.1", "sea"], "http://tides.test/1", False),
    ]
    with agent.services.db.unit() as repos:
        note = repos.notes.get(2)
        assert "The highest tide of the year comes at 21:40." in note.text  # HTML to text
        pending = repos.approvals.pending()[0]
    answer(agent.services.db, pending.id, approve=True, by="human", now=utcnow())
    fetched = [e for e in agent.tick()["executed"] if e.get("approval_id") == pending.id][0]
    assert "feed 1 (127.0.0.1): 0 new item(s)" in fetched["result"]  # a 304: nothing twice
    assert len(feed_notes(agent)) == 2
    agent.tick()
    listing = think_prompts(fake)[-1]
    assert (
        "2 unread feed item(s)" in listing
        and "world: web search off" in listing
        and "2 feed(s), 2 unread item(s)" in listing
    )


def test_the_loop_fetches_the_operators_feeds_between_ticks(agent_factory, world):
    url, handler = world
    before = handler.hits.get("/wind.atom", 0)
    agent = agent_factory(
        FakeLLM("fake"), feeds={"subscriptions": [{"url": f"{url}/wind.atom", "name": "wind", "tags": ["weather"]}]}
    )
    run_loop(agent, ticks=2)
    assert handler.hits["/wind.atom"] == before + 1  # due once: every_minutes (60) has not passed since
    assert feed_notes(agent) == [
        ("The mistral is back (Wind Log)", ["feed", "feed:wind", "weather"], "http://wind.test/1", False)
    ]
    with agent.services.db.unit() as repos:
        [feed] = repos.feeds.list()
        assert (feed.added_by, feed.items_total, feed.last_error) == ("operator", 1, None)


def test_the_world_check_breaks_a_loop_with_what_the_feeds_brought(agent_factory, world):
    url, handler = world
    loop = "I keep thinking that the lighthouse beam sweeps the same circle over the water."
    fake = FakeLLM("fake", responses=[loop])
    agent = agent_factory(
        fake, feeds={"subscriptions": [{"url": f"{url}/tides.rss", "name": "tides"}]}, cycle={"thinking": "continuous"}
    )  # seven thoughts in a row: the loop to break
    before = handler.hits.get("/tides.rss", 0)
    run_loop(agent, ticks=7)
    stimuli = [
        p.split('from="memories and documents brought up to break a loop">', 1)[1].split("</data", 1)[0]
        for p in think_prompts(fake)
        if "brought up to break a loop" in p
    ]
    assert "News from outside (a feed): Spring tide tonight (Tide News)" in stimuli[0]  # the feed's newest first
    assert any("News from outside (a feed): Seals return to the bay (Tide News)" in s for s in stimuli[1:])
    assert any("I asked for fresh news from my feeds" in s for s in stimuli)
    assert any("My feeds have nothing new" in s for s in stimuli)  # asked once an episode, not again
    assert handler.hits["/tides.rss"] == before + 2  # fetched once when due, once more when the world check asked
    with agent.services.db.unit() as repos:
        assert repos.feeds.unread_count() == 0
