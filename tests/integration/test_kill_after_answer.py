"""kill -9 late in a tick loses no note: `run.py` against the scripted server, killed (tests/integration/
kill_after_answer.py wraps call_llm's answer) right after the tick's answer is kept, with a note written by `run.py say`
between the model call and the kill. The restart reuses the answer for the note it saw; the late note stays unread and
the next tick answers it. Deterministic: the hook waits for the test, the test waits for the hook (every wait is a
hang guard, not a timing)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memory import Database
from tests.integration.servers import ROOT, finish, run_cli

pytestmark = pytest.mark.integration

FIRST = "What is the tide doing tonight?"
LATE = "And where did the gulls go?"
GUARD_S = 120


def say(data_dir: Path, text: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "run.py", "say", text, "--data-dir", str(data_dir)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    code, out, err = finish(proc, guard_s=GUARD_S)
    assert code == 0, err[-2000:]


def run_with_kill_hook(llm_url: str, data_dir: Path, hook: Path) -> subprocess.Popen:
    """run_cli's `run.py`, killed once its tick's answer is kept (tests/integration/kill_after_answer.py)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration.kill_after_answer",
            str(hook),
            "--llm-url",
            llm_url,
            "--model",
            "scripted",
            "--no-fallback",
            "--ticks",
            "1",
            "--data-dir",
            str(data_dir),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "200"},
    )


def wait_for(path: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + GUARD_S
    while not path.exists():
        if proc.poll() is not None:
            pytest.fail(f"run.py ended ({proc.returncode}) before the hook was reached:\n{proc.stderr.read()[-3000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            proc.communicate(timeout=30)
            pytest.fail(f"the hook was not reached within {GUARD_S}s")
        time.sleep(0.1)


def incoming(prompt: str) -> str:
    """The prompt's "Incoming notes" block (a note read earlier may still come to mind as a memory elsewhere)."""
    return prompt.partition("# Incoming notes\n")[2].partition("\n# ")[0]


def thoughts(requests: list[dict]) -> dict[int, list[str]]:
    """The thinking requests the server saw, by tick (their prompt as one text)."""
    seen: dict[int, list[str]] = {}
    for request in requests:
        text = request.get("prompt") or "\n".join(str(m.get("content", "")) for m in request.get("messages") or [])
        match = re.search(r"; tick (\d+); mode ", text)  # the runtime block's line
        if match and "'s new thought" in text:
            seen.setdefault(int(match.group(1)), []).append(text)
    return seen


def test_a_note_written_after_the_model_call_survives_a_kill_9_and_is_answered(scripted_server, tmp_path):
    scripted_server.script(default={"do": "stream", "text": "Thought {n}: the water keeps its own time."})
    data, hook = tmp_path / "data", tmp_path / "hook"
    hook.mkdir()
    say(data, FIRST)
    proc = run_with_kill_hook(scripted_server.url, data, hook)
    wait_for(hook / "answer_kept", proc)  # tick 1's answer is kept; the process waits at the kill point
    say(data, LATE)  # the human writes after the model call…
    (hook / "kill").touch()  # …and the process dies before the tick ends
    code, out, err = finish(proc, guard_s=GUARD_S)
    assert code == -signal.SIGKILL, err[-2000:]

    database = Database.open(data)
    try:
        with database.unit() as repos:
            notes = {n.text: n for n in repos.notes.list(limit=10)}
            first = notes[FIRST].id
            assert not notes[FIRST].read and not notes[LATE].read
            assert repos.ticks.kept_answer("main", 1)["incoming_note_ids"] == [first]  # kept with the answer
    finally:
        database.close()
    before = thoughts(scripted_server.requests())
    assert list(before) == [1] and FIRST in incoming(before[1][0]) and LATE not in before[1][0]

    code, out, err = finish(run_cli(scripted_server.url, data, ticks="2"))  # no hook: an ordinary restart
    assert code == 0 and "done: 2 tick(s) this run" in err and "Traceback" not in err, err[-2000:]
    after = thoughts(scripted_server.requests())
    assert len(after[1]) == 1  # tick 1 resumed on its kept answer: not generated twice
    assert len(after[2]) == 1 and LATE in incoming(after[2][0]) and FIRST not in incoming(after[2][0])  # answered next
    database = Database.open(data)
    try:
        with database.unit() as repos:
            assert all(n.read for n in repos.notes.list(limit=10) if n.text in (FIRST, LATE))  # 0 notes lost
            assert [(t.tick, t.status) for t in repos.ticks.recent(5)] == [(1, "ok"), (2, "ok")]
            assert {m.tick for m in repos.messages.log("main") if m.role == "assistant"} == {1, 2}  # both answered
    finally:
        database.close()
