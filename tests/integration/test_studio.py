"""`langgraph dev` on loopback, driven with langgraph_sdk: assistants, a tick on a thread, state, graph drawing."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.servers import free_port, wait_http

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    data = tmp_path_factory.mktemp("studio")
    port = free_port()
    env = {
        **os.environ,
        "ANIMA_DATA_DIR": str(data),
        "LANGSMITH_TRACING": "false",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "HF_HUB_OFFLINE": "1",
    }
    cli = Path(sys.executable).parent / "langgraph"
    proc = subprocess.Popen(
        [str(cli), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/ok", 120, proc)
        yield f"http://127.0.0.1:{port}", data
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_studio_serves_playbooks_and_runs_a_tick(studio):
    from langgraph_sdk import get_sync_client

    url, data = studio
    client = get_sync_client(url=url)
    assistants = {a["graph_id"]: a["assistant_id"] for a in client.assistants.search()}
    assert {"repl", "epos", "deep_work", "novel", "dream", "coding_session"} <= set(assistants)
    deep = client.assistants.get_graph(assistants["deep_work"], xray=True)
    deep_nodes = {n["id"] for n in deep["nodes"]}
    # the Stelis region is drawn as a subgraph: its nodes are namespaced under the stelis_start node
    assert {
        "plan",
        "collect",
        "synthesize",
        "investigate:ask_questions",
        "investigate:examine",
        "investigate:close",
    } <= deep_nodes
    drawing = client.assistants.get_graph(assistants["repl"])
    assert {n["id"] for n in drawing["nodes"]} >= {
        "update_process_log",
        "call_llm",
        "validate_output",
        "execute_commands",
    }
    assert {"source": "write_memory", "target": "manage_memory"}.items() <= {
        k: v for e in drawing["edges"] if e["source"] == "write_memory" for k, v in e.items()
    }.items()
    thread = client.threads.create()
    client.runs.wait(thread["thread_id"], assistants["repl"], input={})
    values = client.threads.get_state(thread["thread_id"])["values"]
    assert values["tick"] == 1 and values["thread_id"] == thread["thread_id"]
    assert values["response"].strip() and values["llm"]["llm_id"] == "embedded"
    assert (data / "anima.sqlite").exists()  # the run wrote to the data dir the server was given


def test_a_studio_client_chooses_a_thread_not_a_path_or_a_model(studio, tmp_path):
    from langgraph_sdk import get_sync_client

    url, data = studio
    client = get_sync_client(url=url)
    repl = next(a["assistant_id"] for a in client.assistants.search() if a["graph_id"] == "repl")
    assert client.assistants.get_schemas(repl)["context_schema"].get("properties", {}) == {}
    elsewhere = tmp_path / "elsewhere"
    thread = client.threads.create()
    run = client.runs.create(
        thread["thread_id"],
        repl,
        input={},
        context={
            "data_dir": str(elsewhere),
            "db_url": f"sqlite:///{elsewhere}/x.sqlite",
            "persona_dir": str(elsewhere),
            "llm_url": "http://127.0.0.1:9/v1",
        },
    )
    refused = client.runs.join(thread["thread_id"], run["run_id"])["__error__"]
    assert client.runs.get(thread["thread_id"], run["run_id"])["status"] == "error"
    assert (
        refused["error"] == "ContextRefused"
        and "cannot set data_dir, db_url, llm_url, persona_dir" in refused["message"]
    )
    assert "tick" not in client.threads.get_state(thread["thread_id"])["values"]  # nothing ran
    assert not elsewhere.exists()  # no path a client sent was opened or created
