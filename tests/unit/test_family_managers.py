"""The catalogue, strategy, process, MCP and thread managers called as any door would — no command, no tick: each
holds its rules (what is refused and why, what else a change changes) over the one transaction it is given."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from managers import ManagerDeps, Managers
from managers.errors import Refused
from managers.strategies import MECHANISMS, THINKING_METHODS
from managers.threads import StelisRefused
from memory import Database
from persona.settings import McpSettings, ScriptSettings
from tests.fakes.managers import managers_over


def deps(**sections: Any) -> ManagerDeps:
    """The settings a manager reads, as the sections it needs (a stand-in for persona.settings.Settings)."""
    return ManagerDeps(settings=SimpleNamespace(**sections))  # type: ignore[arg-type]


def test_catalogues_refuse_what_the_commands_refused(tmp_path: Path) -> None:
    db = Database.open(tmp_path)
    try:
        with db.unit() as repos:
            catalogues = managers_over(repos).catalogues
            table = catalogues.add_table(name="tides", columns=["date", "date", "height_m"])
            assert table.columns == ["date", "height_m"]
            with pytest.raises(Refused, match="exists already"):
                catalogues.add_table(name="tides", columns=["x"])
            with pytest.raises(Refused, match="tides has no column 'wind'"):
                catalogues.insert_row(table="tides", row={"wind": "strong"})
            catalogues.insert_row(table="tides", row={"date": "2026-11-25", "height_m": 4.6})
            assert [(t.name, n) for t, n in catalogues.tables()] == [("tides", 1)]
            with pytest.raises(LookupError, match="no external service 'ghost'"):
                catalogues.put_account(name="mine", service="ghost")
            row, replaced = catalogues.rate(subject="strategy:flashback", score=3)
            assert not replaced and catalogues.rate(subject="strategy:flashback", score=-2)[1]
            catalogues.archive_rating(row.id)
            assert catalogues.ratings() == []
    finally:
        db.close()


def test_strategies_are_seeded_from_the_manager_and_refuse_a_taken_name(tmp_path: Path) -> None:
    db = Database.open(tmp_path)
    try:
        with db.unit() as repos:
            strategies = managers_over(repos).strategies
            assert {r.name for r in strategies.strategies()} == set(MECHANISMS)
            assert {r.name for r in strategies.methods()} == set(THINKING_METHODS)
            with pytest.raises(Refused, match="exists already"):
                strategies.add_strategy(name="pause", instruction="Stop for a while and breathe.")
            assert strategies.archive_method("analogy").name == "analogy"
            with pytest.raises(Refused, match="archived already"):
                strategies.archive_method("analogy")
    finally:
        db.close()


def test_processes_keep_the_operator_limits(tmp_path: Path) -> None:
    settings = deps(
        scripts=ScriptSettings.model_validate(
            {"enabled": True, "max_code_chars": 100, "max_running": 1, "max_timeout_s": 30}
        )
    )
    db = Database.open(tmp_path)
    try:
        with db.unit() as repos:
            processes = Managers(repos, settings).processes
            with pytest.raises(Refused, match="at most 100"):
                processes.save_script(name="long", language="python", code="x" * 101)
            saved = processes.save_script(name="hi", language="sh", code="echo hi")
            assert not saved.rewritten and not saved.enabled
            with pytest.raises(Refused, match="replace"):
                processes.save_script(name="hi", language="python", code="print('hi')")
            processes.save_script(name="hi", language="python", code="print('hi')", replace=True)
            started = processes.start(script="hi", args=[], thread_id="main", timeout_s=600)
            assert (started.timeout_s, started.process.status, started.script.runs) == (30.0, "pending", 1)
            with pytest.raises(Refused, match="1 of at most 1"):
                processes.start(script="hi", args=[], thread_id="main")
            with pytest.raises(Refused, match="still running"):
                processes.mark(started.process.id, "close")
    finally:
        db.close()


def test_mcp_refuses_an_unknown_server_and_a_tool_outside_the_allow_list(tmp_path: Path) -> None:
    settings = deps(mcp=McpSettings.model_validate({"servers": {"files": {"command": "true", "allow": ["read_*"]}}}))
    db = Database.open(tmp_path)
    try:
        with db.unit() as repos:
            mcp = Managers(repos, settings).mcp
            with pytest.raises(Refused, match="no MCP server 'web'; mine: files"):
                mcp.servers("web")
            with pytest.raises(Refused, match="not in the server's allow list"):
                mcp.call(server="files", tool="write_file", arguments={}, thread_id="main")
            assert mcp.seen_tools("files") is None
            assert repos.processes.listing("main") == []  # nothing was called
    finally:
        db.close()


def test_threads_refuse_a_child_too_deep(tmp_path: Path) -> None:
    class Model:
        context_window = 8192

    class Models:
        def primary(self) -> Model:
            return Model()

    class Settings:
        def window_tokens(self, model_window: int, thread_ratio: float = 1.0) -> int:
            return int(model_window * thread_ratio)

    db = Database.open(tmp_path)
    try:
        with db.unit() as repos:
            threads = Managers(repos, ManagerDeps(settings=Settings(), llms=Models())).threads  # type: ignore[arg-type]
            child, window, existed = threads.open_child(
                parent_id="main",
                child_id="main/a",
                label="a",
                window_ratio=0.5,
                max_depth=1,
                origin="command",
                persona="lumen",
                owner="test",
            )
            assert (child.depth, existed, window) == (1, False, 4096)
            assert repos.messages.anchor_for("main/a") is not None  # the parent's anchor, in the same transaction
            with pytest.raises(StelisRefused, match="over max_depth 1"):
                threads.open_child(
                    parent_id="main/a",
                    child_id="main/a/b",
                    label="b",
                    window_ratio=0.5,
                    max_depth=1,
                    origin="command",
                    persona="lumen",
                    owner="test",
                )
            threads.set_active("main", "main/a")
            assert threads.opened_by_command("main/a").id == "main/a"
            with pytest.raises(Refused):
                threads.opened_by_command("main")
            assert threads.finish("main/a", status="completed", chronicle="done").status == "completed"
    finally:
        db.close()
