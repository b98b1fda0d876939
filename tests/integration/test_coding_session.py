"""Stelis's tool-building session (playbooks/coding_session.yaml) against a real MCP server process standing in for
the external coding agent (tests/integration/coding_tools_server.py, started over stdio by the SDK), thinking on an
instant scripted model as the other Stelis tests do: the program is written, saved and run by the agent, fixed from
what the run printed, and the finished tool is on disk; the whole session stays in its Stelis thread and its
chronicle reaches the parent. Without the human's consent nothing reaches the agent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.fakes.llm import FakeLLM

SERVER = Path(__file__).with_name("coding_tools_server.py")
GOAL = "count the words read from standard input and print 'words: N'"
WRONG = "```python\nimport sys\nprint(f'chars: {len(sys.stdin.read())}')\n```"
RIGHT = "import sys\nprint(f'words: {len(sys.stdin.read().split())}')"
CHRONICLE = "<chronicle of the coding session>"


def coder(workdir: Path) -> dict:
    return {
        "coder": {
            "transport": "stdio",
            "command": sys.executable,
            "args": [str(SERVER), "--workdir", str(workdir)],
            "allow": ["write_file", "run_python"],
            "timeout_s": 60,
        }
    }


def scripted(prompt: str) -> str:
    if "full log of a Stelis thread" in prompt:
        return CHRONICLE
    if "Tell your human" in prompt:
        return "I built a word counter with the coding agent; it prints words: 4 for four words."
    return RIGHT if "The last version, run on the sample input, answered" in prompt else WRONG


def test_a_coding_session_builds_a_working_tool_with_a_real_mcp_agent_and_chronicles_it(agent_factory, tmp_path):
    workdir = tmp_path / "agent-work"
    fake = FakeLLM("fake", responses=scripted)
    agent = agent_factory(
        fake, playbook="coding_session", consent={"auto_approve": ["mcp.call"]}, mcp={"servers": coder(workdir)}
    )
    agent.tick(inputs={"goal": GOAL, "sample_input": "the tide comes in", "expect": "words: 4"})
    out = agent.outputs()
    assert out["status"] == "done" and json.loads(out["run"]["result"])["stdout"] == "words: 4\n"
    # the artefact: the fixed program, written by the agent's process into its own directory, works on its own
    tool = workdir / "tool.py"
    assert tool.read_text() == RIGHT == out["code"]
    ran = subprocess.run([sys.executable, str(tool)], input="one two three", capture_output=True, text=True, timeout=30)
    assert ran.stdout == "words: 3\n"
    with agent.services.db.unit() as repos:
        [child] = repos.threads.children("main")
        assert (child.label, child.status, child.origin) == (f"coding session: {GOAL[:60]}", "completed", "playbook")
        assert child.chronicle == CHRONICLE
        inside = [(m.meta or {}).get("node") for m in repos.messages.log(child.id)]
        assert inside == ["write_code", "save", "try_it", "write_code", "save", "try_it"]  # two rounds, all inside
        calls = [m.content for m in repos.messages.log(child.id) if (m.meta or {}).get("command") == "mcp.call"]
        assert '"tool": "run_python"' in calls[1] and "chars: 17" in calls[1]
        parent = [(m.kind, (m.meta or {}).get("node")) for m in repos.messages.log("main")]
        assert parent == [("stelis_anchor", None), ("step", "announce")]  # nothing of the session but its anchor
        audit = [(a.type, a.decision) for a in repos.audit.recent(50) if a.type == "mcp.call"]
        assert audit == [("mcp.call", "executed")] * 4  # every call passed the consent gate (approved in advance)
    chronicle_prompt = next(c["prompt"] for c in fake.calls if "full log of a Stelis thread" in c["prompt"])
    assert "chars: 17" in chronicle_prompt and "words: 4" in chronicle_prompt and RIGHT in chronicle_prompt
    announce = next(c["prompt"] for c in fake.calls if "Tell your human" in c["prompt"])
    assert CHRONICLE in announce and "Its outcome: done" in announce


def test_without_consent_the_session_reaches_no_agent(agent_factory, tmp_path):
    workdir = tmp_path / "agent-work"
    agent = agent_factory(
        FakeLLM("fake", responses=scripted), playbook="coding_session", mcp={"servers": coder(workdir)}
    )
    agent.tick(inputs={"goal": GOAL, "sample_input": "a b", "expect": "words: 2"})
    out = agent.outputs()
    assert out["status"] == "waiting for approval" and out["run"]["status"] == "pending_approval"
    assert not (workdir / "tool.py").exists()
    with agent.services.db.unit() as repos:
        assert sorted(a.args["tool"] for a in repos.approvals.pending()) == ["run_python", "write_file"]
        assert repos.threads.children("main")[0].status == "completed"
