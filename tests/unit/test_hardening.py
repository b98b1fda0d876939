"""Hostile model output: no text of any size or nesting raises out of the parser or a tick, nothing unvalidated runs,
caps hold, the model is told what went wrong, and a tick a step fails in is quarantined instead of replayed."""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from nodes import STEPS
from nodes.commands import parse_commands, registry
from nodes.commands.admission import admit
from nodes.quarantine import MAX_TICK_STARTS
from persona.settings import LimitsSettings
from tests.conftest import make_agent
from tests.fakes.llm import FakeLLM

COMMAND_TYPES = sorted(registry().specs) + ["no.such", "", "x" * 300]
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=50),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=30,
)


@st.composite
def hostile_outputs(draw) -> str:
    """Model output a hostile tester would send: blocks of random commands, deep nesting, huge numbers, junk."""
    kind = draw(st.sampled_from(["block", "tool_call", "deep", "junk", "unterminated"]))
    if kind == "junk":
        return draw(st.text(max_size=2_000))
    if kind == "deep":
        depth = draw(st.integers(min_value=30, max_value=3_000))
        opener = draw(st.sampled_from(["[", '{"a":']))
        closer = "]" if opener == "[" else "}"
        return f'# Commands:\n[{{"type": "notes.add", "args": {{"text": {opener * depth}1{closer * depth}}}}}]\n# End commands'  # noqa: E501
    items = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "type": st.sampled_from(COMMAND_TYPES),
                    "args": st.dictionaries(
                        st.sampled_from(
                            [
                                "text",
                                "id",
                                "responses",
                                "seconds",
                                "tags",
                                "query",
                                "key",
                                "value",
                                "max_ticks",
                                "label",
                                "note_filter",
                                "old",
                                "mode",
                            ]
                        ),
                        json_values,
                        max_size=4,
                    ),
                }
            ),
            max_size=8,
        )
    )
    body = json.dumps(items)
    if kind == "tool_call":
        return "thinking\n" + "".join(
            f"<tool_call>{json.dumps({'name': i['type'], 'arguments': i['args']})}</tool_call>" for i in items
        )
    if kind == "unterminated":
        return "thinking\n# Commands:\n" + body[: draw(st.integers(min_value=0, max_value=len(body)))]
    return f"thinking\n# Commands:\n{body}\n# End commands"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_outputs())
def test_no_output_raises_out_of_the_parser_and_only_valid_arguments_are_admitted(text):
    commands = registry()
    parsed = parse_commands(text, tick=1, aliases=commands.aliases)
    admission = admit(parsed.commands, commands, LimitsSettings())
    assert len(admission.commands) <= LimitsSettings().commands_per_tick
    for entry in admission.commands:
        if "error" in entry:
            assert entry["args"] == {} and entry["status"] in ("unknown", "invalid")
        else:  # what is admitted is exactly what its model accepts, and fits a checkpoint
            assert commands.get(entry["type"]).check(entry["args"]) == entry["args"]
    JsonPlusSerializer().dumps_typed(admission.commands)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=500), st.integers(min_value=1, max_value=5_000))
def test_no_nesting_or_text_raises_out_of_the_parser(prefix, depth):
    for text in (
        prefix + "# Commands:\n" + "[" * depth,
        prefix + "<tool_call>" + '{"a":' * depth,
        prefix + "# Commands:\n" + "[" * depth + "]" * depth + "\n# End commands",
    ):
        parse_commands(text, tick=1)


