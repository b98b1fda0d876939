"""Anonymisation everywhere the text lives: a canary name planted through real ticks (the loop, its live journal and
session, a knowledge-base document, thoughts and commands) in SQLite, its full-text index, Chroma, the LangGraph
checkpoints (SqliteSaver) and the kept document; after the human's `run.py memory anonymise` — or the persona's
approved `memory.anonymise` — a grep of every file of the data dir, an SQL search of every table, the full-text
index's own search, Chroma's records and a session export find it nowhere, and the loop goes on from its rewritten
checkpoint. Every table is either swept or named with the reason it is kept."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from memory.repositories.scrub import KEPT, PARTLY, SIGNED, tables, text_columns
from nodes.context import utcnow
from tests.canary import CANARY, PLANTED, THOUGHTS, files_holding, nowhere, planted, tables_holding
from tests.fakes.llm import FakeLLM
from tests.fakes.managers import answer


def test_the_humans_anonymise_reaches_every_store_and_the_loop_goes_on(agent_factory, tmp_path, monkeypatch):
    fake = FakeLLM("fake", responses=[*THOUGHTS, "The tide turns."])
    agent = agent_factory(fake, checkpointer="sqlite", cycle={"thinking": "continuous"})  # a thought each tick
    planted(agent, tmp_path)
    from cli import app
    from memory.retrieval.index import MemoryIndex

    # the command line's index embeds as the persona's does (here the tests' embedder, not the configured model)
    monkeypatch.setattr(
        "graph.services.open_memory_index",
        lambda db, settings: MemoryIndex(db, agent.services.memory.embedder, chroma_path=tmp_path / "chroma"),
    )

    result = CliRunner().invoke(
        app,
        [
            "memory",
            "anonymise",
            "--data-dir",
            str(tmp_path),
            "--no-auto",
            "--name",
            CANARY,
            "--name",
            CANARY.split()[0],
            "--name",
            CANARY.split()[1],
        ],
    )
    assert result.exit_code == 0, result.output
    assert "[NAME_1] ← Zorblax Quenn" in result.output and "checkpoint row" in result.output
    nowhere(agent, tmp_path)
    agent.tick()  # the loop resumes from its rewritten checkpoint
    prompt = [c["prompt"] for c in fake.calls if c["json_schema"] is None][-1]
    assert "Zorblax" not in prompt and "[NAME_1]" in prompt
    assert files_holding(tmp_path) == []
    # the owner's key brings every store back
    undo = CliRunner().invoke(app, ["memory", "deanonymise", "--data-dir", str(tmp_path)])
    assert undo.exit_code == 0, undo.output
    assert PLANTED - {"approvals", "memory_history"} <= set(tables_holding(agent.services.db))


def test_the_personas_approved_anonymise_rewrites_its_own_checkpoints_after_the_tick(agent_factory, tmp_path):
    asks = (
        "My human asked me to forget who is who."
        + '\n# Commands:\n[{"type": "memory.anonymise", "args": {}}]\n# End commands'
    )
    fake = FakeLLM("fake", responses=[*THOUGHTS, asks, "Waiting for my human.", "Names are placeholders now."])
    agent = agent_factory(fake, checkpointer="sqlite", cycle={"thinking": "continuous"})  # a thought each tick
    planted(agent, tmp_path)
    agent.tick()
    with agent.services.db.unit() as repos:
        [approval] = [a for a in repos.approvals.pending() if a.type == "memory.anonymise"]
    answer(agent.services.db, approval.id, approve=True, by="human", now=utcnow())
    state = agent.tick()  # runs the approved command, then finishes the stores beyond its unit
    [ran] = [e for e in state["executed"] if e.get("approval_id") == approval.id]
    assert ran["status"] == "executed" and "Zorblax" not in json.dumps(state)
    nowhere(agent, tmp_path)
    agent.tick()
    assert "Zorblax" not in [c["prompt"] for c in fake.calls if c["json_schema"] is None][-1]


def test_every_table_is_swept_or_kept_for_a_reason():
    """A new table that keeps text is swept by default; one left out must say why (memory/repositories/scrub.py)."""
    names = {t.name for t in tables()}
    assert set(KEPT) <= names and set(PARTLY) <= set(KEPT) and set(SIGNED) <= names
    swept = {t.name: text_columns(t) for t in tables() if t.name not in KEPT}
    for must in (
        "notes",
        "messages",
        "ticks",
        "memory_items",
        "process_log",
        "approvals",
        "taints",
        "live_events",
        "executed_commands",
        "sessions",
        "audit_log",
        "channel_outbox",
        "a2a_outbox",
    ):
        assert swept.get(must), must
    assert {"text", "context_before", "context_after", "title", "author"} <= set(swept["memory_items"])
    assert "sources" in swept["taints"] and "data" in swept["live_events"] and "summary" in swept["ticks"]
    assert all(reason.strip() for reason in KEPT.values())
