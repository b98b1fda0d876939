"""Real parts: the embedded Gemma 3 270M (llama.cpp in process), SQLite, SqliteSaver, the CLI."""

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

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_three_ticks_on_the_embedded_model(tmp_path):
    agent = build_agent("repl", data_dir=str(tmp_path), embedded_context_window=4096)
    with agent.services.db.unit() as repos:
        note_id = repos.notes.add("Hello Lumen, what is on your mind?", source="user").id
    agent.services.settings.sampling.max_tokens = 48
    for _ in range(3):
        state = agent.tick()
    assert state["tick"] == 3
    with agent.services.db.unit() as repos:
        ticks = repos.ticks.recent(10)
        assert [(t.tick, t.status) for t in ticks] == [(1, "ok"), (2, "ok"), (3, "ok")]
        assert all(t.llm_calls >= 1 and t.completion_tokens > 0 for t in ticks), [
            (t.tick, t.llm_calls, t.completion_tokens) for t in ticks
        ]  # an empty draw is drawn again once
        assert ticks[0].llm_calls >= 2  # a note arrived: the voice answers it beside the thought
        messages = repos.messages.recent("main", 10, kinds=("response", "stagnation_record"))
        assert len(messages) == 3 and all(m.llm_id == "embedded" for m in messages)
        assert all(m.auto_pass for m in messages)  # no validators configured
        assert all(m.novelty_score is not None for m in messages)
        # grammar-constrained JSON: the 270M model always yields at least one parsed emotion
        assert all(m.emotions and ":" in m.emotions[0] for m in messages if m.kind == "response")
        assert repos.notes.get(note_id).read
        calls = repos.llm_calls.by_model()
        assert {c["provider"] for c in calls} == {"llamacpp"}
        # "reply": the voice's turn for the waiting note (tests/integration/test_voice_embedded.py tests what it says)
        purposes = {c["purpose"] for c in calls}
        assert {"think"} <= purposes <= {"think", "emotion", "evaluate", "rephrase", "reply"}
        # a rating comes from the model, or without a call from the thought's own words, the tick's signals or a
        # repeat's original; the note's tick is never rated from signals or carried over (a human spoke)
        sources = {m.tick: (m.meta or {}).get("emotion_source") for m in messages if m.kind == "response"}
        assert set(sources.values()) <= {"llm", "self", "lexicon", "signals", "carried"}, sources
        assert sources.get(1) in (None, "llm", "self", "lexicon"), sources
        assert "llm" not in sources.values() or purposes & {"emotion", "evaluate"}, (sources, purposes)
    agent.close()


def _run(args, data_dir, **kw):
    """`run.py` on the embedded model, thinking every tick (these tests are about ticks, not the quiet policy)."""
    return subprocess.Popen(
        [sys.executable, str(ROOT / "run.py"), *args, "--data-dir", str(data_dir)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "ANIMA_CYCLE__THINKING": "continuous", **kw.pop("env", {})},
        **kw,
    )


def _ticks(data_dir) -> list[tuple[int, str]]:
    db = Path(data_dir) / "anima.sqlite"
    if not db.exists():
        return []
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("SELECT tick, status FROM ticks ORDER BY tick").fetchall()
    except sqlite3.OperationalError:
        return []


