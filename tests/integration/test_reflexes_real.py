"""Reflexes on real parts: the embedded model's structured evaluation call, paraphrase loops seen by the real
sentence model, and failover/degraded mode/recovery with a real `llama_cpp.server` killed mid-generation."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from graph.agent import build_agent
from llm.embedded_model import assemble_model
from memory.retrieval.embeddings import LocalEmbedder
from nodes.reflexes.evaluation import evaluate, parse_comparison
from tests.conftest import make_agent
from tests.fakes.llm import FakeLLM
from tests.integration.servers import free_port, llama_cpp_server

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "data"))
from stagnation_set import NOVEL, PARAPHRASES  # noqa: E402

pytestmark = pytest.mark.integration


def test_the_shared_evaluation_call_is_valid_json_on_the_embedded_model(tmp_path):
    agent = build_agent("repl", data_dir=str(tmp_path), embedded_context_window=4096, checkpointer="memory")
    gen, answer = evaluate(
        agent.services.llms,
        PARAPHRASES[0][1],
        vocabulary=["joy", "curiosity", "calm"],
        previous=PARAPHRASES[0][0],
        prefer=None,
        tags={"thread_id": "main", "tick": 0},
    )
    assert gen.llm_id == "embedded" and gen.provider == "llamacpp"
    comparison = parse_comparison(answer["comparison"])  # grammar-constrained: the 270M model's JSON parses
    assert comparison is not None and 0 <= comparison["novelty_score"] <= 100
    assert comparison["assessment"] in ("identical", "not identical")
    assert answer["emotions"] and all(1 <= e["strength"] <= 5 for e in answer["emotions"])
    agent.close()


def test_a_paraphrase_loop_is_flagged_by_the_real_sentence_model(tmp_path):
    base, *paraphrases = PARAPHRASES[0]
    fake = FakeLLM("fake", responses=[NOVEL[5][0], base, *paraphrases])
    agent = make_agent(tmp_path, fake, embedder=LocalEmbedder(), reflexes={"compare_with_llm": False})
    states = [agent.tick() for _ in range(5)]
    assert not states[1]["novelty"]["stagnation_flag"]
    flagged = [s["tick"] for s in states if s["novelty"]["stagnation_flag"]]
    assert flagged and flagged[0] == 3  # the first paraphrase
    first = states[2]["novelty"]
    assert first["semantic_similarity"] > 0.6 and first["ngram_similarity"] < 0.5  # seen by meaning, not by words
    assert "meaning similarity" in first["stagnation_reason"]
    agent.services.db.close()


def test_server_killed_mid_generation_degrades_then_recovers_when_restarted(tmp_path):
    model, port = assemble_model(), free_port()
    with llama_cpp_server(model, port=port) as (url, proc):
        agent = build_agent(
            "repl",
            data_dir=str(tmp_path),
            llm_url=url,
            model="gemma",
            llm_api="completions",
            context_window=4096,
            embedded=False,
            checkpointer="memory",
        )
        agent.services.settings.sampling.max_tokens = 48
        assert agent.tick()["llm"]["llm_id"] == "server"
        from langgraph.runtime import RunControl

        killed = False
        for mode, data in agent.stream(RunControl()):
            if mode == "custom" and data.get("event") == "token" and not killed:
                proc.kill()  # mid-generation
                killed = True
        assert killed
        state = agent.state()
        assert state["degraded"] and state["response"] == ""
        with agent.services.db.unit() as repos:
            note_id = repos.notes.add("Are you still there?", source="user").id  # notes are accepted meanwhile
        state = agent.tick()  # still down: the registry probes it, the tick is degraded again
        assert state["degraded"]
    with llama_cpp_server(model, port=port) as (url, _):
        state = agent.tick()
        assert not state["degraded"] and state["llm"]["llm_id"] == "server" and state["response"]
        with agent.services.db.unit() as repos:
            assert repos.notes.get(note_id).read  # the note written during the outage was answered
            assert [t.status for t in repos.ticks.recent(10)] == ["ok", "degraded", "degraded", "ok"]
            failed = [c for c in repos.llm_calls.recent(50) if not c.ok]
            assert len(failed) >= 2 and all(c.llm_id == "server" for c in failed)
            names = [p.name for p in repos.processes.open("main")]
            assert "llm.outage" not in names  # closed on recovery
            from sqlalchemy import select

            from memory.models import ProcessLog

            recovered = repos.session.scalars(select(ProcessLog.value).where(ProcessLog.name == "llm.recovered")).all()
            assert recovered == ["server answers again after 2 degraded tick(s)"]
    agent.close()
