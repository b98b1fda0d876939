"""The `openai` provider against a real `python -m llama_cpp.server` serving the bundled GGUF."""

import pytest

from graph.agent import build_agent
from llm.base import Sampling
from llm.embedded_model import assemble_model
from llm.providers.openai_compat import OpenAICompatible
from tests.integration.servers import llama_cpp_server

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server():
    with llama_cpp_server(assemble_model()) as (url, proc):
        yield url, proc


def test_completions_and_chat_with_usage(server):
    url, _ = server
    completions = OpenAICompatible("srv", url, "gemma", api="completions", context_window=4096)
    gen = completions.complete("The lighthouse keeper opened the door and", Sampling(max_tokens=24, temperature=0.7))
    assert gen.text.strip() and gen.provider == "openai"
    assert gen.prompt_tokens > 0 and 0 < gen.completion_tokens <= 24  # max_tokens honoured (sent in extra_body)
    chat = OpenAICompatible("srv", url, "gemma", api="chat", context_window=4096)
    reply = chat.chat(
        [{"role": "system", "content": "You are Lumen."}, {"role": "user", "content": "Describe the sea."}],
        Sampling(max_tokens=24),
    )
    assert reply.text.strip()  # a base model's empty chat answer is retried as a completion


def test_json_schema_constrained_completion(server):
    url, _ = server
    provider = OpenAICompatible("srv", url, "gemma", api="completions", context_window=4096)
    schema = {"type": "object", "properties": {"rating": {"enum": [-1, 0, 1]}}, "required": ["rating"]}
    gen = provider.complete(
        "Rate this: 'water is wet'. JSON:\n", Sampling(max_tokens=20, temperature=0.1), json_schema=schema
    )
    import json

    assert json.loads(gen.text)["rating"] in (-1, 0, 1)


def test_the_token_count_learns_the_servers_tokenizer_so_a_dense_prompt_fits(server):
    url, _ = server
    provider = OpenAICompatible("srv", url, "gemma", api="completions", context_window=4096)
    prompt = '{"команда": "заметки.добавить", "текст": "Привет, как дела?"}\n' * 30  # dense: JSON in Cyrillic
    gen = provider.complete(prompt, Sampling(max_tokens=4, temperature=0.1))
    assert provider.count_tokens(prompt) >= gen.prompt_tokens > 0


def test_tick_through_the_server_then_failover_to_embedded(tmp_path, server):
    url, proc = server
    agent = build_agent(
        "repl",
        data_dir=str(tmp_path),
        llm_url=url,
        model="gemma",
        llm_api="completions",
        context_window=4096,
        embedded_context_window=4096,
    )
    agent.services.settings.sampling.max_tokens = 32
    state = agent.tick()
    assert state["llm"]["llm_id"] == "server" and state["llm"]["provider"] == "openai"
    proc.kill()
    proc.wait(timeout=30)
    state = agent.tick()
    assert state["llm"]["llm_id"] == "embedded"
    with agent.services.db.unit() as repos:
        calls = repos.llm_calls.recent(20)
        failed = [c for c in calls if c.llm_id == "server" and not c.ok]
        assert failed and all(c.tick == 2 or c.tick is None for c in failed), [(c.tick, c.purpose) for c in calls]
        # the thought failed over from the server, unless a call before it (another purpose: the server is then set
        # aside for a while) had already failed over
        assert state["llm"]["failed_over_from"] == ["server"] or any(c.purpose != "think" for c in failed), [
            (c.tick, c.purpose, c.llm_id, c.ok) for c in calls
        ]
        # a thought the prose gate or the repeat check turns away is kept as a one-line record, with its model
        thoughts = repos.messages.recent("main", 5, kinds=("response", "stagnation_record"))
        assert [m.llm_id for m in thoughts] == ["server", "embedded"]
    agent.close()
