"""The OpenAI-compatible provider's token count learns the server's tokenizer from the usage it reports, so a
prompt budgeted with it fits the server's window (a llama-cpp-python server asked for more drops the stream)."""

import json
import math

import httpx

from llm.base import Sampling, approx_tokens
from llm.providers.openai_compat import OpenAICompatible

PROMPT = "Привет, как дела? " * 40  # Cyrillic: denser in tokens than the 4-chars rule says


def provider_reporting(prompt_tokens_per_estimate: list[float]) -> tuple[OpenAICompatible, list[dict]]:
    provider, sent = OpenAICompatible("srv", "http://llm.test/v1", "m", api="completions"), []

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(body)
        ratio = prompt_tokens_per_estimate[min(len(sent) - 1, len(prompt_tokens_per_estimate) - 1)]
        return httpx.Response(
            200,
            json={
                "choices": [{"text": "yes"}],
                "usage": {"prompt_tokens": round(approx_tokens(body["prompt"]) * ratio), "completion_tokens": 1},
            },
        )

    provider._http = httpx.Client(base_url=provider.base_url, transport=httpx.MockTransport(answer))
    return provider, sent


def test_the_count_rises_at_once_to_what_the_server_reported():
    provider, sent = provider_reporting([2.0])
    assert provider.count_tokens(PROMPT) == math.ceil(approx_tokens(PROMPT) * 1.04)  # nothing learnt yet
    gen = provider.complete(PROMPT, Sampling(max_tokens=8))
    assert sent and gen.prompt_tokens == round(approx_tokens(PROMPT) * 2.0)
    assert provider.count_tokens(PROMPT) >= gen.prompt_tokens  # the next prompt of this kind is not undercounted


def test_a_lighter_prompt_lowers_the_count_slowly_and_never_below_what_was_seen_last():
    provider, _ = provider_reporting([2.0, 1.0, 1.0])
    provider.complete(PROMPT, Sampling(max_tokens=8))
    high = provider.count_tokens(PROMPT)
    provider.complete(PROMPT, Sampling(max_tokens=8))
    after_one = provider.count_tokens(PROMPT)
    provider.complete(PROMPT, Sampling(max_tokens=8))
    after_two = provider.count_tokens(PROMPT)
    assert high > after_one > after_two >= approx_tokens(PROMPT)


def test_a_count_the_server_did_not_report_or_could_not_mean_changes_nothing():
    provider, _ = provider_reporting([40.0])  # not a count of this prompt: ignored
    provider.complete(PROMPT, Sampling(max_tokens=8))
    assert provider.tokens_per_estimate == 1.0
    short, _ = provider_reporting([3.0])
    short.complete("Hi", Sampling(max_tokens=8))  # too short to say anything about the tokenizer
    assert short.tokens_per_estimate == 1.0


def streaming_server_without_usage(tokenizer: dict[str, int] | None) -> tuple[OpenAICompatible, list[str]]:
    """A server whose stream reports no usage (llama-cpp-python's); `tokenizer`: its endpoint and tokens/estimate."""
    provider, paths = OpenAICompatible("srv", "http://llm.test/v1", "m", api="completions"), []

    def answer(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.path)
        body = json.loads(request.content)
        if request.url.path == "/v1/completions":
            return httpx.Response(
                200,
                headers={"content-type": "text/event-stream"},
                text='data: {"choices": [{"text": "yes"}]}\n\ndata: [DONE]\n\n',
            )
        if tokenizer and request.url.path in tokenizer:
            return httpx.Response(
                200, json={"count": round(approx_tokens(body["input"]) * tokenizer[request.url.path])}
            )
        return httpx.Response(404, json={"detail": "Not Found"})

    provider._http = httpx.Client(base_url=provider.base_url, transport=httpx.MockTransport(answer))
    return provider, paths


def test_a_stream_without_usage_is_counted_by_the_servers_own_tokenizer():
    provider, paths = streaming_server_without_usage({"/extras/tokenize/count": 1.5})
    gen = provider.complete(PROMPT, Sampling(max_tokens=8))
    assert gen.prompt_tokens == round(approx_tokens(PROMPT) * 1.5)
    assert provider.count_tokens(PROMPT) >= gen.prompt_tokens
    assert paths == ["/v1/completions", "/extras/tokenize/count"]


def test_a_server_without_a_tokenizer_endpoint_is_asked_once_then_estimated():
    provider, paths = streaming_server_without_usage(None)
    for _ in range(3):
        gen = provider.complete(PROMPT, Sampling(max_tokens=8))
    assert gen.prompt_tokens == approx_tokens(PROMPT) and provider.tokens_per_estimate == 1.0
    assert paths.count("/extras/tokenize/count") == 1 and paths.count("/tokenize") == 1
    assert paths.count("/v1/completions") == 3


def test_the_first_long_text_counted_is_sized_by_the_server_before_any_answer():
    provider, paths = streaming_server_without_usage({"/tokenize": 1.3})
    assert provider.count_tokens("short") == math.ceil(approx_tokens("short") * 1.04)
    assert paths == []  # short texts never ask
    long_text = PROMPT * 3
    assert provider.count_tokens(long_text) >= round(approx_tokens(long_text) * 1.3)
    assert paths == ["/extras/tokenize/count", "/tokenize"]
    provider.count_tokens(long_text)
    assert len(paths) == 2  # once


def test_a_server_that_is_down_is_not_taken_for_one_without_a_tokenizer():
    provider = OpenAICompatible("srv", "http://llm.test/v1", "m", api="completions")

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    provider._http = httpx.Client(base_url=provider.base_url, transport=httpx.MockTransport(refuse))
    assert provider.count_tokens(PROMPT * 3) == math.ceil(approx_tokens(PROMPT * 3) * 1.04)
    assert provider._tokenizer_endpoint is None  # looked for again after the next answer
