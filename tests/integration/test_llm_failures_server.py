"""A hostile OpenAI-compatible server (tests/integration/scripted_llm_server.py, its own process on loopback):
servers that do not stream, garble, refuse or hang end in a normal answer, a failover or a degraded tick, and a
stop during a hanging call ends the run cleanly, resumable. Every wait is bounded (hang guards, not timings)."""

import signal
import threading

import pytest

from graph.agent import build_agent
from graph.services import open_services
from llm import LLMCancelled, LLMRegistry, LLMUnavailable, Sampling
from llm.providers.openai_compat import OpenAICompatible
from tests.fakes.llm import FakeLLM
from tests.fakes.memory import HashEmbedder
from tests.integration.servers import CLI_GUARD_S, finish, run_cli

pytestmark = pytest.mark.integration

GUARD_S = 30  # the provider's own timeout in these tests: a hang in the HTTP layer cannot outlive it
HI = [{"role": "user", "content": "Say something."}]


@pytest.fixture
def server(scripted_server):
    return scripted_server


def provider(server, **kwargs) -> OpenAICompatible:
    return OpenAICompatible("server", server.url, "scripted", timeout=GUARD_S, **kwargs)


def test_a_server_that_ignores_stream_answers_whole_and_is_not_asked_to_stream_again(server):
    server.script({"do": "whole", "text": "A whole answer."}, default={"do": "whole"})
    model = provider(server)
    tokens: list[str] = []
    gen = model.chat(HI, Sampling(), on_token=tokens.append)
    assert gen.text == "A whole answer." and tokens == ["A whole answer."] and gen.completion_tokens == 7
    model.chat(HI, Sampling())
    assert [r["stream"] for r in server.requests()] == [True, False]


def test_a_server_that_refuses_to_stream_is_asked_again_whole(server):
    server.script(default={"do": "refuse_stream", "text": "Asked twice."})
    model = provider(server, api="completions")
    assert model.complete("Once upon", Sampling()).text == "Asked twice."
    assert [r["stream"] for r in server.requests()] == [True, False] and not model.streams


def test_a_streaming_server_streams_token_by_token(server):
    server.script(default={"do": "stream", "text": "one two three"})
    tokens: list[str] = []
    gen = provider(server).chat(HI, Sampling(), on_token=tokens.append)
    assert gen.text == "one two three" and tokens == ["one", " two", " three"]


@pytest.mark.parametrize(
    "step, kind, said",
    [
        ({"do": "not_json"}, "malformed", "not JSON"),
        ({"do": "no_choices"}, "malformed", "no choices"),
        ({"do": "status", "code": 400}, "bad_request", "HTTP 400"),
        ({"do": "status", "code": 401}, "auth", "refused the API key"),
        ({"do": "status", "code": 403}, "auth", "refused the API key"),
        ({"do": "status", "code": 404}, "not_found", "no model 'scripted'"),
        ({"do": "status", "code": 429, "retry_after": 30}, "rate_limited", "HTTP 429"),
        ({"do": "status", "code": 500}, "outage", "HTTP 500"),
        ({"do": "status", "code": 503}, "outage", "HTTP 503"),
    ],
)
def test_each_error_class_fails_over_with_its_kind_recorded(server, step, kind, said):
    server.script(default=step)
    calls: list[dict] = []
    entries = [
        {
            "id": "server",
            "provider": "openai",
            "model": "scripted",
            "priority": 10,
            "config": {"base_url": server.url, "timeout": GUARD_S},
        },
        {"id": "backup", "provider": "fake", "priority": 0},
    ]
    llms = LLMRegistry(entries, recorder=calls.append, providers={"backup": FakeLLM("backup")})
    gen = llms.generate("think", messages=HI)
    assert (gen.llm_id, gen.failed_over_from) == ("backup", ["server"])
    failure = next(c for c in calls if c["llm_id"] == "server")
    assert not failure["ok"] and failure["error"].startswith(f"{kind}: ") and said in failure["error"]


def test_a_hanging_server_times_out_as_an_outage_after_the_configured_timeout(server):
    server.script(default={"do": "hang"})
    model = OpenAICompatible.from_entry(
        {"id": "server", "model": "scripted", "config": {"base_url": server.url, "timeout": 1}}
    )
    with pytest.raises(LLMUnavailable, match=r"no answer within 1s \(config.timeout\)") as failure:
        model.chat(HI, Sampling())
    assert failure.value.kind == "outage"


