"""HMP's long-term memory keeps "frequently used tools and links" apart from the diary: every executed `search.web`
(here through a real command-line backend), `mcp.call` and `links.*` counts one use, and `tools.used` shows the most
used first. An older database gains the table (v18)."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

from memory import Database
from memory.db import SCHEMA_VERSION
from tests.fakes.llm import FakeLLM
from tests.old_databases import as_version, schema_version

SEARCHER = f"""#!{sys.executable}
import json, sys
print(json.dumps({{"results": [{{"title": sys.argv[-1], "url": "http://search.test/1", "content": "found"}}]}}))
"""


def block(*commands: tuple[str, dict], text: str = "I work.") -> str:
    items = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return text + "\n# Commands:\n" + json.dumps(items) + "\n# End commands"


def test_searches_and_links_are_counted_and_tools_used_shows_the_most_used(agent_factory, tmp_path: Path):
    script = tmp_path / "searcher"
    script.write_text(SEARCHER, encoding="utf-8")
    script.chmod(0o755)
    fake = FakeLLM(
        "fake",
        responses=[
            block(
                ("concepts.add", {"name": "tide"}),
                ("concepts.add", {"name": "moon"}),
                ("links.add", {"source": "tide", "target": "moon", "relation": "caused_by"}),
            ),
            block(
                ("search.web", {"query": "spring tide"}), ("links.list", {"concept": "tide"}), ("links.read", {"id": 1})
            ),
            block(("search.web", {"query": "neap tide"}), ("links.read", {"id": 1}), ("links.read", {"id": 99})),
            block(("tools.used", {}), ("tools.used", {"kind": "link", "limit": 1})),
        ],
    )
    agent = agent_factory(
        fake, consent={"auto_approve": ["search.web"]}, search={"backend": "command", "command": [str(script)]}
    )
    for _ in range(3):
        agent.tick()
    with agent.services.db.unit() as repos:
        counted = {(r.kind, r.name): r.uses for r in repos.tool_uses.most_used(limit=20)}
    # two searches, the link added then read twice; a failed command (no link 99) and concepts.* count nothing
    assert counted == {
        ("tool", "search.web"): 2,
        ("link", "link 1"): 2,
        ("link", "tide → moon"): 1,
        ("link", "links of tide"): 1,
    }
    everything, links = agent.tick()["executed"]
    assert everything["status"] == links["status"] == "executed"
    shown = [line.split(", last ")[0] for line in everything["result"].splitlines()]
    # most used first (a tie: the one used last first)
    assert shown == [
        "link 1 (link): 2 use(s)",
        "search.web (tool): 2 use(s)",
        "links of tide (link): 1 use(s)",
        "tide → moon (link): 1 use(s)",
    ]
    [only] = links["result"].splitlines()
    assert only.startswith("link 1 (link): 2 use(s)")


def test_mcp_calls_are_counted_by_server_and_tool():
    from managers.tool_uses import used_thing

    assert used_thing("mcp.call", {"server": "web", "tool": "fetch", "arguments": {}}) == ("tool", "mcp.call web.fetch")
    assert used_thing("notes.add", {"text": "x"}) is None


def test_a_v16_database_gains_the_tool_uses_table(tmp_path: Path):
    Database.open(tmp_path).close()
    as_version(tmp_path, 16, "DROP TABLE tool_uses")
    db = Database.open(tmp_path)
    assert schema_version(db) == SCHEMA_VERSION
    with db.unit() as repos:
        assert repos.tool_uses.count("tool", "search.web", now=datetime.now()).uses == 1
    db.close()
