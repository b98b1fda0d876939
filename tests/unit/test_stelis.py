"""Stelis threads on fake LLMs and a real SQLite database: isolation, budget, chronicle, anchors, abort safety."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from langgraph.errors import GraphDrained
from langgraph.runtime import RunControl

from nodes.stelis.history import render_timeline
from nodes.stelis.threads import open_thread, write_chronicle
from tests.conftest import make_agent
from tests.fakes.llm import FakeLLM
from tests.fakes.managers import managers_over

ROOT = Path(__file__).resolve().parents[2]


def PLANS(prompt: str) -> dict:
    """Structured answers: the plan, or each sub-task's own questions."""
    if "Sub-task:" in prompt:
        task = prompt.split("Sub-task: ")[1].split("\n")[0]
        return {"questions": [f"why {task}?", f"how {task}?"]}
    return {"tasks": ["tides", "salt"]}


def scripted(prefix: str = "", fail_on: str | None = None, on_call=None):
    """Answers that say which step asked: `<examine 3>`; raises ValueError on prompts containing `fail_on`."""
    counter = {"n": 0}

    def answer(prompt: str) -> str:
        counter["n"] += 1
        if on_call:
            on_call(prompt)
        if fail_on and fail_on in prompt:
            raise ValueError("the tool broke")
        for marker, name in (
            ("Merge them", "merged-chronicle"),
            ("full log of a Stelis thread", "chronicle"),
            ("Check your answer", "check"),
            ("Question ", "examine"),
            ("State your conclusion", "conclude"),
            ("Above are your sub-task threads", "synthesize"),
        ):
            if marker in prompt:
                return f"<{prefix}{name} {counter['n']}>"
        return f"<{prefix}other {counter['n']}>"

    return answer


def kinds_and_nodes(repos, thread_id):
    return [(m.kind, (m.meta or {}).get("node")) for m in repos.messages.log(thread_id)]


def test_deep_work_children_are_isolated_budgeted_and_chronicled(agent_factory):
    fake = FakeLLM("fake", responses=scripted(), json_answer=PLANS)
    agent = agent_factory(fake, playbook="deep_work")
    events = [d for mode, d in agent.stream(inputs={"question": "Why is the sea salty?"}) if mode == "custom"]
    out = agent.outputs()
    with agent.services.db.unit() as repos:
        children = repos.threads.children("main")
        assert [c.label for c in children] == ["sub-task 1: tides", "sub-task 2: salt"]
        for child in children:
            assert (child.depth, child.window_ratio, child.status, child.origin) == (1, 0.8, "completed", "playbook")
            assert child.completed_at is not None and child.chronicle.startswith("<chronicle")
            assert kinds_and_nodes(repos, child.id) == [
                ("step", "ask_questions"),
                ("step", "examine"),
                ("step", "check"),
                ("step", "examine"),
                ("step", "check"),
                ("step", "conclude"),
            ]
            assert all(m.meta["window"] == int(8192 * 0.8) for m in repos.messages.log(child.id))
        # the parent's own log: the plan, one anchor per sub-task, the answer — nothing from inside
        assert kinds_and_nodes(repos, "main") == [
            ("step", "plan"),
            ("stelis_anchor", None),
            ("stelis_anchor", None),
            ("step", "synthesize"),
        ]
        first_child_log = [m.content for m in repos.messages.log(children[0].id)]
    synth_prompt = next(c["prompt"] for c in fake.calls if "Above are your sub-task threads" in c["prompt"])
    assert all(c.chronicle in synth_prompt for c in children)
    assert all(text in synth_prompt for text in first_child_log[-3:])  # the last 3 messages, in full
    assert not any(text in synth_prompt for text in first_child_log[:-3])  # …but not the rest of the child's log
    chronicle_prompt = next(c["prompt"] for c in fake.calls if "full log of a Stelis thread" in c["prompt"])
    assert all(text in chronicle_prompt for text in first_child_log)  # the chronicle read everything
    assert out["answer"].startswith("<synthesize") and [f["status"] for f in out["findings"]] == ["completed"] * 2
    enters = [e for e in events if e.get("event") == "stelis_enter"]
    assert [e["window_tokens"] for e in enters] == [int(8192 * 0.8)] * 2


