"""Every LLM failure is classified, recorded and failed over; a stop cancels a model call and the tick resumes;
a note from the human ends a pause. In process, with the fake LLMs (the real server is in tests/integration)."""

import threading

import pytest

from graph.loop import Stopper, run_loop
from llm import AllLLMsUnavailable, LLMCancelled, LLMRegistry, LLMUnavailable
from llm.base import AUTH, BAD_REQUEST, RATE_LIMITED
from tests.fakes.llm import FakeLLM

HANG_GUARD_S = 60  # a broken wake-up or cancel would otherwise wait an hour; this bounds the test, not the code


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Failing(FakeLLM):
    def __init__(self, id: str, error: Exception):
        super().__init__(id)
        self.error = error
        self.asked = 0

    def complete(self, prompt, sampling, **kwargs):
        self.asked += 1
        raise self.error


def registry(*providers, clock=None) -> tuple[LLMRegistry, list[dict]]:
    calls: list[dict] = []
    entries = [{"id": p.id, "provider": "fake", "priority": 10 - i} for i, p in enumerate(providers)]
    return LLMRegistry(
        entries, recorder=calls.append, providers={p.id: p for p in providers}, clock=clock or FakeClock()
    ), calls


def test_an_unexpected_provider_error_fails_over_and_is_recorded_not_raised():
    broken = Failing("server", ValueError("No generation chunks were returned"))
    llms, calls = registry(broken, FakeLLM("backup", responses=["Backup thinking."]))
    gen = llms.generate("think", prompt="hello")
    assert (gen.llm_id, gen.failed_over_from) == ("backup", ["server"])
    failed = [c for c in calls if not c["ok"]]
    assert failed[0]["llm_id"] == "server" and failed[0]["error"].startswith("error: server: ValueError: No generation")
    llms.generate("think", prompt="again")
    assert broken.asked == 2  # our side or the request failed, not the model: it is not set aside


@pytest.mark.parametrize(
    "kind, retry_after, set_aside_s",
    [
        (AUTH, None, 300.0),  # a wrong key: the longest backoff
        (RATE_LIMITED, 120.0, 120.0),  # the server's Retry-After
        ("outage", None, 5.0),  # the first step of the growing backoff
    ],
)
def test_a_failure_sets_the_model_aside_as_long_as_its_kind_says(kind, retry_after, set_aside_s):
    clock = FakeClock()
    server = Failing("server", LLMUnavailable("scripted", kind=kind, retry_after=retry_after))
    llms, calls = registry(server, FakeLLM("backup"), clock=clock)
    assert llms.generate("think", prompt="x").llm_id == "backup"
    assert calls[0]["error"] == f"{kind}: scripted"
    clock.now += set_aside_s - 1
    llms.generate("think", prompt="x")
    assert server.asked == 1
    clock.now += 2
    llms.generate("think", prompt="x")
    assert server.asked == 2


def test_a_refused_request_fails_over_without_setting_the_model_aside():
    server = Failing("server", LLMUnavailable("HTTP 400", kind=BAD_REQUEST))
    llms, _ = registry(server, FakeLLM("backup"))
    llms.generate("think", prompt="x")
    llms.generate("think", prompt="x")
    assert server.asked == 2


def test_no_model_answering_is_all_unavailable_with_each_reason():
    llms, _ = registry(Failing("a", LLMUnavailable("HTTP 401", kind=AUTH)), Failing("b", OSError("disk")))
    with pytest.raises(AllLLMsUnavailable, match=r"auth: HTTP 401; error: b: OSError: disk"):
        llms.generate("think", prompt="x")


def test_a_set_cancel_event_stops_before_any_model_is_asked_and_is_not_an_outage():
    fake = FakeLLM("main")
    llms, calls = registry(fake)
    stop = threading.Event()
    with llms.cancel_when(stop):
        stop.set()
        with pytest.raises(LLMCancelled):
            llms.generate("think", prompt="x")
    assert fake.calls == [] and calls == []
    assert llms.generate("think", prompt="x").llm_id == "main"  # outside the run, the registry answers again


class HangsUntilCancelled(FakeLLM):
    """A model that never answers: it asks the run to stop (as a signal would) and waits for the cancel."""

    def __init__(self, id: str, stopper: Stopper):
        super().__init__(id, responses=["Resumed thinking."])
        self.stopper = stopper
        self.hang = True

    def complete(self, prompt, sampling, *, cancel=None, **kwargs):
        if self.hang and kwargs.get("json_schema") is None:
            self.stopper.request("interrupt")
            assert cancel is not None and cancel.wait(HANG_GUARD_S)
            raise LLMCancelled(f"{self.id}: cancelled")
        return super().complete(prompt, sampling, cancel=cancel, **kwargs)


def test_a_stop_during_the_model_call_interrupts_the_tick_which_resumes_next_run(agent_factory):
    stopper = Stopper()
    model = HangsUntilCancelled("main", stopper)
    agent = agent_factory(model)
    result = run_loop(agent, ticks=1, stopper=stopper, idle_poll_s=0)
    assert result.interrupted and result.ticks_run == 0
    assert agent.interrupted and agent.graph.get_state(agent.config).next == ("call_llm",)
    with agent.services.db.unit() as repos:
        assert repos.messages.recent("main", 5) == []  # nothing of the interrupted step is stored
        assert repos.ticks.kept_answer("main", 1) is None
        assert [c.error for c in repos.llm_calls.recent(5)] == ["cancelled: the run was stopped"]
        assert not [p for p in repos.processes.open("main") if p.name == "llm.outage"]  # not degraded
    model.hang = False
    result = run_loop(agent, ticks=1, stopper=Stopper(), idle_poll_s=0)
    assert result.ticks_run == 1 and not result.interrupted and not agent.interrupted
    assert result.last_state["response"] == "Resumed thinking." and result.last_state["tick"] == 1


def test_a_note_from_the_human_ends_a_long_pause(agent_factory):
    pause = '# Commands:\n[{"cmd_id": "t1-1", "type": "cycle.pause", "args": {"seconds": 3600}}]\n# End commands'
    fake = FakeLLM("main", responses=["I rest for an hour.\n" + pause, "I read the note."])
    agent = agent_factory(fake)
    stopper = Stopper()
    note_written = threading.Event()

    def write_note_when_the_tick_closes(mode, data):
        if mode == "updates" and "execute_commands" in data and not note_written.is_set():
            with agent.services.db.unit() as repos:
                repos.notes.add("Wake up, there is news.", source="cli")
            note_written.set()

    outcome: dict = {}
    loop = threading.Thread(
        target=lambda: outcome.update(
            result=run_loop(
                agent,
                ticks=2,
                stopper=stopper,
                on_stream=write_note_when_the_tick_closes,
                idle_poll_s=0,
                note_poll_s=0.05,
            )
        )
    )
    loop.start()
    try:
        loop.join(HANG_GUARD_S)
        assert not loop.is_alive(), "the pause did not end when the note arrived"
    finally:
        stopper.request()
        loop.join(HANG_GUARD_S)
    result = outcome["result"]
    assert result.ticks_run == 2 and not result.interrupted
    assert result.last_state["pause_s"] == 3600
    thoughts = [c["prompt"] for c in fake.calls if c["json_schema"] is None]
    assert len(thoughts) == 2 and "Wake up, there is news." in thoughts[1]