def test_random_hostile_outputs_never_break_a_tick(tmp_path):
    """One persona, many hostile answers: every tick finishes, and whatever ran had valid arguments."""
    outputs: list[str] = []
    agent = make_agent(tmp_path, FakeLLM("fake", responses=lambda prompt: outputs[-1]))
    statuses = {"executed", "failed", "unknown", "invalid", "refused", "blocked", "unvalidated", "pending_approval"}

    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(hostile_outputs())
    def one_tick(text):
        outputs.append(text)
        state = agent.tick()
        assert agent.last_failure is None, agent.last_failure
        assert {e["status"] for e in state["executed"]} <= statuses
        with agent.services.db.unit() as repos:
            assert repos.ticks.get(state["thread_id"], state["tick"]).status == "ok"

    one_tick()
    with agent.services.db.unit() as repos:
        for row in repos.commands.recent(500):
            if row.status == "executed":
                assert registry().get(row.type).check(row.args) == row.args


def commands_block(*items: tuple[str, dict]) -> str:
    return (
        "thinking\n# Commands:\n"
        + json.dumps([{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(items)])
        + "\n# End commands"
    )


def last_prompt(fake: FakeLLM) -> str:
    return [c for c in fake.calls if c["json_schema"] is None][-1]["prompt"]


def test_an_integer_past_64_bits_is_refused_and_the_persona_keeps_thinking_after_a_restart(tmp_path):
    fake = FakeLLM(
        "fake",
        responses=[
            commands_block(
                ("cycle.set", {"responses": 10**30}), ("notes.add", {"text": "still here", "priority": -(10**25)})
            ),
            "calm",
        ],
    )
    agent = make_agent(tmp_path, fake, checkpointer="sqlite")
    state = agent.tick()
    assert [e["status"] for e in state["executed"]] == ["invalid", "invalid"]
    assert "cycle.set: responses:" in state["executed"][0]["result"]
    agent.close()
    again = make_agent(tmp_path, fake, checkpointer="sqlite")  # the resume reads the checkpoint the tick wrote
    state = again.tick()
    assert state["tick"] == 2 and again.last_failure is None
    assert "cycle.set (c0) invalid: cycle.set: responses:" in last_prompt(fake)  # the model is told
    again.close()


def test_json_nested_a_thousand_deep_is_a_parse_error_the_model_reads(agent_factory):
    deep = "# Commands:\n" + '[{"type": "notes.add", "args": {"text": "x", "meta": ' + "[" * 1000 + "]" * 1000 + "}}]"
    fake = FakeLLM("fake", responses=[deep + "\n# End commands", "calm"])
    agent = agent_factory(fake)
    state = agent.tick()
    assert state["executed"] == [] and any("nested" in e for e in state["parse_errors"])
    agent.tick()
    assert "reading my output: commands JSON: JSON nested too deeply to read" in last_prompt(fake)


def test_bad_arguments_are_refused_with_one_precise_error_each(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            commands_block(
                ("messages.send", {"text": "x" * 900_000}),
                ("notes.add", {"text": {"a": 1}}),
                ("goals.add", {"title": True}),
                ("notes.add", {"text": ["a"]}),
                ("tasks.run", {"id": 1, "max_ticks": 10**12, "retries": 10**9}),
                ("cycle.pause", {"seconds": float("nan")}),
                ("notes.add", {"text": "fine", "tags": "a, b"}),
            ),
            "calm",
        ],
    )
    agent = agent_factory(fake, limits={"output_chars": 1_000_000})
    state = agent.tick()
    by_id = {e["cmd_id"]: (e["status"], e["result"]) for e in state["executed"]}
    assert by_id["c0"] == ("invalid", "messages.send: arguments are 900,012 characters of JSON; at most 20,000")
    assert by_id["c1"] == ("invalid", "notes.add: text: input should be a valid string (got a dict of 1 items)")
    assert by_id["c2"] == ("invalid", "goals.add: title: input should be a valid string (got True)")
    assert by_id["c3"][0] == "invalid" and "text: input should be a valid string" in by_id["c3"][1]
    assert by_id["c4"] == (
        "invalid",
        "tasks.run: max_ticks: input should be less than or equal to 1000 "
        "(got 1000000000000); retries: input should be less than or equal to 10 "
        "(got 1000000000)",
    )
    assert by_id["c5"][0] == "invalid" and "seconds: input should be a finite number" in by_id["c5"][1]
    assert by_id["c6"][0] == "executed"
    with agent.services.db.unit() as repos:
        notes = repos.notes.list(source="llm", limit=10)
        assert [(n.text, n.tags) for n in notes] == [("fine", ["a", "b"])]  # nothing else was stored
        assert not repos.tasks.list()
    agent.tick()
    prompt = last_prompt(fake)
    assert all(f"({cmd_id}) invalid" in prompt for cmd_id in ("c0", "c1", "c2", "c3", "c4", "c5"))


