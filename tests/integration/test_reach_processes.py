"""Scripts and processes through ticks, with real subprocesses: a script is data until it runs; running it needs
consent; it runs in a sandbox (a bubblewrap jail, working dir inside the data dir, no inherited secrets, no network
unless the operator allows it for that script, time/memory limits, output cut to a budget) on a background thread;
its completion fills and then closes its process_log row, and wakes an idle loop. Without a working bwrap scripts
do not run, and the model and the human read why."""

from __future__ import annotations

import json
import socket

import pytest

from graph.loop.driver import run_loop
from nodes.context import utcnow
from reach import sandbox
from tests.fakes.llm import FakeLLM
from tests.fakes.managers import answer

needs_jail = pytest.mark.skipif(
    sandbox.jail_problem() is not None, reason=f"scripts need a working bubblewrap: {sandbox.jail_problem()}"
)

SCRIPTS_ON = {"enabled": True, "timeout_s": 20, "output_chars": 600}
PROBE = (
    "import os, sys\nprint('cwd', os.getcwd())\nprint('env', ','.join(sorted(os.environ)))\n"
    "print('args', sys.argv[1:])\nopen('made.txt', 'w').write('x')\n"
)


def block(*commands: tuple[str, dict]) -> str:
    items = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return "A script will help.\n# Commands:\n" + json.dumps(items) + "\n# End commands"


def think_prompts(fake: FakeLLM) -> list[str]:
    return [c["prompt"] for c in fake.calls if c["json_schema"] is None]


def process_rows(agent, prefix: str = "process:"):
    with agent.services.db.unit() as repos:
        return [r for r in repos.processes.recent(100) if r.name.startswith(prefix)]


@needs_jail
def test_a_script_is_data_until_an_approved_run_in_the_sandbox(agent_factory, tmp_path, monkeypatch):
    monkeypatch.setenv("ANIMA_TEST_SECRET", "hunter2")
    fake = FakeLLM(
        "fake",
        responses=[
            block(
                ("scripts.add", {"name": "probe", "code": PROBE, "description": "looks around"}),
                ("process.start", {"script": "probe", "args": ["tide", "moon"]}),
            ),
            "Waiting for my human.",
            "The script ran.",
            "Done with it.",
        ],
    )
    agent = agent_factory(fake, scripts=SCRIPTS_ON)
    state = agent.tick()
    assert [e["status"] for e in state["executed"]] == ["executed", "pending_approval"]
    with agent.services.db.unit() as repos:
        assert repos.scripts.get("probe").code == PROBE and repos.runs.recent() == []
        approval = repos.approvals.pending()[0]
    assert not (tmp_path / "sandbox").exists()  # nothing ran
    answer(agent.services.db, approval.id, approve=True, by="human", now=utcnow())
    agent.tick()
    assert agent.services.background().wait_idle(60)
    [row] = process_rows(agent)
    workdir = tmp_path.resolve() / "sandbox" / "run-1"
    assert row.status == "ok" and row.value.startswith("script probe finished after ")
    assert "cwd /sandbox" in row.value and "args ['tide', 'moon']" in row.value  # the jail's name for workdir
    assert "(it had no network: the operator allows it per script, scripts.network)" in row.value
    env = row.value.split("env ", 1)[1].splitlines()[0].split(",")
    assert "ANIMA_TEST_SECRET" not in env and not any("KEY" in name or "TOKEN" in name for name in env)
    assert (workdir / "made.txt").read_text() == "x"
    assert [(s["origin"], s["ref"]) for s in row.sources] == [("script", "script probe (run 1)")]
    state = agent.tick()
    fenced = think_prompts(fake)[-1].split('from="results of my commands">', 1)[1].split("</data", 1)[0]
    assert f"[process {row.id} process:probe: ok] script probe finished" in fenced
    assert [s["origin"] for s in state["untrusted"]] == ["script"]  # its output is untrusted in that tick
    agent.tick()
    with agent.services.db.unit() as repos:
        assert repos.processes.get(row.id).status == "close"  # seen, then closed
        assert repos.scripts.get("probe").runs == 1


