"""Real parts: the shipped one-shot playbooks and Stelis abort safety on the embedded model, SQLite and SqliteSaver."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graph.agent import build_agent
from persona.settings import Settings

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
WINDOW = Settings.model_fields["embedded_context_window"].default  # the embedded model's default window


def test_deep_work_on_the_embedded_model(tmp_path):
    agent = build_agent("deep_work", data_dir=str(tmp_path))
    events = [
        d
        for mode, d in agent.stream(inputs={"question": "Why is the sea salty?", "max_tasks": 1, "max_questions": 1})
        if mode == "custom"
    ]
    out = agent.outputs()
    assert isinstance(out["answer"], str) and out["answer"].strip()
    assert len(out["tasks"]) == 1 and out["findings"][0]["status"] == "completed"
    with agent.services.db.unit() as repos:
        (child,) = repos.threads.children("main")
        assert (child.depth, child.window_ratio, child.status, child.origin) == (1, 0.8, "completed", "playbook")
        assert child.chronicle and child.chronicle.strip() == out["findings"][0]["chronicle"].strip()
        child_steps = [m.meta["node"] for m in repos.messages.log(child.id)]
        assert child_steps == ["ask_questions", "examine", "check", "conclude"]
        assert all(
            m.meta["window"] == int(WINDOW * 0.8) and m.meta["prompt_tokens"] + 220 <= m.meta["window"]
            for m in repos.messages.log(child.id)
        )
        assert [m.kind for m in repos.messages.log("main")] == ["step", "stelis_anchor", "step"]
        purposes = {c["purpose"] for c in repos.llm_calls.by_model()}
        assert {"step", "chronicle"} <= purposes
    enter = next(e for e in events if e.get("event") == "stelis_enter")
    assert enter["window_tokens"] == int(WINDOW * 0.8) and enter["depth"] == 1
    agent.close()


def test_novel_on_the_embedded_model(tmp_path):
    agent = build_agent("novel", data_dir=str(tmp_path))
    agent.run(inputs={"premise": "A lighthouse keeper finds a message in a bottle.", "chapters": 1})
    out = agent.outputs()
    assert out["title"] and len(out["outline"]) == 1
    assert out["book"].startswith("## Chapter 1: ") and len(out["book"]) > 100
    assert out["announcement"].strip()
    with agent.services.db.unit() as repos:
        (child,) = repos.threads.children("main")
        assert child.status == "completed" and child.chronicle
        assert [m.meta["node"] for m in repos.messages.log(child.id)] == ["plan_book", "write_chapter"]
        assert [m.kind for m in repos.messages.log("main")] == ["stelis_anchor", "step"]
    agent.close()


def _child_steps(db: Path) -> list[tuple[str, str, int]]:
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute(
                "SELECT t.id, t.status, COUNT(m.id) FROM threads t LEFT JOIN messages m "
                "ON m.thread_id = t.id WHERE t.parent_id IS NOT NULL GROUP BY t.id"
            ).fetchall()
    except sqlite3.OperationalError:
        return []


def test_kill_inside_a_stelis_thread_then_rerun_aborts_it_and_finishes(tmp_path):
    args = [
        sys.executable,
        str(ROOT / "run.py"),
        "--playbook",
        "novel",
        "--input",
        "premise=A cat learns to sail.",
        "--input",
        "chapters=3",
        "--data-dir",
        str(tmp_path),
    ]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    db = tmp_path / "anima.sqlite"
    deadline = time.time() + 300
    while time.time() < deadline and not any(
        status == "running" and count >= 1 for _, status, count in _child_steps(db)
    ):
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.5)
    os.kill(proc.pid, signal.SIGKILL)  # inside the child: the outline is written, a chapter is being generated
    proc.wait()
    ((child_id, status, written),) = _child_steps(db)
    assert status == "running"
    rerun = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert f"aborting Stelis thread {child_id}" in rerun.stderr
    assert "resuming the interrupted novel run" in rerun.stderr
    out = json.loads(rerun.stdout)
    assert out["announcement"].strip()  # the parent went on after the aborted child
    with sqlite3.connect(db) as conn:
        status, error, chronicle = conn.execute(
            "SELECT status, error, chronicle FROM threads WHERE id = ?", (child_id,)
        ).fetchone()
        kinds = [k for (k,) in conn.execute("SELECT kind FROM messages WHERE thread_id = 'main' ORDER BY id")]
        child_messages = conn.execute("SELECT COUNT(*) FROM messages WHERE thread_id = ?", (child_id,)).fetchone()[0]
    assert status == "aborted" and "stopped before it finished" in error and chronicle
    assert kinds == ["stelis_anchor", "step"] and child_messages == written  # nothing in the dead child re-ran
