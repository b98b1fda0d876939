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


@pytest.mark.parametrize("name", ["repl", "epos"])
def test_shipped_playbooks_load_and_compile(name):
    pb = load_playbook(shipped_playbooks_dir() / f"{name}.yaml")
    graph = build_graph(pb).compile()
    nodes = set(graph.get_graph().nodes)
    assert {"update_process_log", "prepare_context", "call_llm", "extract_commands", "evaluate_emotion",
            "check_stagnation", "validate_output", "write_memory", "execute_commands"} <= nodes


@pytest.mark.parametrize("text, expected", [
    (GOOD.replace("next: b", "next: bb"), "t.yaml:6 nodes[0].next: unknown node 'bb'"),
    (GOOD.replace("type: execute_commands", "type: nope"), "t.yaml:8 nodes[1].type: unknown step type 'nope'"),
    (GOOD.replace("start: a", "start: z"), "t.yaml:2 start: unknown node 'z'"),
    (GOOD.replace("name: t\n", ""), "t.yaml:1 name: Field required"),
    (GOOD.replace("    next: END\n", "    next: END\n    colour: red\n"), "t.yaml:10 nodes[1].colour: Extra inputs are not permitted"),
    (GOOD.replace("next: b", "next: END"), "t.yaml:7 nodes[1].id: node 'b' is unreachable from start 'a'"),
    (GOOD.replace("  - id: b", "  - id: a"), "t.yaml:7 nodes[1].id: duplicate node id 'a'"),
    ("name: t\nstart: a\nnodes: [\n", "t.yaml:4 (yaml)"),
    ("- just\n- a list\n", "t.yaml:1 (top level): expected a mapping"),
    (GOOD.replace("    next: b\n", "    conditional_next:\n      field: tick\n      operator: gt\n      cases: {'3': q}\n      default: b\n"),
     "t.yaml:9 nodes[0].conditional_next.cases.3: unknown node 'q'"),
    (GOOD.replace("    next: b\n", "    conditional_next:\n      field: tick\n      operator: approx\n      cases: {'3': b}\n"),
     "t.yaml:8 nodes[0].conditional_next.operator: Input should be"),
    (GOOD.replace("    next: b\n", ""), "t.yaml:4 nodes[0]: node 'a' has neither next nor conditional_next"),
])
def test_malformed_playbooks_name_file_line_and_field(text, expected):
    with pytest.raises(PlaybookError) as info:
        parse_playbook(text, "dir/t.yaml")
    assert any(issue.startswith(expected) for issue in info.value.issues), info.value.issues


def test_conditional_next_routes_on_state():
    text = GOOD.replace("    next: b\n", "    conditional_next:\n      field: novelty.flag\n      cases: {'true': b}\n      default: END\n")
    from graph.compiler import make_router

    pb = parse_playbook(text, "t.yaml")
    route = make_router(pb.nodes[0].conditional_next)
    assert route({"novelty": {"flag": True}}) == "b"
    assert route({"novelty": {"flag": False}}) == "END"


def test_json_schema_describes_nodes():
    assert '"conditional_next"' in playbook_json_schema()
