"""The playbooks from outside the run: every shipped playbook is a graph LangGraph Studio serves (langgraph.json),
and `graph.open_graph` gives a compiled graph with the run context its steps need, for LangGraph's own invoke and
stream (docs/playbooks.md "From Python"; the documented snippet itself runs in
tests/integration/test_python_api_docs.py)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from graph import build_graph, load_playbook, open_graph
from graph.playbook import shipped_playbooks_dir
from nodes.context import MissingServices
from tests.conftest import make_agent
from tests.fakes.llm import FakeLLM

ROOT = Path(__file__).resolve().parents[2]


def test_every_shipped_playbook_is_a_graph_in_langgraph_json():
    """A playbook added to playbooks/ and not to langgraph.json fails here by name; each entry's factory compiles
    the playbook it is named after."""
    graphs = json.loads((ROOT / "langgraph.json").read_text(encoding="utf-8"))["graphs"]
    shipped = sorted(p.stem for p in shipped_playbooks_dir().glob("*.yaml"))
    assert "coding_session" in shipped
    missing, orphans = sorted(set(shipped) - set(graphs)), sorted(set(graphs) - set(shipped))
    assert not missing, f"playbooks langgraph.json does not serve: {missing}"
    assert not orphans, f"graphs in langgraph.json with no playbook: {orphans}"
    for name, where in graphs.items():
        path, factory = where.split(":")
        module = importlib.import_module(Path(path).with_suffix("").as_posix().lstrip("./").replace("/", "."))
        compiled = getattr(module, factory)()
        assert compiled.name == name
        expected = {n.id for n in load_playbook(shipped_playbooks_dir() / f"{name}.yaml").nodes}
        # a Stelis region is a subgraph: its nodes are drawn as "region:node"
        drawn = {part for node in compiled.get_graph(xray=True).nodes for part in node.split(":")}
        assert expected <= drawn, (name, sorted(expected - drawn))


def thought_with(command: str, args: dict) -> str:
    return (
        "The tide is turning.\n# Commands:\n"
        + json.dumps([{"cmd_id": "c1", "type": command, "args": args}])
        + "\n# End commands"
    )


def test_a_graph_compiled_by_hand_says_what_it_lacks(tmp_path):
    """Compiled by hand and invoked without the run context, the first step stops with MissingServices naming the
    way out."""
    graph = build_graph(load_playbook(shipped_playbooks_dir() / "repl.yaml")).compile()
    with pytest.raises(MissingServices, match="graph.open_graph"):
        graph.invoke({}, {"configurable": {"thread_id": "main"}})


def test_open_graph_invokes_and_streams_ticks_with_langgraphs_own_api(tmp_path):
    fake = FakeLLM(
        "fake",
        responses=[
            thought_with("notes.add", {"text": "Check the tide tables."}),
            thought_with("diary.add", {"text": "The tide turned at six."}),
        ],
    )
    services = make_agent(tmp_path, fake).services  # a FakeLLM persona: its services, not its Agent
    with open_graph("repl", services=services, checkpointer="memory") as (tick_graph, context):
        config = {"configurable": {"thread_id": "main"}}
        state = tick_graph.invoke({}, config, context=context)
        assert (state["thread_id"], state["tick"]) == ("main", 1)
        assert state["response"].startswith("The tide is turning.")
        assert [(e["type"], e["status"]) for e in state["executed"]] == [("notes.add", "executed")]

        fake.responses = [thought_with("diary.add", {"text": "The tide turned at six."})]
        chunks = list(tick_graph.stream({}, config, context=context, stream_mode=["updates", "custom"]))
        steps = [next(iter(data)) for mode, data in chunks if mode == "updates"]
        assert steps[0] == "update_process_log" and steps[-1] == "execute_commands"
        [(_, executed)] = [(m, d) for m, d in chunks if m == "updates" and "execute_commands" in d]
        assert executed["execute_commands"]["executed"][0]["status"] == "executed"
        assert tick_graph.get_state(config).values["tick"] == 2
    with services.db.unit() as repos:
        assert [n.text for n in repos.notes.list(source="llm", limit=10)] == ["Check the tide tables."]
        assert [e.text for e in repos.diary.list()] == ["The tide turned at six."]
        assert sorted((t.tick, t.status) for t in repos.ticks.recent(10, "main")) == [(1, "ok"), (2, "ok")]
    services.db.close()


def test_a_one_shot_playbook_runs_from_its_inputs_with_their_defaults(tmp_path):
    fake = FakeLLM(
        "fake",
        responses=["Rivers carry salt to the sea."],
        json_answer={"tasks": ["follow the rivers"], "questions": ["Where does the salt come from?"]},
    )
    services = make_agent(tmp_path, fake).services
    opened = open_graph("deep_work", services=services, checkpointer="memory")
    try:
        with pytest.raises(Exception, match="needs input 'question'"):
            opened.inputs()
        state = opened.graph.invoke(
            opened.inputs(question="Why is the sea salty?"),
            {"configurable": {"thread_id": "research-1"}},
            context=opened.context,
        )
    finally:
        opened.close()
    assert state["vars"]["max_tasks"] == 3  # the playbook's default, filled in
    assert state["vars"]["answer"] == "Rivers carry salt to the sea."
    assert [f["task"] for f in state["vars"]["findings"]] == ["follow the rivers"]
    services.db.close()