def test_timeouts_in_config_must_be_positive_seconds():
    with pytest.raises(ValueError, match=r"config.connect_timeout must be a positive number of seconds, got 'soon'"):
        OpenAICompatible.from_entry(
            {"id": "x", "config": {"base_url": "http://127.0.0.1:9/v1", "connect_timeout": "soon"}}
        )


def test_a_hanging_call_is_cancelled_at_once_and_the_server_is_not_set_aside(server):
    server.script(default={"do": "hang"})
    calls: list[dict] = []
    entries = [{"id": "server", "provider": "openai", "model": "scripted", "config": {"base_url": server.url}}]
    llms = LLMRegistry(entries, recorder=calls.append)
    stop = threading.Event()

    def stop_once_the_server_is_asked():
        server.wait_for_requests(1)
        stop.set()

    threading.Thread(target=stop_once_the_server_is_asked, daemon=True).start()
    with llms.cancel_when(stop), pytest.raises(LLMCancelled):
        llms.generate("think", messages=HI)  # the default read timeout is 60 s: only the cancel ends this
    assert stop.is_set() and calls[-1]["error"] == "cancelled: the run was stopped"
    server.script(default={"do": "stream"})
    assert llms.generate("think", messages=HI).llm_id == "server"


def test_ticks_against_a_broken_server_fail_over_or_degrade(server, tmp_path):
    server.script(default={"do": "status", "code": 401})
    services = open_services(
        data_dir=str(tmp_path), embedded=False, llm_url=server.url, model="scripted", embedder=HashEmbedder()
    )
    agent = build_agent("repl", services=services, checkpointer="memory")
    state = agent.tick()
    assert state["degraded"] and state["response"] == ""
    with agent.services.db.unit() as repos:
        assert repos.ticks.recent(1)[0].status == "degraded"
        assert any(c.error and c.error.startswith("auth: ") for c in repos.llm_calls.recent(10))
    agent.services.db.close()


def test_cli_a_server_that_does_not_stream_gives_a_normal_tick(server, tmp_path):
    server.script(default={"do": "whole", "text": "Whole answers are fine."})
    code, out, err = finish(run_cli(server.url, tmp_path))
    assert code == 0, err
    assert "Whole answers are fine." in out and "done: 1 tick(s) this run" in err and "Traceback" not in err


def test_cli_a_garbled_server_gives_a_degraded_tick_not_a_traceback(server, tmp_path):
    server.script(default={"do": "not_json"})
    code, out, err = finish(run_cli(server.url, tmp_path))
    assert code == 0, err
    assert "done: 1 tick(s) this run" in err and "Traceback" not in err + out


def test_cli_sigterm_during_a_hanging_call_stops_cleanly_and_the_tick_resumes(server, tmp_path):
    server.script(default={"do": "hang"})
    proc = run_cli(server.url, tmp_path)
    try:
        server.wait_for_requests(1, timeout=CLI_GUARD_S)
    except TimeoutError:
        proc.kill()
        raise
    proc.send_signal(signal.SIGTERM)
    code, out, err = finish(proc, guard_s=30)  # the provider's read timeout is 60 s: only the cancel ends it by then
    assert code == 0, err
    assert "interrupted: 0 tick(s) this run; state saved" in err and "Traceback" not in err + out
    server.script(default={"do": "stream", "text": "Back again."})
    code, out, err = finish(run_cli(server.url, tmp_path))
    assert code == 0, err
    assert "(resuming an interrupted tick)" in err and "done: 1 tick(s) this run" in err and "Back again." in out


def test_the_embedded_model_stops_between_tokens_when_cancelled():
    from llm.providers.llamacpp import EmbeddedLlamaCpp

    model = EmbeddedLlamaCpp(context_window=1024)
    stop = threading.Event()
    tokens: list[str] = []

    def stop_after_three(token: str) -> None:
        tokens.append(token)
        if len(tokens) == 3:
            stop.set()

    with pytest.raises(LLMCancelled, match="cancelled after 3 token"):
        model.complete(
            "The lighthouse keeper",
            Sampling(max_tokens=200, temperature=0.0),
            stop=["\n\n\n\n"],
            on_token=stop_after_three,
            cancel=stop,
        )
    assert len(tokens) == 3
    assert model.complete("The sea is", Sampling(max_tokens=8, temperature=0.0)).completion_tokens > 0  # still usable
