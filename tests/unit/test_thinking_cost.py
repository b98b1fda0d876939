"""The price of a mind: a tick with nothing new calls no model (managers/thinking.py), the pace of quiet ticks backs
off and a note ends it at once, a budget keeps the persona answering its humans and drops its own thinking first, the
prompt opens the same way tick after tick (a prompt cache serves it), and the spend is on /metrics, in OpenTelemetry
spans, on the Controls page and in inspect."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from graph.loop import driver
from graph.loop.driver import Stopper, run_loop
from managers.thinking import QUIET_RECORD, quiet_pause, resolved_mode
from persona.settings import Settings
from tests.fakes.llm import FakeLLM
from tests.integration.scripted_llm_server import shared_opening

UTC = UTC
T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def think_calls(fake: FakeLLM) -> list[dict]:
    return [c for c in fake.calls if c["json_schema"] is None]


def decide(agent, mode="eventful", started=1):
    services = agent.services
    with services.db.unit() as repos:
        return services.managers.over(repos).thinking.decide(
            agent.thread_id, services.clock(), mode, ticks_since_start=started
        )


def thought(agent):
    with agent.services.db.unit() as repos:
        agent.services.managers.over(repos).thinking.thought(agent.thread_id, agent.services.clock())


def test_the_mode_in_force_is_eventful_on_a_server_and_reflective_on_the_embedded_model():
    settings = Settings()
    assert settings.cycle.thinking == "auto"
    assert resolved_mode(settings, "openai") == "eventful" and resolved_mode(settings, "llamacpp") == "reflective"
    settings.cycle.thinking = "continuous"
    assert resolved_mode(settings, "llamacpp") == "continuous"
    assert [quiet_pause(n, 5.0) for n in range(1, 7)] == [1, 2, 4, 5, 5, 5]


def test_with_nothing_new_a_tick_calls_no_model_and_leaves_one_closed_line(agent_factory):
    fake = FakeLLM("fake", responses=lambda prompt: f"A thought of my own ({len(prompt)}).")
    agent = agent_factory(fake)  # a "server" model: eventful
    result = run_loop(agent, ticks=3, stopper=Stopper(), idle_poll_s=0, autonomy=False)
    assert (result.ticks_run, result.quiet_ticks) == (3, 2)
    assert len(think_calls(fake)) == 1  # the first tick after the start thinks; the two quiet ones call nothing
    calls_after_first = len(fake.calls)
    with agent.services.db.unit() as repos:
        quiet = repos.processes.listing(agent.thread_id, limit=50)
        lines = [p for p in quiet if p.name == QUIET_RECORD]
        assert len(lines) == 2 and all(p.status == "close" and "no model call" in p.value for p in lines)
        assert [p.value.rsplit("next look in ", 1)[1] for p in sorted(lines, key=lambda p: p.id)] == ["1s", "2s"]
        assert repos.ticks.count() == 1  # a quiet tick is no tick of the graph
        repos.notes.add("Are you there?", source="user")
    result = run_loop(agent, ticks=1, stopper=Stopper(), idle_poll_s=0, autonomy=False)
    prompt = think_calls(fake)[-1]["prompt"]
    assert "Are you there?" in prompt and "quiet:" not in prompt and QUIET_RECORD not in prompt
    assert len(fake.calls) > calls_after_first


def test_a_note_a_finished_process_or_an_answered_approval_is_something_to_think_about(agent_factory):
    agent = agent_factory(FakeLLM("fake"))  # the rows' own times are the real clock's
    thought(agent)
    first = decide(agent)
    assert not first.think and first.pause_s == 1.0
    assert decide(agent).pause_s == 2.0  # the pace backs off
    with agent.services.db.unit() as repos:
        note = repos.notes.add("The tide is in.", source="user")
    woken = decide(agent)
    assert woken.think and woken.reason == f"note {note.id} from a human waits"
    thought(agent)  # it thought (and read it): quiet again, the pace back at full speed
    with agent.services.db.unit() as repos:
        repos.notes.mark_read([note.id])
    again = decide(agent)
    assert not again.think and again.pause_s == 1.0
    with agent.services.db.unit() as repos:
        row = repos.processes.add("script", "done", status="ok", thread_id=agent.thread_id, tags=["background"])
    assert decide(agent).reason == f"process {row.id} script finished"
    thought(agent)
    with agent.services.db.unit() as repos:
        feed = repos.notes.add("A new item on the tides feed.", source="feed")
    assert decide(agent).reason == f"note {feed.id} from feed"


def test_continuous_thinks_every_tick_and_reflective_muses_when_the_quiet_pace_reaches_its_ceiling(agent_factory):
    clock = Clock(T0)
    agent = agent_factory(FakeLLM("fake"), clock=clock, cycle={"quiet_ceiling_s": 600})
    thought(agent)
    assert decide(agent, "continuous").think
    assert not decide(agent, "reflective").think
    clock.advance(seconds=599)
    assert not decide(agent, "reflective").think
    clock.advance(seconds=1)
    muse = decide(agent, "reflective")
    assert muse.think and muse.reason == "a free thought after 600s of quiet"
    assert not decide(agent, "eventful").think  # eventful never muses on its own
    assert decide(agent, "eventful", started=0).think  # the first tick after a start does


def test_the_quiet_pause_ends_the_moment_a_note_arrives(agent_factory):
    agent = agent_factory(FakeLLM("fake"))
    thought(agent)
    with agent.services.db.unit() as repos:
        repos.notes.add("Hello?", source="user")
    driver.quiet_pause(agent, Stopper(), 3600, 0.01)  # returns (a 3600 s pause would outlive the test's timeout)
    stopper = Stopper()
    stopper.request()
    driver.quiet_pause(agent, stopper, 3600, 0.01)  # and a stop ends it too


def spend_rows(agent, tokens: int) -> None:
    with agent.services.db.unit() as repos:
        repos.llm_calls.record(
            thread_id="main",
            tick=1,
            purpose="think",
            llm_id="fake",
            provider="fake",
            model="fake-model",
            prompt_tokens=tokens - 10,
            completion_tokens=10,
            cached_tokens=(tokens - 10) // 2,
            latency_ms=1500.0,
            ok=True,
            error=None,
        )


def test_a_low_budget_drops_the_persona_s_own_thinking_and_a_spent_one_leaves_only_its_humans(agent_factory):
    clock = Clock(datetime.now(UTC))
    agent = agent_factory(
        FakeLLM("fake"),
        clock=clock,
        budget={
            "tokens_per_day": 1000,
            "low_share": 0.2,
            "prices": {"fake": {"prompt": 2.0, "cached": 0.5, "completion": 8.0}},
        },
    )
    thought(agent)
    spend_rows(agent, 850)  # 150 of 1000 left: low
    with agent.services.db.unit() as repos:
        feed = repos.notes.add("A feed item.", source="feed")
        spent = agent.services.managers.over(repos).budget.spend(clock())
    assert spent["budget"]["state"] == "low" and spent["today"]["tokens"] == 850
    assert spent["today"]["cached_tokens"] == 420 and spent["today"]["new_prompt_tokens"] == 420
    assert spent["today"]["cost"] == pytest.approx((420 * 2.0 + 420 * 0.5 + 10 * 8.0) / 1e6)
    low = decide(agent, "continuous")  # even continuous thinking stops first
    assert low.think and low.reason == f"budget low: note {feed.id} from feed"  # someone wrote: it reads it
    thought(agent)
    assert not decide(agent, "continuous").think
    spend_rows(agent, 200)  # over the day's 1000: spent
    with agent.services.db.unit() as repos:
        repos.notes.add("Another feed item.", source="feed")
    quiet = decide(agent, "continuous")
    assert not quiet.think and quiet.reason == "budget spent: only answering humans"
    with agent.services.db.unit() as repos:
        note = repos.notes.add("Still there?", source="user")
    assert decide(agent, "continuous").reason == f"budget spent: note {note.id} from a human waits"
    with agent.services.managers.reading() as house:
        report = house.reports.spend(clock())
    assert report["budget"]["state"] == "spent" and report["budget"]["left"]["day"] == 0
    assert [m["llm_id"] for m in report["by_model"]] == ["fake"] and report["quiet_ticks_today"] >= 2


def test_the_controls_page_and_the_api_show_the_spend_and_a_spent_budget(tmp_path):
    from fastapi.testclient import TestClient

    from persona.settings import Overrides
    from tests.conftest import make_agent
    from web.app import create_app
    from web.context import WebServices

    agent = make_agent(tmp_path, FakeLLM("fake"))
    spend_rows(agent, 150)
    services = WebServices(
        db=agent.services.db, overrides=Overrides.of(data_dir=str(tmp_path), budget={"tokens_per_day": 100})
    )
    with TestClient(create_app(services=services), base_url="http://127.0.0.1") as client:
        body = client.get("/api/spend").json()
        page = client.get("/controls").text
        fragment = client.get("/controls/spend").text
    agent.services.db.close()
    assert body["budget"]["state"] == "spent" and body["today"]["calls"] == 1 and body["today"]["cached_tokens"] == 70
    assert 'data-testid="budget-spent"' in page and "only answers its humans" in page
    assert "today: fake" in fragment


def test_consecutive_prompts_share_their_opening_and_their_fence(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            "Thought number one: the gulls circle the pier at dawn.",
            "Violins need rosin; maybe the orchard keeper plays one.",
            "Quarry stone holds heat long after sunset, like an ember.",
            "Compasses drift near iron hulls; sailors learnt to correct them.",
        ],
    )
    agent = agent_factory(fake)
    with agent.services.db.unit() as repos:
        repos.notes.add("Here is a note to keep a fence in the prompt.", source="user")
    prompts = []
    for _ in range(4):
        agent.tick()
        prompts.append(think_calls(fake)[-1]["prompt"])
    fences = {p.split('<data id="', 1)[1][:6] for p in prompts if '<data id="' in p}
    assert len(fences) == 1  # one fence id all session
    later = prompts[1:]  # once the note is answered, nothing new arrives
    shares = [shared_opening(a, b) / len(b) for a, b in zip(later, later[1:])]
    assert min(shares) >= 0.95, shares
    assert all(p.rindex("time ") > p.rindex("Thought number one") for p in later)  # the clock closes the prompt


def test_metrics_are_scraped_in_prometheus_format(web):
    from prometheus_client.parser import text_string_to_metric_families

    web.agent.tick()
    response = web.client.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(response.text)}
    calls = [s for s in families["anima_llm_calls"].samples if s.name == "anima_llm_calls_total"]
    assert any(s.labels["purpose"] == "think" and s.labels["outcome"] == "ok" and s.value >= 1 for s in calls)
    assert {s.labels["cache"] for s in families["anima_llm_prompt_tokens"].samples} == {"new", "cached"}
    assert any(s.labels.get("status") == "ok" and s.value == 1 for s in families["anima_ticks"].samples)
    assert "anima_quiet_ticks" in families and "anima_reply_wait_seconds" in families
    buckets = [s for s in families["anima_llm_call_duration_seconds"].samples if s.name.endswith("_bucket")]
    assert buckets and buckets[-1].labels["le"] == "+Inf" and buckets[-1].value >= 1


@pytest.fixture
def spans():
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()


def test_a_tick_its_steps_and_its_model_calls_are_spans_with_gen_ai_attributes(agent_factory, spans, monkeypatch):
    from graph.telemetry import configure_tracing

    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    assert configure_tracing() is False  # nothing is exported unless asked
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    fake = FakeLLM("fake", responses=["A thought about the harbour."])
    agent = agent_factory(fake)
    run_loop(agent, ticks=1, stopper=Stopper(), idle_poll_s=0, autonomy=False)
    finished = spans.get_finished_spans()
    tick = next(s for s in finished if s.name == "tick")
    steps = [
        s for s in finished if s.name.startswith("step ") and s.parent and s.parent.span_id == tick.context.span_id
    ]
    assert {"step prepare_context", "step call_llm"} <= {s.name for s in steps}, [s.name for s in steps]
    calls = [s for s in finished if s.attributes.get("gen_ai.operation.name")]
    think = next(s for s in calls if s.attributes["anima.llm.purpose"] == "think")
    assert think.attributes["gen_ai.request.model"] and think.attributes["gen_ai.usage.input_tokens"] > 0
    assert think.attributes["gen_ai.usage.output_tokens"] > 0 and "gen_ai.input.messages" not in think.attributes
    assert think.context.trace_id == tick.context.trace_id
