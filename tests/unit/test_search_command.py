"""Epos's `search` backend: a local command-line program (`claude -p` there) named in config.yaml `search.command`,
run by `search.web` with a timeout and an output cap — and quietly off when the program is not installed. The
backend here is a real small script, run as a real process."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from reach.search import SearchError, command_argv, search_command
from tests.fakes.llm import FakeLLM

SEARCHER = """#!{python}
import json, sys, time
query = sys.argv[-1].removeprefix("--q=")
if query == "slow":
    time.sleep(60)
if query == "flood":
    sys.stdout.write("x" * 300_000)
    sys.stdout.flush()
    time.sleep(60)
if query == "broken":
    sys.stderr.write("the index is missing\\n")
    sys.exit(3)
print(json.dumps({{"results": [{{"title": f"{{query}} — finding {{i}}", "url": f"http://search.test/{{i}}",
                                 "content": f"args {{sys.argv[1:]}}"}} for i in (1, 2, 3)]}}))
"""


def block(*commands: tuple[str, dict], text: str = "I look it up.") -> str:
    items = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return text + "\n# Commands:\n" + json.dumps(items) + "\n# End commands"


@pytest.fixture
def searcher(tmp_path: Path) -> Path:
    script = tmp_path / "bin" / "searcher"
    script.parent.mkdir()
    script.write_text(SEARCHER.format(python=sys.executable), encoding="utf-8")
    script.chmod(0o755)
    return script


def test_search_web_runs_the_configured_command_and_its_results_are_data(agent_factory, searcher):
    fake = FakeLLM("fake", responses=[block(("search.web", {"query": "spring tide; rm -rf /", "k": 2})), "I read it."])
    agent = agent_factory(
        fake,
        consent={"auto_approve": ["search.web"]},
        search={"backend": "command", "command": [str(searcher), "--lang", "en", "--q={query}"]},
    )
    [ran] = agent.tick()["executed"]
    assert ran["status"] == "executed", ran
    # the query is one argument (no shell), put where `{query}` stands; k caps the results
    args = "args ['--lang', 'en', '--q=spring tide; rm -rf /']"
    assert ran["result"].splitlines() == [
        f"- spring tide; rm -rf / — finding {i} <http://search.test/{i}>: {args}" for i in (1, 2)
    ]
    second = agent.tick()
    assert [s["origin"] for s in second["untrusted"]] == ["search"]  # what the program printed is data


def test_without_the_program_search_is_quietly_off(agent_factory, tmp_path):
    fake = FakeLLM("fake", context_window=32768, responses=[block(("search.web", {"query": "tides"}))])
    agent = agent_factory(fake, search={"backend": "command", "command": [str(tmp_path / "no-such-cli"), "-p"]})
    [done] = agent.tick()["executed"]
    assert done["status"] == "refused" and "is not installed" in done["result"]
    prompt = [c["prompt"] for c in fake.calls if c["json_schema"] is None][0]
    assert "— OFF: the search program" in prompt
    with agent.services.db.unit() as repos:
        assert repos.approvals.pending() == []  # nothing waits for an approval it could never use


def test_the_query_goes_last_when_no_arg_names_it():
    assert command_argv(["claude", "-p"], "tides today") == ["claude", "-p", "tides today"]
    assert command_argv(["s", "--q={query}", "-n"], "a b") == ["s", "--q=a b", "-n"]


def test_a_slow_a_flooding_and_a_failing_program_are_errors(searcher):
    with pytest.raises(SearchError, match="no answer within 1 s"):
        search_command([str(searcher)], "slow", timeout_s=1)
    with pytest.raises(SearchError, match="wrote more than 100,000 bytes"):
        search_command([str(searcher)], "flood", timeout_s=30, max_bytes=100_000)
    with pytest.raises(SearchError, match="exited with 3: the index is missing"):
        search_command([str(searcher)], "broken", timeout_s=30)
    text = search_command([str(searcher)], "plain", max_results=1).render()
    assert text == "- plain — finding 1 <http://search.test/1>: args ['plain']"
