"""Emotional evaluation: dynamics from emotions × novelty, the anxiety streak, llm_mismatch, vocabulary growth."""

import pytest
from sqlalchemy import select

from memory.models import Message, ProcessLog
from nodes.reflexes.emotion import emotional_dynamics
from tests.fakes.llm import FakeLLM


def emotions_answer(*pairs):
    return {"emotions": [{"emotion": name, "strength": strength, "reason": "r"} for name, strength in pairs]}


def test_dynamics_classification():
    assert emotional_dynamics([("joy", 4), ("anxiety", 1)], 80) == "productive_excitement"
    assert emotional_dynamics([("curiosity", 3), ("anxiety", 4)], 70) == "panicked_novelty"
    assert emotional_dynamics([("boredom", 3)], 10) == "burnout"
    assert emotional_dynamics([("calm", 1)], 20) == "burnout"  # emotions fading, nothing new
    assert emotional_dynamics([("joy", 4)], 20) == "steady"


def test_anxiety_over_three_for_three_ticks_triggers_reflex_lite(agent_factory):
    thoughts = [
        "Storm clouds gather over the harbour tonight.",
        "Ledgers hide small arithmetic mistakes.",
        "Violins need patient fingers.",
        "Glaciers carve valleys slowly.",
        "Orchards smell of cider.",
    ]
    fake = FakeLLM("fake", responses=thoughts, json_answer=emotions_answer(("anxiety", 4), ("curiosity", 2)))
    agent = agent_factory(fake, reflexes={"emotion_from_signals": False})  # the model rates every thought
    states = [agent.tick() for _ in range(3)]
    assert [s["novelty"]["anxiety_streak"] for s in states] == [False, False, True]
    assert (
        states[2]["novelty"]["triggered_actions"] == ["reflex_lite:anxiety"]
        and not states[2]["novelty"]["stagnation_flag"]
    )
    assert states[2]["sampling"]["temperature"] == pytest.approx(states[2]["base_sampling"]["temperature"] + 0.2)
    fake.json_answer = emotions_answer(("calm", 3))
    calm = agent.tick()
    assert calm["sampling"] == calm["base_sampling"] and calm["novelty"]["triggered_actions"] == ["sampling_restored"]
    with agent.services.db.unit() as repos:
        rows = repos.session.scalars(select(Message).where(Message.kind == "response").order_by(Message.id)).all()
        assert [r.meta["dynamics"] for r in rows][:2] == ["panicked_novelty", "panicked_novelty"]
        assert rows[2].triggered_actions == ["reflex_lite:anxiety"]


def test_a_fallback_rating_is_marked_llm_mismatch_and_new_emotions_extend_the_vocabulary(agent_factory):
    main = FakeLLM("main", responses=["A thought about lanterns."])
    backup = FakeLLM("backup", json_answer=emotions_answer(("wistfulness", 3)))
    original = main.complete

    def complete(prompt, sampling, **kwargs):
        if kwargs.get("json_schema") is not None:
            main.down = True  # the author is gone by the time its output is rated
        return original(prompt, sampling, **kwargs)

    main.complete = complete
    agent = agent_factory(main, backup, reflexes={"emotion_from_signals": False})
    state = agent.tick()
    assert state["emotion_eval"] == {"source": "llm", "llm_id": "backup", "llm_mismatch": True}
    assert state["emotions"] == ["wistfulness:3 (r)"]
    with agent.services.db.unit() as repos:
        row = repos.session.get(Message, state["response_id"])
        assert row.meta["llm_mismatch"] is True and row.llm_id == "main"
        assert "wistfulness" in repos.config.get("emotions")
        logged = repos.session.scalars(select(ProcessLog.value).where(ProcessLog.name == "emotions.vocabulary")).all()
    assert logged == ["new emotion(s) added to my vocabulary: wistfulness"]