@needs_jail
def test_time_and_memory_limits_and_the_output_budget(agent_factory):
    scripts = {
        "forever": "import time\nwhile True:\n    time.sleep(0.05)\n",
        "hungry": "block = bytearray(400 * 1024 * 1024)\nprint('got it')\n",
        "chatty": "for i in range(20000):\n    print('line', i)\n",
    }
    adds = [("scripts.add", {"name": n, "code": c}) for n, c in scripts.items()]
    starts = [
        ("process.start", {"script": "forever", "timeout_s": 2}),
        ("process.start", {"script": "hungry", "memory_mb": 128}),
        ("process.start", {"script": "chatty"}),
    ]
    fake = FakeLLM("fake", responses=[block(*adds, *starts), "Thinking."])
    agent = agent_factory(fake, scripts={**SCRIPTS_ON, "max_running": 3}, consent={"auto_approve": ["process.start"]})
    agent.tick()
    assert agent.services.background().wait_idle(60)
    rows = {r.name: r for r in process_rows(agent)}
    assert rows["process:forever"].status == "timeout"
    assert "was stopped at its time limit of 2 s" in rows["process:forever"].value
    assert rows["process:hungry"].status == "error" and "MemoryError" in rows["process:hungry"].value
    chatty = rows["process:chatty"]
    assert chatty.status == "ok" and "line 0" in chatty.value and "line 19999" in chatty.value
    assert "bytes of output cut" in chatty.value and len(chatty.value) < 900


@needs_jail
def test_stop_mark_cleanup_and_scripts_off(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            block(
                ("scripts.add", {"name": "slow", "code": "import time\ntime.sleep(30)\n"}),
                ("process.start", {"script": "slow"}),
            ),
            block(("process.stop", {"id": 1})),
            block(("process.mark", {"id": 1}), ("process.cleanup", {"days": 0})),
            block(("process.list", {"all": True})),
        ],
    )
    agent = agent_factory(fake, scripts=SCRIPTS_ON, consent={"auto_approve": ["process.start"]})
    agent.tick()
    agent.tick()
    assert agent.services.background().wait_idle(30)
    with agent.services.db.unit() as repos:
        assert repos.processes.get(1).status == "warning" and "was stopped" in repos.processes.get(1).value
    state = agent.tick()
    marked, cleaned = [e["result"] for e in state["executed"]]
    assert marked == "process 1 marked close" and cleaned.endswith("closed process(es) older than 0 days forgotten")
    with agent.services.db.unit() as repos:
        assert repos.processes.get(1) is None and repos.runs.of_process(1) is None

    off = FakeLLM("fake", responses=[block(("process.start", {"script": "slow"}))])
    [done] = agent_factory(off, scripts={"enabled": False}).tick()["executed"]
    assert done["status"] == "refused" and "scripts are off" in done["result"]
    assert "— OFF: process.start: scripts are off" in think_prompts(off)[0]  # the other process verbs run


@needs_jail
def test_an_idle_loop_wakes_when_its_script_finishes(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            block(
                ("scripts.add", {"name": "nap", "code": "import time\ntime.sleep(1.5)\nprint('rested')\n"}),
                ("process.start", {"script": "nap"}),
                ("cycle.idle", {"on": True, "wake_on_note": False}),
            ),
            "Awake again.",
        ],
    )
    agent = agent_factory(fake, scripts=SCRIPTS_ON, consent={"auto_approve": ["process.start"]})
    result = run_loop(agent, ticks=2, idle_poll_s=0.1)
    assert result.ticks_run == 2
    with agent.services.db.unit() as repos:
        woke = [r.value for r in repos.processes.recent(50) if r.name == "cycle.idle"]
    assert woke == ["woke from idle: process 1 process:nap finished (ok)"]


