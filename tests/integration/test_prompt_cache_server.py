"""A server's prompt cache, on a real OpenAI-compatible server (tests/integration/scripted_llm_server.py, its own
process: its usage reports the opening a request shares with the ones before, as a caching server does): the
provider asks llama.cpp's server to keep the prompt (`cache_prompt`) when told, and reads the cached tokens into
every call's accounting."""

import pytest

from llm import LLMRegistry, Sampling
from llm.providers.openai_compat import OpenAICompatible

pytestmark = pytest.mark.integration

GUARD_S = 30  # the provider's own timeout: a hang in the HTTP layer cannot outlive it
SYSTEM = {"role": "system", "content": "I am Lumen. " * 200}


def test_cache_prompt_is_sent_when_asked_and_the_cached_tokens_are_read_and_recorded(scripted_server):
    scripted_server.script(default={"do": "stream", "text": "A thought."})
    calls: list[dict] = []
    entries = [
        {
            "id": "cached",
            "provider": "openai",
            "model": "scripted",
            "priority": 10,
            "config": {"base_url": scripted_server.url, "timeout": GUARD_S, "cache_prompt": True},
        }
    ]
    llms = LLMRegistry(entries, recorder=calls.append)
    first = llms.generate("think", messages=[SYSTEM, {"role": "user", "content": "tick 1"}])
    second = llms.generate("think", messages=[SYSTEM, {"role": "user", "content": "tick 2"}])
    seen = scripted_server.requests()
    assert [r["cache_prompt"] for r in seen] == [True, True]
    # the session's server saw other tests' prompts first: what it says it served from its cache is what is read
    reported = [r["usage"]["prompt_tokens_details"]["cached_tokens"] for r in seen]
    assert [first.cached_tokens, second.cached_tokens] == reported
    assert second.cached_tokens > 0.9 * second.prompt_tokens  # all but the last words came from the cache
    assert [c["cached_tokens"] for c in calls] == reported


def test_a_plain_openai_endpoint_gets_no_field_it_does_not_know(scripted_server):
    scripted_server.script(default={"do": "whole", "text": "A thought."})
    OpenAICompatible("plain", scripted_server.url, "scripted", timeout=GUARD_S).chat([SYSTEM], Sampling())
    assert scripted_server.requests()[0]["cache_prompt"] is None