def test_kill_between_ticks_and_resume_loses_nothing_and_ctrl_c_finishes_the_step_saves_and_exits_zero(tmp_path):
    """One run of the embedded model killed with -9 after a tick, a note posted meanwhile; the rerun resumes, finishes
    a tick and is stopped with Ctrl-C in its next: it finishes the step, saves and exits 0; nothing was lost or run
    twice (one model run for both behaviours)."""
    proc = _run(["--ticks", "forever"], tmp_path)
    deadline = time.time() + 240
    while time.time() < deadline and not any(s == "ok" for _, s in _ticks(tmp_path)):
        time.sleep(0.5)
    assert any(s == "ok" for _, s in _ticks(tmp_path)), "no tick finished in time"
    say = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "say", "--data-dir", str(tmp_path), "remember the number 42"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert say.returncode == 0 and "posted" in say.stdout
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    ticks_before = _ticks(tmp_path)
    rerun = _run(["--ticks", "forever"], tmp_path)
    last_before = max(t for t, _ in ticks_before)
    deadline = time.time() + 240
    while time.time() < deadline and not any(t > last_before and s == "ok" for t, s in _ticks(tmp_path)):
        time.sleep(0.3)
    time.sleep(1.0)  # into the next tick
    rerun.send_signal(signal.SIGINT)
    out, _ = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, out
    assert "state saved" in out
    ticks_after = _ticks(tmp_path)
    assert max(t for t, _ in ticks_after) >= max(t for t, _ in ticks_before) + 1  # the tick count continued
    assert [t for t, _ in ticks_after] == sorted(set(t for t, _ in ticks_after))  # no tick number repeated
    report = json.loads(
        subprocess.run(
            [sys.executable, str(ROOT / "run.py"), "inspect", "--json", "--data-dir", str(tmp_path), "--limit", "50"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    )
    note = next(n for n in report["notes"]["incoming"] if n["text"] == "remember the number 42")
    assert note["read"]  # the note posted during the run was seen after the restart
    keys = [(c["tick"], c["cmd_id"]) for c in report["commands"]]
    assert len(keys) == len(set(keys))  # no command recorded (or run) twice
    thought = [t for t, s in ticks_after if s == "ok"]
    assert report["llm"]["totals"]["calls"] >= len(thought) and report["llm"]["totals"]["completion_tokens"] > 0
    metrics = report["anti_stagnation"]  # one anti-stagnation row per tick that produced a thought
    assert metrics and {m["tick"] for m in metrics} <= {t for t, s in ticks_after if s == "ok"}
    assert all(m["novelty_score"] is not None and m["method"] in ("cheap", "llm", "prose_gate") for m in metrics)
    # rated by the model, or without a call: cheap signals, the lexicon, the thought's own words, carried from a repeat
    assert all(
        r["emotion_source"] in ("llm", "signals", "lexicon", "self", "carried")
        for r in report["responses"]
        if r["kind"] == "response"
    )


def test_epos_continuation_ticks_on_the_embedded_model(tmp_path):
    agent = build_agent("epos", data_dir=str(tmp_path), embedded_context_window=4096)
    agent.services.settings.sampling.max_tokens = 48
    with agent.services.db.unit() as repos:
        note_id = repos.notes.add("Lumen, what colour is the sea today?", source="user").id
    first = agent.tick()
    assert first["mode"] == "continuation" and first["prompt"].startswith(agent.services.persona.seed[:40])
    assert "what colour is the sea today?" in first["prompt"] and first["prompt"].rstrip().endswith("answers:")
    second = agent.tick()
    with agent.services.db.unit() as repos:
        chunks = repos.messages.recent("main", 10, kinds=("continuation", "human"))
        assert repos.notes.get(note_id).read
        assert [t.status for t in repos.ticks.recent(10)] == ["ok", "ok"]
    assert any(m.kind == "continuation" and m.content.strip() for m in chunks)
    earlier = [m for m in chunks if m.tick == 1]
    assert earlier and all(m.content in second["prompt"] for m in earlier)  # the growing text carries every chunk
    agent.close()


def test_persona_show_prints_the_layers_with_their_sizes(tmp_path):
    run = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "persona", "show", "--layers", "--data-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    lines = [line for line in run.stdout.splitlines() if line.strip()]
    names = [line.split()[0] for line in lines if not line.startswith(("dropped:", "left out:"))]
    # claw0's order, what changes least first: the system message, resident memory, the bootstrap files, then the
    # runtime and channel layers
    assert names[:8] == ["identity", "soul", "commands", "skills", "ethics", "core", "bootstrap", "runtime"]
    assert names[-1] == "total"
    assert {"core", "runtime", "instruction"} <= set(names)  # the default window holds every layer of a new persona
    total = next(line for line in lines if line.startswith("total"))
    assert "tokens of a" in total and int(total.split()[1]) <= int(total.split("of a ")[1].split("-")[0])
    # the default window is small: the guide and the skills take their compact forms; nothing is dropped whole
    assert "dropped: commands: shrunk to a smaller form" in run.stdout and "whole block" not in run.stdout
    full = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "persona", "show", "--data-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "── system ──" in full.stdout and "I am Lumen" in full.stdout
    assert "- journaling: Write a diary entry" in full.stdout  # a skill in a line; skills.read gives it in full
    assert "- goals: goals.add, tasks.add, tasks.update" in full.stdout and "# Ethics" in full.stdout
