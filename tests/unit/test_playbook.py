import json

import pytest

from graph.compiler import build_graph
from graph.playbook import PlaybookError, load_playbook, parse_playbook, playbook_json_schema, shipped_playbooks_dir

GOOD = """name: t
start: a
nodes:
  - id: a
    type: update_process_log
    next: b
  - id: b
    type: execute_commands
    next: END
"""


STELIS = """name: t
inputs:
  topic: {type: string, required: true}
outputs: [answer]
start: plan
nodes:
  - id: plan
    type: llm
    prompt: "Plan {{ topic }}"
    output: plan
    next: work
  - id: work
    type: stelis_start
    label: "work on {{ topic }}"
    next: step
  - id: step
    type: llm
    prompt: "{{ history }} step"
    output: result
    next: done
  - id: done
    type: stelis_end
    next: answer
  - id: answer
    type: llm
    prompt: "Answer {{ topic }}"
    output: answer
    next: END
"""

NESTED = STELIS.replace(
    """    output: result
    next: done""",
    """    output: result
    next: inner
  - id: inner
    type: stelis_start
    label: inner
    max_depth: 1
    next: deep
  - id: deep
    type: set
    assign: {x: 1}
    next: inner_done
  - id: inner_done
    type: stelis_end
    next: done""",
)


@pytest.mark.parametrize("name", ["repl", "epos"])
def test_shipped_playbooks_load_and_compile(name):
    pb = load_playbook(shipped_playbooks_dir() / f"{name}.yaml")
    graph = build_graph(pb).compile()
    nodes = set(graph.get_graph().nodes)
    assert {
        "update_process_log",
        "prepare_context",
        "call_llm",
        "extract_commands",
        "evaluate_emotion",
        "check_stagnation",
        "validate_output",
        "write_memory",
        "execute_commands",
    } <= nodes


@pytest.mark.parametrize(
    "name, region, inner", [("deep_work", "investigate", "examine"), ("novel", "write_novel", "write_chapter")]
)
def test_stelis_regions_compile_to_subgraphs_in_the_drawing(name, region, inner):
    graph = build_graph(load_playbook(shipped_playbooks_dir() / f"{name}.yaml")).compile()
    flat = set(graph.get_graph().nodes)
    assert region in flat and inner not in flat  # the parent sees one node per Stelis thread
    mermaid = graph.get_graph(xray=True).draw_mermaid()
    assert f"subgraph {region}" in mermaid and f"{region}\\3a{inner}({inner})" in mermaid


def test_subplaybook_compiles_the_callee_as_a_subgraph(tmp_path):
    (tmp_path / "caller.yaml").write_text("""name: caller
outputs: [answer]
start: call
nodes:
  - id: call
    type: subplaybook
    playbook: deep_work
    inputs: {question: "'why?'", max_tasks: 1}
    outputs: {answer: answer}
    next: END
""")
    pb = load_playbook(tmp_path / "caller.yaml")
    assert pb.subplaybooks["call"].name == "deep_work"
    mermaid = build_graph(pb).compile().get_graph(xray=True).draw_mermaid()
    assert "subgraph call" in mermaid and "investigate" in mermaid