def test_exception_inside_a_child_aborts_it_and_the_parent_carries_on(agent_factory):
    fake = FakeLLM("fake", responses=scripted(fail_on="Sub-task: tides\nQuestion 2"), json_answer=PLANS)
    agent = agent_factory(fake, playbook="deep_work")
    agent.run(inputs={"question": "Why is the sea salty?"})
    out = agent.outputs()
    assert [f["status"] for f in out["findings"]] == ["aborted", "completed"]
    assert out["answer"].startswith("<synthesize")
    with agent.services.db.unit() as repos:
        failed = repos.threads.children("main")[0]
        assert failed.status == "aborted" and "ValueError: the tool broke" in failed.error
        assert failed.chronicle.startswith("<chronicle")  # whatever it did is still chronicled
        assert kinds_and_nodes(repos, failed.id) == [("step", "ask_questions"), ("step", "examine"), ("step", "check")]
        parent_view = "\n".join(render_timeline(managers_over(repos).threads, "main"))
    # the model's failure reached the child as a classified one: no model answered
    assert (
        "— aborted]" in parent_view
        and "Aborted because: AllLLMsUnavailable: no LLM answered: error: fake: ValueError: the tool broke"
        in parent_view
    )


def test_interrupt_inside_a_child_aborts_it_and_the_parent_resumes(agent_factory):
    control = RunControl()

    def drain_on_examine(prompt: str) -> None:
        if "Sub-task: tides\nQuestion 1" in prompt:
            control.request_drain("test")

    fake = FakeLLM("fake", responses=scripted(on_call=drain_on_examine), json_answer=PLANS)
    agent = agent_factory(fake, playbook="deep_work", checkpointer="sqlite")
    with pytest.raises(GraphDrained):
        for _ in agent.stream(control, inputs={"question": "Why?"}):
            pass
    assert agent.interrupted
    with agent.services.db.unit() as repos:
        first = repos.threads.children("main")[0]
        assert first.status == "aborted" and first.error.startswith("interrupted")
        assert first.chronicle.startswith("<chronicle")
        examined = len(repos.messages.log(first.id))
    agent.run()  # resume: the parent carries on after the aborted child, which is not re-run
    out = agent.outputs()
    assert [f["status"] for f in out["findings"]] == ["aborted", "completed"] and out["answer"]
    with agent.services.db.unit() as repos:
        assert len(repos.messages.log(first.id)) == examined


KILLED_RUN = """
import os, signal, sys
sys.path[:0] = [{root!r}, {tests!r}]
from conftest import make_agent
from tests.fakes.llm import FakeLLM
from pathlib import Path

def answer(prompt):
    if "Question 1" in prompt:
        os.kill(os.getpid(), signal.SIGKILL)
    return "<step>"

fake = FakeLLM("fake", responses=answer, json_answer={{"tasks": ["tides"], "questions": ["why?"]}})
agent = make_agent(Path({data!r}), fake, playbook="deep_work", checkpointer="sqlite")
agent.run(inputs={{"question": "Why?", "max_tasks": 1}})
"""