def test_per_tick_caps_drop_the_excess_and_say_so(agent_factory):
    many = [("notes.add", {"text": f"note {i}"}) for i in range(500)]
    starts = [("stelis.start", {"label": f"thread {i}"}) for i in range(10)]
    fake = FakeLLM("fake", responses=[commands_block(*starts[:10]), commands_block(*many), "x" * 300_000, "calm"])
    agent = agent_factory(fake, limits={"output_chars": 200_000})
    state = agent.tick()
    assert [e["type"] for e in state["executed"] if e["status"] == "executed"] == ["stelis.start"]
    assert any("dropped 9 command(s)" in e and "stelis.start ×9" in e for e in state["parse_errors"])
    state = agent.tick()
    assert len(state["executed"]) == 20 and all(e["status"] == "executed" for e in state["executed"])
    assert any(
        "dropped 480 command(s) over this tick's limits (20 commands, 1 stelis.start): notes.add ×480" in e
        for e in state["parse_errors"]
    )
    state = agent.tick()
    assert len(state["response"]) == 200_000
    assert "my answer was cut at 200,000 of its 300,000 characters (limits.output_chars)" in state["parse_errors"]
    agent.tick()
    assert "reading my output: my answer was cut at 200,000" in last_prompt(fake)


def test_every_command_that_did_not_run_reaches_the_next_prompt(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            commands_block(
                ("diary.fly", {}),
                ("diary.read", {"id": 999}),
                ("notes.add", {}),
                ("cycle.mode", {"mode": "x"}),
                ("identity.update", {"text": "I am someone else"}),
            )
            + "\n# Commands:\n[{broken",
            "calm",
        ],
    )
    agent = agent_factory(fake)
    state = agent.tick()
    assert [e["status"] for e in state["executed"]] == ["unknown", "failed", "invalid", "invalid", "pending_approval"]
    agent.tick()
    prompt = last_prompt(fake)
    for line in (
        "diary.fly (c0) unknown",
        "diary.read (c1) failed",
        "notes.add (c2) invalid: notes.add: text: field required",
        "cycle.mode (c3) invalid: cycle.mode: mode: input should be 'auto' or 'manual'",
    ):
        assert line in prompt, line
    assert "waits for my human's approval" in prompt


def test_config_update_refuses_values_outside_the_settings_bounds(agent_factory):
    bad = [
        ("memory.recall_k", -5),
        ("memory.recall_k", 10**9),
        ("memory_manager.lru_limit", 0),
        ("memory_manager.novelty_threshold", math.nan),
        ("emotions", [f"e{chr(97 + i % 26)}x" for i in range(1000)]),
    ]
    fake = FakeLLM("fake", responses=[commands_block(*[("config.update", {"key": k, "value": v}) for k, v in bad])])
    agent = agent_factory(fake, consent={"auto_approve": ["config.update"]})
    state = agent.tick()
    assert [e["status"] for e in state["executed"]] == ["invalid"] * 5  # refused at admission (not after an approval)
    assert "memory.recall_k" in state["executed"][0]["result"]
    assert agent.services.settings.memory.recall_k == 5 and agent.services.settings.memory_manager.lru_limit == 500
    with agent.services.db.unit() as repos:
        assert repos.config.with_prefix("persona/") == {}