@pytest.mark.parametrize(
    "text, expected",
    [
        (GOOD.replace("next: b", "next: bb"), "t.yaml:6 nodes[0].next: unknown node 'bb'"),
        (GOOD.replace("type: execute_commands", "type: nope"), "t.yaml:8 nodes[1].type: unknown step type 'nope'"),
        (GOOD.replace("start: a", "start: z"), "t.yaml:2 start: unknown node 'z'"),
        (GOOD.replace("name: t\n", ""), "t.yaml:1 name: Field required"),
        (
            GOOD.replace("    next: END\n", "    next: END\n    colour: red\n"),
            "t.yaml:10 nodes[1].colour: Extra inputs are not permitted",
        ),
        (GOOD.replace("next: b", "next: END"), "t.yaml:7 nodes[1].id: node 'b' is unreachable from start 'a'"),
        (GOOD.replace("  - id: b", "  - id: a"), "t.yaml:7 nodes[1].id: duplicate node id 'a'"),
        ("name: t\nstart: a\nnodes: [\n", "t.yaml:4 (yaml)"),
        ("- just\n- a list\n", "t.yaml:1 (top level): expected a mapping"),
        (
            GOOD.replace(
                "    next: b\n",
                "    conditional_next:\n      field: tick\n      operator: gt\n      cases: {'3': q}\n      default: b\n",  # noqa: E501
            ),
            "t.yaml:9 nodes[0].conditional_next.cases.3: unknown node 'q'",
        ),
        (
            GOOD.replace(
                "    next: b\n",
                "    conditional_next:\n      field: tick\n      operator: approx\n      cases: {'3': b}\n",
            ),
            "t.yaml:8 nodes[0].conditional_next.operator: Input should be",
        ),
        (GOOD.replace("    next: b\n", ""), "t.yaml:4 nodes[0]: node 'a' has neither next nor conditional_next"),
        (STELIS.replace("    output: plan\n", ""), "t.yaml:7 nodes[0].output: Field required"),
        (STELIS.replace("output: plan", "output: 2plan"), "t.yaml:10 nodes[0].output: String should match pattern"),
        (STELIS.replace("output: plan", "output: tick"), "t.yaml:10 nodes[0].output: 'tick' is reserved"),
        (
            STELIS.replace('prompt: "Plan {{ topic }}"', 'prompt: "Plan {{ topic"'),
            "t.yaml:9 nodes[0].prompt: bad template: unexpected end",
        ),
        (
            STELIS.replace(
                "    output: plan\n    next: work",
                "    output: plan\n    next: set_i\n  - id: set_i\n    type: set\n"
                "    assign: {i: 'i +'}\n    next: work",
            ),
            "t.yaml:14 nodes[1].assign.i: bad expression",
        ),
        (
            STELIS.replace(
                '    label: "work on {{ topic }}"\n', '    label: "work on {{ topic }}"\n    window_ratio: 1.5\n'
            ),
            "t.yaml:15 nodes[1].window_ratio: Input should be less than or equal to 1",
        ),
        (
            STELIS.replace("    output: result\n    next: done", "    output: result\n    next: answer"),
            "t.yaml:15 nodes[1].next: stelis_start 'work' never reaches a stelis_end",
        ),
        (
            STELIS.replace("    output: result\n    next: done", "    output: result\n    next: END"),
            "t.yaml:12 nodes[1].id: Stelis thread 'work' can reach END without passing a stelis_end",
        ),
        (
            STELIS.replace("    output: plan\n    next: work", "    output: plan\n    next: done"),
            "t.yaml:22 nodes[3].type: stelis_end 'done' is reached without a stelis_start before it",
        ),
        (
            STELIS.replace(
                "    output: result\n    next: done",
                "    output: result\n    conditional_next:\n      field: result\n"
                "      cases: {'x': answer}\n      default: done",
            ),
            "t.yaml:27 nodes[4].id: node 'answer' is reached both in Stelis thread 'work' and in (top level): an edge crosses",  # noqa: E501
        ),
        (
            STELIS.replace(
                "    output: result\n    next: done",
                "    output: result\n    conditional_next:\n      field: result\n"
                "      cases: {'x': done2}\n      default: done\n  - id: done2\n    type: stelis_end\n    next: answer",
            ),
            "t.yaml:15 nodes[1].next: stelis_start 'work' reaches several stelis_end nodes ('done2', 'done')",
        ),
        (
            STELIS.replace(
                '    label: "work on {{ topic }}"\n    next: step',
                '    label: "work on {{ topic }}"\n    conditional_next: {field: x, cases: {"1": step}}',
            ),
            "t.yaml:15 nodes[1].conditional_next: a stelis_start continues with `next`",
        ),
        (NESTED, "t.yaml:24 nodes[3].max_depth: Stelis thread 'inner' is nested 2 deep, over its max_depth 1"),
        (STELIS.replace("outputs: [answer]", "outputs: [answr]"), "t.yaml:4 outputs[0]: output 'answr' is never set"),
        (
            STELIS.replace("type: string, required: true", "type: text, required: true"),
            "t.yaml:3 inputs.topic.type: Input should be",
        ),
        (
            STELIS.replace("type: string, required: true", "type: string, required: true, default: x"),
            "t.yaml:3 inputs.topic.default: a required input takes no default",
        ),
        (
            STELIS.replace("    type: stelis_end\n", "    type: stelis_end\n    generate_chronicle: sometimes\n"),
            "t.yaml:23 nodes[3].generate_chronicle: Input should be a valid boolean",
        ),
        (
            STELIS.replace(
                "    output: plan\n    next: work",
                "    output: plan\n    next: call\n  - id: call\n    type: subplaybook\n"
                "    playbook: nope\n    next: work",
            ),
            "t.yaml:14 nodes[1].playbook: no playbook 'nope'",
        ),
        (
            STELIS.replace(
                "    output: plan\n    next: work",
                "    output: plan\n    next: call\n  - id: call\n    type: subplaybook\n"
                "    playbook: deep_work\n    next: work",
            ),
            "t.yaml:12 nodes[1].inputs: 'deep_work' needs input 'question'",
        ),
        (
            STELIS.replace(
                "    output: plan\n    next: work",
                "    output: plan\n    next: call\n  - id: call\n    type: subplaybook\n"
                "    playbook: deep_work\n    inputs: {question: q, colour: red}\n    next: work",
            ),
            "t.yaml:15 nodes[1].inputs.colour: 'deep_work' has no input 'colour'",
        ),
    ],
)
def test_malformed_playbooks_name_file_line_and_field(text, expected):
    with pytest.raises(PlaybookError) as info:
        parse_playbook(text, "dir/t.yaml")
    assert any(issue.startswith(expected) for issue in info.value.issues), info.value.issues


