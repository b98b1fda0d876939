"""HMP's debug marks: diary entries tagged `debug:*` are traces, kept apart from the diary — left out of diary.list
unless asked for (`debug: true`, or a `debug:` tag), and marked `debug` in the session's thought log export."""

from __future__ import annotations

import json

from tests.fakes.llm import FakeLLM
from tests.fakes.managers import managers_over


def commands(*items) -> str:
    return (
        "# Commands:\n"
        + json.dumps([{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(items)])
        + "\n# End commands"
    )


def test_debug_entries_are_left_out_of_the_diary_unless_asked_for(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            "Noting.\n"
            + commands(
                ("diary.add", {"text": "The gulls are loud today.", "tags": ["sea"]}),
                ("diary.add", {"text": "Third identical thought in a row.", "tags": ["debug:stagnation_loop"]}),
            ),
            "Reading.\n"
            + commands(
                ("diary.list", {}), ("diary.list", {"debug": True}), ("diary.list", {"tag": "debug:stagnation_loop"})
            ),
        ],
    )
    agent = agent_factory(fake)
    agent.tick()
    results = [e["result"] for e in agent.tick()["executed"]]
    assert "The gulls are loud today." in results[0] and "Third identical thought" not in results[0]
    assert "Third identical thought in a row." in results[1] and "gulls" not in results[1]
    assert "Third identical thought in a row." in results[2]
    with agent.services.db.unit() as repos:
        diary = managers_over(repos).diary
        assert [e.text for e in diary.list(tag="debug:*")] == ["Third identical thought in a row."]
        assert len(diary.list(debug=None)) == 2


def test_run_py_sessions_export_writes_the_thought_log_as_csv_and_jsonl(agent_factory, tmp_path):
    import csv

    from typer.testing import CliRunner

    from cli import app
    from nodes.context import utcnow

    fake = FakeLLM(
        "fake",
        responses=[
            "The tide is out.\n" + commands(("diary.add", {"text": "Loop again.", "tags": ["debug:stagnation_loop"]}))
        ],
    )
    agent = agent_factory(fake)
    with agent.services.db.unit() as repos:
        session_id, _ = managers_over(repos).sessions.open("main", playbook="repl", persona="Lumen", now=utcnow())
    agent.tick()
    with agent.services.db.unit() as repos:
        managers_over(repos).sessions.close(session_id, utcnow())
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["sessions", "export", str(session_id), "--out", str(out), "--data-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (out / f"session-{session_id}.jsonl").read_text().splitlines()]
    rows = list(csv.DictReader((out / f"session-{session_id}.csv").open(encoding="utf-8")))
    assert [r["text"] for r in rows] == [r["text"] for r in records]
    assert ("diary", "debug", "Loop again.") in [(r["record"], r["kind"], r["text"]) for r in records]
    assert any(r["kind"] == "response" and "The tide is out." in r["text"] for r in records)
