"""Property: context preparation never exceeds a thread's window = model window × Π window_ratio of its
Stelis lineage, whatever the nesting and the message sizes (hypothesis)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graph.services import open_services
from managers.threads import MIN_CHILD_WINDOW, StelisRefused
from nodes.context import AnimaContext, ContextBudgetError
from nodes.kinds.ask_llm import fit_prompt
from nodes.state import TickState
from nodes.stelis.threads import open_thread, thread_window
from nodes.steps.s04_prepare_context import prepare_context, shown_text
from tests.fakes.llm import FakeLLM
from tests.fakes.memory import HashEmbedder

sizes = st.integers(min_value=0, max_value=30_000)  # characters (≈ 4 per token)
thread_spec = st.fixed_dictionaries(
    {
        "ratio": st.floats(min_value=0.2, max_value=1.0),
        "messages": st.lists(sizes, max_size=6),
        "notes": st.lists(sizes, max_size=3),
    }
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    window=st.integers(min_value=1_500, max_value=200_000),
    lineage=st.lists(thread_spec, min_size=1, max_size=5),
    max_tokens=st.integers(min_value=16, max_value=4_096),
    mode=st.sampled_from(["chat", "continuation"]),
)
def test_prepared_context_never_exceeds_the_thread_window(window, lineage, max_tokens, mode):
    fake = FakeLLM("fake", context_window=window)
    services = open_services(
        db_url="sqlite://",
        embedded=False,
        providers={"fake": fake},
        embedder=HashEmbedder(),
        entries=[{"id": "fake", "provider": "fake", "priority": 100}],
    )
    services.memory = (
        None  # recall under the budget is covered in test_memory; here a Chroma per example costs too much
    )
    try:
        thread_id, product = "main", 1.0
        with services.db.unit() as repos:
            repos.threads.ensure("main", origin="root")
            for depth, spec in enumerate(lineage):
                if depth:  # lineage[0] describes the root thread; the rest are nested Stelis children
                    try:
                        child, _, _ = open_thread(
                            services,
                            repos,
                            parent_id=thread_id,
                            child_id=f"{thread_id}/{depth}",
                            label=f"level {depth}",
                            window_ratio=spec["ratio"],
                            max_depth=10,
                            origin="command",
                        )
                    except StelisRefused:
                        assert int(window * product * spec["ratio"]) < MIN_CHILD_WINDOW
                        break
                    thread_id, product = child.id, product * spec["ratio"]
                kind = "continuation" if mode == "continuation" else "response"
                for n, size in enumerate(spec["messages"]):
                    repos.messages.add(thread_id=thread_id, tick=n, kind=kind, content="w" * size)
                for size in spec["notes"]:
                    repos.notes.add("n" * size, source="user")
            expected_window = int(window * product)
            assert thread_window(services, repos, thread_id) == expected_window
        state = TickState(thread_id=thread_id, tick=1, mode=mode, sampling={"max_tokens": max_tokens})
        runtime = SimpleNamespace(context=AnimaContext(services=services))
        try:
            out = prepare_context(state, runtime)
        except ContextBudgetError:
            assert expected_window < 200  # only a window too small for the instruction itself
            return
        answer = out["context_report"]["max_tokens"]
        assert out["prompt_tokens"] + answer <= expected_window
        if out["prompt_messages"]:
            assert sum(fake.count_tokens(m["content"]) for m in out["prompt_messages"]) + answer <= expected_window
        shown = set(out["incoming_note_ids"])
        rendered = out["prompt"]
        with services.db.unit() as repos:  # a note counted as shown is really in the prompt (it will be marked read):
            # whole, or a long one's head and tail (the whole note is kept in memory)
            assert all(shown_text(repos.notes.get(i).text) in rendered for i in shown)
    finally:
        services.db.close()


@settings(max_examples=80, deadline=None)
@given(
    history=st.lists(st.integers(min_value=0, max_value=20_000), max_size=12),
    long_var=st.integers(min_value=0, max_value=60_000),
    budget=st.integers(min_value=50, max_value=20_000),
)
def test_llm_node_prompt_fits_its_budget_or_says_why(history, long_var, budget):
    count = FakeLLM("fake").count_tokens
    items = [f"item{i} " + "h" * size for i, size in enumerate(history)]
    scope = {"topic": "tides", "notes": "x" * long_var}
    try:
        prompt, _, drops = fit_prompt(
            "{{ history }}\nTopic: {{ topic }}\nNotes: {{ notes }}\nAnswer:", None, scope, items, budget, count
        )
    except ContextBudgetError as exc:
        assert "budget" in str(exc)
        assert count("\nTopic: tides\nNotes: \nAnswer:") + 40 > budget  # only when the template alone cannot fit
        return
    assert count(prompt) <= budget
    kept = [item for item in items if item in prompt]
    assert kept == items[len(items) - len(kept) :]  # history loses its oldest items first, never cuts one
    if long_var and "x" * long_var not in prompt:
        assert any(d.startswith("variable notes") for d in drops) and "tokens left out to fit the window" in prompt


def test_window_shrinks_multiplicatively_down_the_lineage(agent_factory):
    agent = agent_factory(FakeLLM("fake", context_window=100_000))
    services = agent.services
    with services.db.unit() as repos:
        a, wa, _ = open_thread(
            services,
            repos,
            parent_id="main",
            child_id="main/a",
            label="a",
            window_ratio=0.8,
            max_depth=3,
            origin="command",
        )
        b, wb, _ = open_thread(
            services,
            repos,
            parent_id=a.id,
            child_id="main/a/b",
            label="b",
            window_ratio=0.8,
            max_depth=3,
            origin="command",
        )
        assert (thread_window(services, repos, "main"), wa, wb) == (100_000, 80_000, 64_000)
        with pytest.raises(StelisRefused, match="over max_depth 2"):
            open_thread(
                services,
                repos,
                parent_id=b.id,
                child_id="main/a/b/c",
                label="c",
                window_ratio=0.8,
                max_depth=2,
                origin="command",
            )


def test_a_small_window_gets_a_smaller_command_guide_and_keeps_room_for_the_dream_strategy(tmp_path):
    from tests.conftest import make_agent

    def prompt_with(window: int) -> str:
        agent = make_agent(
            tmp_path / str(window), FakeLLM("fake", context_window=window, responses=["I watch the tide."])
        )
        with agent.services.db.unit() as repos:
            repos.insights.add("The sea teaches patience.", strategy="Ask one question a day.")
        prompt = agent.tick()["prompt"]
        agent.close()
        return prompt

    tiny, small, large = prompt_with(2048), prompt_with(8192), prompt_with(32768)
    assert 'goals.add {"title"' in large and 'goals.add {"title"' not in small
    assert "goals.add|delete|list|read|update — " in small  # the family is still named, help.show has the rest
    assert 'messages.send {"text": "…"}' in small  # what the persona needs word for word stays
    search = next(line for line in small.splitlines() if line.startswith("- search."))
    assert "OFF: search.web: no search backend is configured" in search  # what cannot run is still said
    # the embedded default's window: a line per family with its most used commands, and the example of a block
    assert "- goals: goals.add, tasks.add, tasks.update, …" in tiny and "goals.add|delete" not in tiny
    assert '"type": "messages.send", "args": {"text": "Hello!"}' in tiny
    for prompt in (tiny, small):
        assert "# Strategy from my last dream\nAsk one question a day." in prompt
