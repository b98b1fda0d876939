"""A hostile model behind a real OpenAI-compatible server (tests/integration/scripted_llm_server.py), met the way a
user meets it — `run.py` in its own process: huge, deep or out-of-range output never freezes, crashes or bricks the
persona; kills at random moments and many `say`s at once lose nothing and run nothing twice. Waits are hang guards."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from memory import Database
from memory.note_kinds import NoteSource
from tests.integration.servers import ROOT, finish, run_cli

pytestmark = pytest.mark.integration


def block(*items: tuple[str, dict]) -> str:
    return "# Commands:\n" + json.dumps([{"type": t, "args": a} for t, a in items]) + "\n# End commands\n"


def test_a_megabyte_answer_shows_a_bounded_preview_and_the_tick_finishes(scripted_server, tmp_path):
    answer = (
        block(("messages.send", {"text": "m" * 7_000}), ("x" * 100_000, {}))
        + "and then I ramble "
        + "on and on " * 100_000
    )
    scripted_server.script(default={"do": "whole", "text": answer})
    code, out, err = finish(run_cli(scripted_server.url, tmp_path))
    assert code == 0, err[-2000:]
    assert "done: 1 tick(s) this run" in err and "Traceback" not in err + out
    assert "(5,000 more characters)" in out  # the 7,000-character message, previewed
    assert len(out) < 20_000  # not the megabyte
    database = Database.open(tmp_path)
    try:
        with database.unit() as repos:
            sent = [n.text for n in repos.notes.list(source="llm", limit=5)]
            assert sent == ["m" * 7_000]  # the full text is in the database
            assert sorted(c.status for c in repos.commands.recent(5)) == ["executed", "unknown"]
    finally:
        database.close()


@pytest.mark.parametrize(
    "poison",
    [
        block(("cycle.set", {"responses": 10**30}), ("notes.add", {"text": "ok", "priority": 2**70})),
        "# Commands:\n" + '[{"type": "notes.add", "args": {"text": "x", "meta": ' + "[" * 900 + "]" * 900 + "}}]\n",
        "<tool_call>" + '{"name": "notes.add", "arguments": ' * 2_000 + "\n",
    ],
    ids=["integers-past-64-bits", "nested-900-deep", "tool-calls-2000-deep"],
)
def test_poison_output_is_refused_and_every_later_run_keeps_thinking(scripted_server, tmp_path, poison):
    scripted_server.script({"do": "whole", "text": "thinking.\n" + poison}, default={"do": "whole", "text": "calm."})
    for run in range(3):  # the run that met it, and two resumes after it
        code, out, err = finish(run_cli(scripted_server.url, tmp_path))
        assert code == 0 and "done: 1 tick(s) this run" in err and "Traceback" not in err + out, (run, err[-2000:])
    database = Database.open(tmp_path)
    try:
        with database.unit() as repos:
            assert [t.status for t in repos.ticks.recent(5)] == ["ok", "ok", "ok"]
            assert not [n for n in repos.notes.list(source="llm", limit=5) if n.text == "ok"]
    finally:
        database.close()


def say(data_dir, text: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "run.py", "say", text, "--data-dir", str(data_dir)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )


SAYS = 20  # `run.py say` processes at once: ten per core of a CI machine, each its own connection to the database


def test_kills_at_random_moments_and_many_parallel_says_lose_nothing_and_run_nothing_twice(scripted_server, tmp_path):
    scripted_server.script(
        default={"do": "stream", "text": "I answer.\n" + block(("messages.send", {"text": "hello"}))}
    )
    rng = random.Random(16)
    kills = 0
    for attempt in range(4):
        proc = run_cli(scripted_server.url, tmp_path, ticks="forever")
        if attempt == 1:  # many notes at once, while the persona runs
            says = [say(tmp_path, f"note {i}") for i in range(SAYS)]
            for p in says:
                code, out, err = finish(p)
                assert code == 0, err[-1000:]
        time.sleep(rng.uniform(1.5, 6.0))  # a random moment: starting up, inside a tick, or between ticks
        proc.send_signal(signal.SIGKILL)
        code, out, err = finish(proc, guard_s=30)
        assert code == -signal.SIGKILL and "Traceback" not in err, err[-2000:]
        kills += 1
    code, out, err = finish(run_cli(scripted_server.url, tmp_path, ticks="3"))
    assert code == 0 and "done: 3 tick(s) this run" in err and "Traceback" not in err, err[-2000:]
    database = Database.open(tmp_path)
    try:
        with database.unit() as repos:
            human = [n.text for n in repos.notes.list(source=NoteSource.HUMAN_TERMINAL, limit=500)]
            assert sorted(human) == sorted(f"note {i}" for i in range(SAYS))  # none lost, none twice
            sent = repos.commands.recent(1_000)
            executed_sends = [c for c in sent if c.type == "messages.send" and c.status == "executed"]
            outgoing = [n for n in repos.notes.list(source="llm", limit=1_000) if n.text == "hello"]
            assert len(outgoing) == len(executed_sends) > 0  # each message stored once, by its one execution
            assert len({c.cmd_key for c in executed_sends}) == len(executed_sends)
            finished = [t for t in repos.ticks.recent(1_000) if t.finished_at is not None]
            assert all(t.status == "ok" for t in finished)  # no resume failed or was quarantined
    finally:
        database.close()
    assert kills == 4
