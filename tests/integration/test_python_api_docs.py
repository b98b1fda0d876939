"""docs/playbooks.md "From Python", run as written: the snippet that invokes and streams a tick through
`graph.open_graph` runs in its own process, in a fresh directory, against a real OpenAI-compatible server (the
scripted one: `ANIMA_LLM_URL`, as the page says the settings may come), and what it printed and stored is checked."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memory import Database

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
THOUGHT = (
    "The tide is turning.\n# Commands:\n"
    + json.dumps([{"cmd_id": "c1", "type": "notes.add", "args": {"text": "Check the tide tables."}}])
    + "\n# End commands"
)


def documented_snippet() -> str:
    """The page's Python block that uses open_graph on the repl playbook."""
    page = (ROOT / "docs" / "playbooks.md").read_text(encoding="utf-8")
    section = page.split("## From Python", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    [snippet] = [b for b in blocks if 'open_graph("repl"' in b]
    return snippet


def test_the_documented_open_graph_snippet_invokes_and_streams_a_tick(scripted_server, tmp_path):
    scripted_server.script(default={"do": "stream", "text": THOUGHT})
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "ANIMA_LLM_URL": scripted_server.url,
        "ANIMA_MODEL": "scripted",
        "HF_HUB_OFFLINE": "1",
    }
    env = {k: v for k, v in env.items() if k not in ("ANIMA_DATA_DIR", "ANIMA_DB_URL")}  # the snippet names its own
    done = subprocess.run(
        [sys.executable, "-c", documented_snippet()], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    invoked, streamed = done.stdout.split("\nupdates ", 1)  # the invoked tick's print, then the streamed one's
    assert invoked.startswith("1 The tide is turning."), invoked[:300]
    assert "'type': 'notes.add', 'status': 'executed'" in invoked, invoked[-300:]
    updates = ["updates " + streamed.splitlines()[0]] + [
        line for line in streamed.splitlines() if line.startswith("updates ")
    ]
    assert updates[0].startswith("updates {'update_process_log'") and "'tick': 2" in updates[0]
    assert updates[-1].startswith("updates {'execute_commands'")
    db = Database.open(tmp_path / "data")  # where the snippet's data_dir="data" put the persona's memory
    try:
        with db.unit() as repos:
            assert [n.text for n in repos.notes.list(source="llm", limit=10)] == ["Check the tide tables."] * 2
            assert sorted((t.tick, t.status) for t in repos.ticks.recent(10, "main")) == [(1, "ok"), (2, "ok")]
    finally:
        db.close()