@needs_jail
def test_at_start_up_a_recorded_job_starts_and_a_lost_one_is_offline(agent_factory):
    agent = agent_factory(FakeLLM("fake"), scripts=SCRIPTS_ON)
    with agent.services.db.unit() as repos:
        repos.scripts.save("hello", "python", "print('hello')", "")
        waiting = repos.processes.add("process:hello", "waits", status="pending", thread_id="main", tags=["background"])
        repos.runs.add(
            waiting.id,
            "script",
            thread_id="main",
            spec={"script": "hello", "args": [], "timeout_s": 10, "memory_mb": 256, "output_chars": 500},
        )
        lost = repos.processes.add(
            "process:hello", "running", status="in_progress", thread_id="main", tags=["background"]
        )
        run = repos.runs.add(lost.id, "script", thread_id="main", spec={})
        repos.runs.started(run.id, pid=None, owner="nohost:999999:0", workdir=None, now=utcnow())
    assert agent.services.background().recover() == {"started": 1, "offline": 0}  # another host: not ours to judge
    assert agent.services.background().wait_idle(30)
    with agent.services.db.unit() as repos:
        assert repos.processes.get(waiting.id).status == "ok"
        repos.runs.get(run.id).owner = f"{__import__('socket').gethostname()}:999999:0"
    assert agent.services.background().recover() == {"started": 0, "offline": 1}
    with agent.services.db.unit() as repos:
        assert repos.processes.get(lost.id).status == "offline"


CONNECT = (
    "import socket, sys\ntry:\n    socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5).close()\n"
    "    print('CONNECTED')\nexcept OSError as exc:\n    print('NO CONNECTION', exc)\n"
)


@needs_jail
def test_the_network_is_the_operators_to_give_per_script(agent_factory):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        port = str(server.getsockname()[1])
        fake = FakeLLM(
            "fake",
            responses=[
                block(
                    ("scripts.add", {"name": "fetch", "code": CONNECT}),
                    ("scripts.add", {"name": "sneak", "code": CONNECT}),
                    ("process.start", {"script": "fetch", "args": [port]}),
                    ("process.start", {"script": "sneak", "args": [port]}),
                ),
                "Waiting.",
            ],
        )
        agent = agent_factory(
            fake, scripts={**SCRIPTS_ON, "network": ["fetch"]}, consent={"auto_approve": ["process.start"]}
        )
        state = agent.tick()
        started = [e["result"] for e in state["executed"] if e["result"].startswith("process ")]
        assert any("script fetch" in r and "with network" in r for r in started)
        assert any("script sneak" in r and "no network" in r for r in started)
        assert agent.services.background().wait_idle(60)
    rows = {r.name: r.value for r in process_rows(agent)}
    assert "CONNECTED" in rows["process:fetch"] and "no network" not in rows["process:fetch"]
    assert "NO CONNECTION" in rows["process:sneak"] and "CONNECTED" not in rows["process:sneak"]
    assert "(it had no network: the operator allows it per script, scripts.network)" in rows["process:sneak"]


def test_without_bubblewrap_scripts_do_not_run_and_say_why(agent_factory, tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "BWRAP", str(tmp_path / "no-such-bwrap"))
    fake = FakeLLM(
        "fake",
        responses=[
            block(("scripts.add", {"name": "hello", "code": "print('hello')"}), ("process.start", {"script": "hello"}))
        ],
    )
    agent = agent_factory(fake, scripts=SCRIPTS_ON, consent={"auto_approve": ["process.start"]})
    added, refused = agent.tick()["executed"]
    assert added["status"] == "executed"
    assert refused["status"] == "refused" and "scripts need bubblewrap: apt-get install bubblewrap" in refused["result"]
    assert "— OFF: process.start: scripts need bubblewrap: apt-get install bubblewrap" in think_prompts(fake)[0]
    with agent.services.db.unit() as repos:  # a job recorded before (another process, another machine) fails closed
        waiting = repos.processes.add("process:hello", "waits", status="pending", thread_id="main", tags=["background"])
        repos.runs.add(
            waiting.id,
            "script",
            thread_id="main",
            spec={"script": "hello", "args": [], "timeout_s": 10, "memory_mb": 256, "output_chars": 500},
        )
    agent.services.background().recover()
    assert agent.services.background().wait_idle(30)
    with agent.services.db.unit() as repos:
        row = repos.processes.get(waiting.id)
        assert row.status == "error" and row.value.startswith("script hello did not run: scripts need bubblewrap")
    assert not (tmp_path / "sandbox").exists()