def test_subplaybook_cycle_is_an_error(tmp_path):
    (tmp_path / "a.yaml").write_text(
        "name: a\nstart: call\nnodes:\n  - id: call\n    type: subplaybook\n    playbook: b.yaml\n    next: END\n"
    )
    (tmp_path / "b.yaml").write_text(
        "name: b\nstart: call\nnodes:\n  - id: call\n    type: subplaybook\n    playbook: a.yaml\n    next: END\n"
    )
    with pytest.raises(PlaybookError) as info:
        load_playbook(tmp_path / "a.yaml")
    assert info.value.issues[0].startswith(
        "a.yaml:6 nodes[0].playbook: subplaybook 'b.yaml' is invalid: "
        "b.yaml:6 nodes[0].playbook: subplaybook cycle: a → b → a"
    )


def test_playbook_check_cli_exit_code_and_messages(tmp_path):
    import subprocess
    import sys

    bad = tmp_path / "deep_work.yaml"
    bad.write_text(
        STELIS.replace(
            "    output: result\n    next: done",
            "    output: result\n    conditional_next:\n"
            "      field: result\n      cases: {done: finish}\n      default: done",
        )
    )
    root = shipped_playbooks_dir().parent
    run = subprocess.run(
        [
            sys.executable,
            "run.py",
            "playbook",
            "check",
            str(bad),
            *map(str, sorted(shipped_playbooks_dir().glob("*.yaml"))),
        ],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1
    assert "deep_work.yaml:22 nodes[2].conditional_next.cases.done: unknown node 'finish'" in run.stderr
    assert all(f"{p}: ok" in run.stdout for p in sorted(shipped_playbooks_dir().glob("*.yaml")))


def test_conditional_next_routes_on_state():
    text = GOOD.replace(
        "    next: b\n",
        "    conditional_next:\n      field: novelty.flag\n      cases: {'true': b}\n      default: END\n",
    )
    from graph.compiler import make_router

    pb = parse_playbook(text, "t.yaml")
    route = make_router(pb.nodes[0].conditional_next)
    assert route({"novelty": {"flag": True}}) == "b"
    assert route({"novelty": {"flag": False}}) == "END"


def test_conditional_next_routes_on_variables_with_every_operator():
    from graph.compiler import make_router
    from graph.playbook import ConditionalNext

    state = {"vars": {"count": 3, "plan": {"done": True, "kind": "b"}}, "tick": 9}
    assert make_router(ConditionalNext(field="count", operator="gte", cases={"3": "x"}))(state) == "x"
    assert make_router(ConditionalNext(field="count", operator="lt", cases={"3": "x"}, default="y"))(state) == "y"
    assert make_router(ConditionalNext(field="plan.done", cases={"true": "x"}))(state) == "x"
    assert make_router(ConditionalNext(field="plan.kind", operator="in", cases={"a, b": "x"}))(state) == "x"
    assert make_router(ConditionalNext(field="plan.kind", operator="ne", cases={"b": "x"}, default="z"))(state) == "z"
    assert make_router(ConditionalNext(field="tick", operator="gt", cases={"8": "x"}))(state) == "x"  # a state field
    assert make_router(ConditionalNext(field="missing", operator="gt", cases={"2": "x"}, default="z"))(state) == "z"


def test_json_schema_describes_nodes():
    schema = json.loads(playbook_json_schema())
    defs = schema["$defs"]
    assert {"LLMNode", "SetNode", "SubplaybookNode", "StelisStartNode", "StelisEndNode", "StepNode"} <= set(defs)
    assert defs["StelisStartNode"]["properties"]["window_ratio"]["default"] == 0.8
    assert "prepare_context" in defs["StepNode"]["properties"]["type"]["enum"]
    assert "schema" in defs["LLMNode"]["properties"]  # the YAML key, not the Python attribute
