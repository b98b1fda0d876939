"""The free thought's guards (nodes/steps/s05_call_llm.py, persona/settings.py `sampling`): no tick marker in the
prompt for a small model to copy, a thought cut where it starts a tick marker or invents its human's turn, and the
settings' samplers reaching the model (llama.cpp's only where the server takes them)."""

import json

import httpx
import pytest

from graph.agent import build_agent
from graph.services import open_services
from llm.base import Sampling, cut_at_stops
from llm.providers.openai_compat import OpenAICompatible
from persona.settings import SamplingSettings, Settings
from tests.fakes.llm import FakeLLM
from tests.fakes.memory import HashEmbedder


def embedded_agent(tmp_path, fake: FakeLLM, **flags):
    """An agent whose one model is registered as the embedded llama.cpp model (the fake answers for it)."""
    services = open_services(
        data_dir=str(tmp_path),
        embedded=False,
        providers={fake.id: fake},
        entries=[{"id": fake.id, "provider": "llamacpp", "priority": 100}],
        embedder=HashEmbedder(),
        **flags,
    )
    return build_agent("repl", services=services, data_dir=str(tmp_path), checkpointer="memory")


def thinking(fake: FakeLLM) -> list[dict]:
    return [c for c in fake.calls if c["json_schema"] is None and "'s new thought" in c["prompt"]]


def stored_thoughts(agent) -> list[str]:
    with agent.services.db.unit() as repos:
        return [m.content for m in repos.messages.recent("main", 10, kinds=("response",))]


def test_cut_at_stops_keeps_what_comes_before_the_first_stop():
    assert cut_at_stops("The sea is calm.\nUser: hi\nHuman: yo", ["\nHuman:", "\nUser:"]) == (
        "The sea is calm.",
        "\nUser:",
    )
    assert cut_at_stops("I am king (tick my life (tick", ["(tick"]) == ("I am king ", "(tick")
    assert cut_at_stops("nothing to cut", ["\nUser:"]) == ("nothing to cut", None)


@pytest.mark.parametrize(
    "invented",
    [
        "The tide turns slowly tonight.\nUser: tell me more about the tide",
        "The tide turns slowly tonight.\nAnn: what are you doing?",
        "The tide turns slowly tonight. My human writes: come back",
        "The tide turns slowly tonight. (tick 3) The tide turns (tick 4)",
        "The tide turns slowly tonight.\nMy new thoughts\nThe tide turns slowly tonight.",
    ],
)
def test_a_thought_is_cut_where_it_invents_its_humans_turn_or_copies_a_tick_marker(tmp_path, invented):
    fake = FakeLLM("embedded", responses=[invented])
    agent = embedded_agent(tmp_path, fake, user_name="Ann")
    state = agent.tick()
    assert state["response"].strip() == "The tide turns slowly tonight."
    assert [t.strip() for t in stored_thoughts(agent)] == ["The tide turns slowly tonight."]
    call = thinking(fake)[0]
    assert {"(tick", "\nUser:", "\nHuman:", "My human writes:", "\nAnn:"} <= set(call["stop"])  # the model stops there
    agent.services.db.close()


def test_the_small_models_prompt_has_no_tick_marker_and_lists_earlier_thoughts_plainly(tmp_path):
    thoughts = iter(["The lighthouse keeps its own time.", "Salt on the window, and a gull asleep."])
    fake = FakeLLM("embedded", responses=lambda prompt: next(thoughts, "A third thought about rope."))
    agent = embedded_agent(tmp_path, fake)
    agent.tick()
    agent.tick()
    prompt = thinking(fake)[-1]["prompt"]
    assert "(tick" not in prompt and "[tick" not in prompt
    assert "- The lighthouse keeps its own time." in prompt  # the recent thought, as a plain list item
    assert prompt.rstrip().endswith("## Lumen's new thought")
    agent.services.db.close()


def test_a_server_model_keeps_the_recent_thoughts_scores(agent_factory):
    fake = FakeLLM("fake", responses=["The lighthouse keeps its own time.", "Salt on the window."])
    agent = agent_factory(fake)
    agent.tick()
    agent.tick()
    prompt = thinking(fake)[-1]["prompt"]
    assert "[tick 1] The lighthouse keeps its own time." in prompt  # voice.plain_recent is auto: off for a server
    assert "(tick" not in prompt  # the header names no tick for any model


def test_the_settings_samplers_reach_the_think_call(tmp_path):
    fake = FakeLLM("embedded", responses=["The tide turns slowly tonight."])
    agent = embedded_agent(
        tmp_path, fake, sampling={"repeat_penalty": 1.3, "top_k": 20, "min_p": 0.1, "frequency_penalty": 0.4}
    )
    agent.tick()
    sampling = thinking(fake)[0]["sampling"]
    assert (sampling.repeat_penalty, sampling.top_k, sampling.min_p, sampling.frequency_penalty) == (1.3, 20, 0.1, 0.4)
    agent.services.db.close()


def test_an_empty_stop_sequence_is_refused_by_name():
    with pytest.raises(ValueError, match="stop"):
        SamplingSettings(stop=["\nUser:", ""])
    assert "stop" not in SamplingSettings().params()  # the tick state's sampling holds samplers only
    assert Settings().sampling.to_sampling().repeat_penalty == SamplingSettings().repeat_penalty


def _server(extras: bool) -> tuple[OpenAICompatible, list[dict]]:
    provider = OpenAICompatible.from_entry(
        {
            "id": "srv",
            "model": "m",
            "config": {"base_url": "http://llm.test/v1", "api": "completions", "sampling_extras": extras},
        }
    )
    sent: list[dict] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json={"choices": [{"text": "yes"}], "usage": {"prompt_tokens": 3}})

    provider._http = httpx.Client(base_url=provider.base_url, transport=httpx.MockTransport(answer))
    return provider, sent


def test_a_server_gets_llama_cpps_samplers_only_when_its_entry_says_it_takes_them():
    plain, sent = _server(False)
    plain.complete("Hello", Sampling(repeat_penalty=1.3, frequency_penalty=0.2), stop=["\nUser:"])
    assert sent[0]["frequency_penalty"] == 0.2 and sent[0]["stop"] == ["\nUser:"]
    assert not {"repeat_penalty", "top_k", "min_p", "repetition_penalty"} & set(sent[0])  # the OpenAI API refuses them
    extras, sent = _server(True)
    extras.complete("Hello", Sampling(repeat_penalty=1.3, top_k=20, min_p=0.1))
    assert (sent[0]["repeat_penalty"], sent[0]["repetition_penalty"], sent[0]["top_k"], sent[0]["min_p"]) == (
        1.3,
        1.3,
        20,
        0.1,
    )
    with pytest.raises(ValueError, match="sampling_extras"):
        OpenAICompatible.from_entry({"id": "srv", "config": {"base_url": "http://x/v1", "sampling_extras": "yes"}})


def test_the_fault_counter_sees_marker_loops_echoes_and_invented_turns():
    from bench.thought_faults import faults

    counted = faults(
        [
            "I am king (tick my life (tick",
            "I think your next thought: build on your last ones",
            "The sea is grey.\nAnn: come home",
            "A gull sleeps on the rail each tick.",
        ],
        human="Ann",
    )
    assert (counted["tick_marker"], counted["marker_loop"], counted["echo"], counted["invented_turn"]) == (1, 1, 1, 1)
    assert counted["per_thought"][3] == {"tick_markers": 0, "echo": [], "invented_turn": False}
