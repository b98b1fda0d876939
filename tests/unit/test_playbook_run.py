"""Playbook language at run time on fake LLMs: variables, set arithmetic, loops, llm nodes, subplaybooks, inputs."""

from __future__ import annotations

import textwrap

import pytest

from graph.playbook import InputError
from nodes.kinds.assign_vars import AssignmentError
from tests.fakes.llm import FakeLLM


def write(tmp_path, name, text):
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_set_arithmetic_loop_and_llm_outputs(tmp_path, agent_factory):
    playbook = write(
        tmp_path,
        "count",
        """\
        name: count
        inputs:
          n: {type: integer, default: 3}
        outputs: [total, lines, verdict]
        start: init
        nodes:
          - id: init
            type: set
            assign: {i: 0, total: 0, lines: []}
            next: speak
          - id: speak
            type: llm
            prompt: "Say line {{ i + 1 }} of {{ n }}."
            output: line
            next: step
          - id: step
            type: set
            assign:
              i: "i + 1"
              total: "total + i * 10"
              lines: "lines + [line]"
            conditional_next:
              field: i
              operator: lt
              cases: {"3": speak}
              default: judge
          - id: judge
            type: llm
            prompt: "Judge {{ lines | length }} lines."
            schema: {type: object, properties: {ok: {type: boolean}}, required: [ok]}
            output: verdict
            next: END
        """,
    )
    fake = FakeLLM("fake", responses=lambda p: f"line for <{p}>", json_answer={"ok": True})
    agent = agent_factory(fake, playbook=playbook)
    agent.run(inputs={"n": "3"})  # strings from the command line are converted to the declared type
    out = agent.outputs()
    assert out["total"] == 10 + 20 + 30 and out["verdict"] == {"ok": True}
    assert out["lines"] == [f"line for <Say line {k} of 3.>" for k in (1, 2, 3)]
    with agent.services.db.unit() as repos:
        steps = repos.messages.log("main", kinds=("step",))
        assert [m.meta["node"] for m in steps] == ["speak", "speak", "speak", "judge"]
        assert steps[-1].content == '{"ok": true}'


def test_subplaybook_gets_inputs_returns_outputs_and_shares_the_thread(tmp_path, agent_factory):
    write(
        tmp_path,
        "callee",
        """\
        name: callee
        inputs:
          topic: {type: string, required: true}
          times: {type: integer, default: 1}
        outputs: [summary]
        start: sum
        nodes:
          - id: sum
            type: llm
            prompt: "Summarise {{ topic }} x{{ times }}"
            output: summary
            next: END
        """,
    )
    caller = write(
        tmp_path,
        "caller",
        """\
        name: caller
        outputs: [result, secret]
        start: prep
        nodes:
          - id: prep
            type: set
            assign: {subject: "'tides'", secret: 42}
            next: call
          - id: call
            type: subplaybook
            playbook: callee.yaml
            inputs: {topic: "subject ~ '!'", times: 2}
            outputs: {result: summary}
            next: END
        """,
    )
    fake = FakeLLM("fake", responses=lambda p: f"[{p}]")
    agent = agent_factory(fake, playbook=caller)
    agent.run()
    assert agent.outputs() == {"result": "[Summarise tides! x2]", "secret": 42}
    with agent.services.db.unit() as repos:
        assert [(m.meta["node"], m.meta["playbook"]) for m in repos.messages.log("main")] == [("sum", "callee")]


def test_bad_inputs_and_failing_expressions_say_what_and_where(tmp_path, agent_factory):
    playbook = write(
        tmp_path,
        "bad",
        """\
        name: bad
        inputs:
          n: {type: integer, required: true}
        start: oops
        nodes:
          - id: oops
            type: set
            assign: {x: "missing + 1"}
            next: END
        """,
    )
    agent = agent_factory(FakeLLM("fake"), playbook=playbook)
    with pytest.raises(InputError, match="needs input 'n'"):
        agent.run(inputs={})
    with pytest.raises(InputError, match="input 'n' must be integer, got 'three'"):
        agent.run(inputs={"n": "three"})
    with pytest.raises(InputError, match="has no input 'm'"):
        agent.run(inputs={"n": 1, "m": 2})
    with pytest.raises(AssignmentError, match=r"set node 'oops': assign.x = 'missing \+ 1': 'missing' is undefined"):
        agent.run(inputs={"n": 1})


def test_each_one_shot_run_starts_fresh_and_a_failed_run_resumes(tmp_path, agent_factory):
    playbook = write(
        tmp_path,
        "once",
        """\
        name: once
        inputs:
          q: {type: string, required: true}
        outputs: [a, b]
        start: a
        nodes:
          - id: a
            type: llm
            prompt: "A {{ q }}"
            output: a
            next: b
          - id: b
            type: llm
            prompt: "B {{ q }}"
            output: b
            next: END
        """,
    )
    calls = {"n": 0, "fail": True}

    def answer(prompt):
        calls["n"] += 1
        if prompt.startswith("B") and calls["fail"]:
            calls["fail"] = False
            raise RuntimeError("server hiccup")
        return prompt.lower()

    agent = agent_factory(FakeLLM("fake", responses=answer), playbook=playbook, checkpointer="sqlite")
    with pytest.raises(RuntimeError, match="server hiccup"):
        agent.run(inputs={"q": "x"})
    agent.run(inputs={"q": "x"})  # same inputs: resumes at b, `a` is not asked again
    assert agent.outputs() == {"a": "a x", "b": "b x"} and calls["n"] == 3
    first_run = agent.run_id
    agent.run(inputs={"q": "y"})
    assert agent.outputs() == {"a": "a y", "b": "b y"} and agent.run_id != first_run