def test_killed_process_inside_a_child_is_aborted_at_startup_and_the_run_resumes(tmp_path, agent_factory):
    script = KILLED_RUN.format(root=str(ROOT), tests=str(ROOT / "tests"), data=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    fake = FakeLLM("fake", responses=scripted(), json_answer=PLANS)
    agent = make_agent(tmp_path, fake, playbook="deep_work", checkpointer="sqlite")
    notices = [r.thread_id for r in agent.recovered]
    with agent.services.db.unit() as repos:
        child = repos.threads.children("main")[0]
        assert notices == [child.id]
        assert child.status == "aborted" and "stopped before it finished" in child.error
        assert child.chronicle.startswith("<chronicle") and repos.messages.anchor_for(child.id).thread_id == "main"
        warnings = [p.value for p in repos.processes.open("main")]
        assert any("was aborted" in w for w in warnings)  # the parent is told at its next tick
    assert agent.interrupted  # the run itself resumes…
    agent.run(inputs={"question": "Why?", "max_tasks": 1})
    out = agent.outputs()
    assert [f["status"] for f in out["findings"]] == ["aborted"] and out["answer"].startswith("<synthesize")
    with agent.services.db.unit() as repos:  # …and the dead child's steps were not run again
        assert kinds_and_nodes(repos, child.id) == [("step", "ask_questions")]
    agent.services.db.close()


def test_dynamic_nesting_beyond_max_depth_is_refused(tmp_path, agent_factory):
    playbook = tmp_path / "nest.yaml"
    playbook.write_text(
        textwrap.dedent("""\
        name: nest
        outputs: [stelis]
        start: inner
        nodes:
          - id: inner
            type: stelis_start
            label: inner
            max_depth: 2
            next: work
          - id: work
            type: set
            assign: {x: 1}
            next: close
          - id: close
            type: stelis_end
            next: END
        """)
    )
    fake = FakeLLM("fake", responses=scripted())
    probe = agent_factory(fake)
    services = probe.services
    with services.db.unit() as repos:
        level1, _, _ = open_thread(
            services,
            repos,
            parent_id="main",
            child_id="main/a",
            label="a",
            window_ratio=0.8,
            max_depth=3,
            origin="command",
        )
        open_thread(
            services,
            repos,
            parent_id=level1.id,
            child_id="main/a/b",
            label="b",
            window_ratio=0.8,
            max_depth=3,
            origin="command",
        )
    shallow = agent_factory(fake, playbook=str(playbook), thread_id="main/a")
    shallow.run()
    assert shallow.outputs()["stelis"]["status"] == "completed"  # depth 2: allowed
    deep = agent_factory(fake, playbook=str(playbook), thread_id="main/a/b")
    deep.run()
    result = deep.outputs()["stelis"]
    assert result["status"] == "refused" and "depth 3, over max_depth 2" in result["error"]


def test_chronicle_summarises_in_chunks_when_the_log_exceeds_the_window(agent_factory):
    fake = FakeLLM("fake", responses=scripted(), context_window=700)
    agent = agent_factory(fake, context_window=8192)  # threads get 8192; the summariser's own window is 700
    services = agent.services
    with services.db.unit() as repos:
        child, _, _ = open_thread(
            services,
            repos,
            parent_id="main",
            child_id="main/long",
            label="long",
            window_ratio=1.0,
            max_depth=3,
            origin="command",
        )
        for i in range(12):
            repos.messages.add(
                thread_id=child.id, kind="step", content=f"MARK{i:02d} " + "detail " * 60, meta={"node": "n"}
            )
    chronicle = write_chronicle(services, child.id)
    prompts = [c["prompt"] for c in fake.calls]
    first_level = [p for p in prompts if "full log of a Stelis thread" in p]
    assert len(first_level) > 1 and any("Merge them" in p for p in prompts)
    assert all(any(f"MARK{i:02d}" in p for p in first_level) for i in range(12))  # nothing truncated
    assert all(fake.count_tokens(p) < 700 for p in prompts)  # every call fits the summariser's window
    assert chronicle.startswith("<merged-chronicle")


def test_anchor_is_full_for_outsiders_one_line_inside_and_never_indexed(agent_factory):
    agent = agent_factory(FakeLLM("fake"))
    services = agent.services
    long_text = "A very long finding. " * 200
    with services.db.unit() as repos:
        repos.threads.ensure("main", origin="root")
        repos.messages.add(thread_id="main", kind="response", content="before the child")
        child, _, _ = open_thread(
            services,
            repos,
            parent_id="main",
            child_id="main/c",
            label="research",
            window_ratio=0.8,
            max_depth=3,
            origin="command",
        )
        for i in range(5):
            repos.messages.add(thread_id=child.id, kind="step", content=f"child message {i}", meta={"node": "n"})
        repos.messages.add(thread_id=child.id, kind="step", content=long_text, meta={"node": "n"})
        grandchild, _, _ = open_thread(
            services,
            repos,
            parent_id=child.id,
            child_id="main/c/g",
            label="detail",
            window_ratio=0.8,
            max_depth=3,
            origin="command",
        )
        repos.messages.add(thread_id=grandchild.id, kind="step", content="grandchild work", meta={"node": "n"})
        repos.messages.add(thread_id="main", kind="response", content="after the child")
        parent_view = render_timeline(managers_over(repos).threads, "main")
        child_view = render_timeline(managers_over(repos).threads, child.id)
        grandchild_view = render_timeline(managers_over(repos).threads, grandchild.id)
        indexable = [m.kind for m in repos.messages.indexable()]
    anchor = parent_view[1]
    assert (
        anchor.startswith('[Stelis thread "research" (main/c) — running]') and "still running, 7 message(s)" in anchor
    )
    assert long_text.strip() in anchor and "child message 4" in anchor and "child message 3" not in anchor
    assert '[Stelis thread "detail" (main/c/g) — running]' in anchor  # nested anchors stay one line
    assert child_view[:2] == [
        "[tick 0] before the child",
        '[Stelis thread "research" started (main/c) — you are inside it]',
    ]
    assert "after the child" not in "\n".join(child_view)  # the parent's later messages are not the child's past
    assert grandchild_view[1] == '[Stelis thread "research" started (main/c)]'
    assert grandchild_view[-2:] == [
        '[Stelis thread "detail" started (main/c/g) — you are inside it]',
        "[n] grandchild work",
    ]
    assert "stelis_anchor" not in indexable and indexable.count("step") == 7


COMMANDS = '# Commands:\n[{{"cmd_id": "c1", "type": "{type}", "args": {args}}}]\n# End commands'


def test_stelis_commands_move_the_repl_into_a_child_and_back(agent_factory):
    replies = iter(
        [
            "I will research tides alone.\n" + COMMANDS.format(type="stelis.start", args='{"label": "tides"}'),
            "Inside: the moon pulls the sea.",
            "Done with tides.\n" + COMMANDS.format(type="stelis.end", args="{}"),
            "Back with my human.",
        ]
    )

    def answer(prompt):
        return "<chronicle: the moon>" if "full log of a Stelis thread" in prompt else next(replies)

    fake = FakeLLM("fake", responses=answer)
    agent = agent_factory(fake)
    first = agent.tick()
    assert first["executed"][0]["status"] == "executed"
    second = agent.tick()
    child_id = second["thread_id"]
    assert child_id.startswith("main/tides-") and second["context_report"]["window_tokens"] == int(8192 * 0.8)
    child_think = [c["prompt"] for c in fake.calls if c["json_schema"] is None][-1]
    assert "entered Stelis thread" in child_think  # the child's first tick sees the command result
    third = agent.tick()
    assert third["thread_id"] == child_id and third["executed"][0]["status"] == "executed"
    fourth = agent.tick()
    assert fourth["thread_id"] == "main"
    think = [
        c["prompt"] for c in fake.calls if c["json_schema"] is None and "full log of a Stelis thread" not in c["prompt"]
    ][-1]
    assert "<chronicle: the moon>" in think and "Inside: the moon pulls the sea." in think
    with agent.services.db.unit() as repos:
        child = repos.threads.get(child_id)
        assert child.status == "completed" and child.origin == "command"
        assert [m.content for m in repos.messages.log(child_id, kinds=("response",))] == [
            "Inside: the moon pulls the sea.",
            "Done with tides.",
        ]
        anchor = repos.messages.anchor_for(child_id)
        remembered = repos.items.indexed()
    # the child's own thoughts are memories; the anchor (and its rendered chronicle) never is
    assert anchor is not None and f"msg:{anchor.id}" not in {i.ref for i in remembered}
    assert "Inside: the moon pulls the sea." in {i.text for i in remembered}
    assert not any("<chronicle" in i.text or "Stelis thread" in i.text for i in remembered)
    hits = agent.services.memory.search("chronicle Stelis thread tides", k=20)
    assert hits and not any("<chronicle" in h.item.text for h in hits)


def test_stelis_start_refused_beyond_max_depth(agent_factory):
    starts = iter(range(10))

    def answer(prompt):
        n = next(starts)
        return f"deeper {n}\n" + COMMANDS.format(type="stelis.start", args=f'{{"label": "level {n}"}}')

    agent = agent_factory(FakeLLM("fake", responses=answer))
    results = [agent.tick()["executed"][0] for _ in range(4)]
    assert [r["status"] for r in results] == ["executed", "executed", "executed", "failed"]
    assert "depth 4, over max_depth 3" in results[3]["result"]
    with agent.services.db.unit() as repos:
        assert max(t.depth for t in repos.threads.all()) == 3


def test_child_owned_by_a_live_process_is_not_taken_over(agent_factory):
    agent = agent_factory(FakeLLM("fake"))
    services = agent.services
    with services.db.unit() as repos:
        child, _, _ = open_thread(
            services,
            repos,
            parent_id="main",
            child_id="main/x",
            label="x",
            window_ratio=0.8,
            max_depth=3,
            origin="command",
        )
        child.owner = f"{os.uname().nodename}:1:?"  # pid 1 is alive
    from nodes.stelis.threads import recover_orphans

    assert recover_orphans(services) == []
    with services.db.unit() as repos:
        assert repos.threads.get("main/x").status == "running"