def step_that_fails_on(marker: str, name: str = "evaluate_emotion"):
    original = STEPS[name]

    def failing(state, runtime, params=None):
        if marker in state.response:
            raise RuntimeError(f"{name} cannot take this output")
        return original(state, runtime, params)

    return name, failing


def test_a_step_that_fails_quarantines_the_tick_and_a_resume_does_not_replay_it(tmp_path, monkeypatch):
    name, failing = step_that_fails_on("POISON")
    monkeypatch.setitem(STEPS, name, failing)
    fake = FakeLLM(
        "fake", responses=["calm", "POISON " + commands_block(("notes.add", {"text": "from the poison"})), "calm again"]
    )
    agent = make_agent(tmp_path, fake, checkpointer="sqlite")
    agent.tick()
    agent.tick()
    assert agent.last_failure is not None and agent.last_failure.tick == 2 and agent.last_failure.step == name
    assert not agent.interrupted  # nothing pending: the failed step is not run again
    agent.close()
    resumed = make_agent(tmp_path, fake, checkpointer="sqlite")
    state = resumed.tick()
    assert (state["tick"], state["response"], resumed.last_failure) == (3, "calm again", None)
    with resumed.services.db.unit() as repos:
        failed = repos.ticks.get("main", 2)
        assert failed.status == "failed" and failed.summary["step"] == name
        assert "RuntimeError: evaluate_emotion cannot take this output" in failed.summary["error"]
        assert failed.summary["quarantined"]["response"].startswith("POISON")  # stored, for inspect
        assert "answer" not in failed.summary  # never reused
        assert not [n for n in repos.notes.list(limit=20) if "from the poison" in n.text]
    assert "tick 2 failed in step evaluate_emotion: RuntimeError" in last_prompt(fake)
    resumed.close()


def test_a_tick_that_keeps_killing_the_process_is_quarantined_on_the_next_start(tmp_path):
    fake = FakeLLM("fake", responses=["calm"])
    agent = make_agent(tmp_path, fake, checkpointer="sqlite")
    agent.tick()
    with agent.services.db.unit() as repos:  # tick 2 started again and again, the process dying each time
        for _ in range(MAX_TICK_STARTS):
            repos.ticks.start("main", 2, "chat")
        repos.ticks.keep_answer("main", 2, {"response": "the answer that killed it"})
    state = agent.tick()
    assert state["tick"] == 3 and state["response"] == "calm"
    with agent.services.db.unit() as repos:
        row = repos.ticks.get("main", 2)
        assert row.status == "failed" and "started 5 times without finishing" in row.summary["error"]
        assert row.summary["quarantined"] == {"response": "the answer that killed it"}
    agent.close()


def test_help_is_generated_from_the_argument_models(agent_factory):
    fake = FakeLLM("fake", responses=[commands_block(("help.show", {"command": "cycle.pause"}))])
    state = agent_factory(fake).tick()
    assert state["executed"][0]["result"] == (
        '- cycle.pause {"seconds": 30}  (pause between ticks; 0 = none)\n'
        "    arguments: seconds* (number 0..3600, also: s/n/value/pause)"
    )


def test_the_documented_short_forms_still_run_under_the_argument_models(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            commands_block(
                ("abstracts.add", {}),
                ("abstracts.add", {"text": "the tides follow the moon", "tags": "sea"}),
                ("remember", {"content": "plan: watch the tide"}),
                ("diary.add", {"content": "x" * 4_001}),
            )
        ],
    )
    state = agent_factory(fake).tick()
    by_id = {e["cmd_id"]: (e["status"], e["result"]) for e in state["executed"]}
    assert by_id["c0"] == ("executed", "an abstract of my recent thoughts will be made after this tick")
    assert by_id["c1"][0] == "executed" and by_id["c2"][0] == "executed"
    assert by_id["c3"] == (
        "invalid",
        "diary.add: content: string should have at most 4000 characters (got text of 4,001 characters)",
    )
