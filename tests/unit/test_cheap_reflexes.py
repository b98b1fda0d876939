"""Fewer model calls per tick (issue 32): the emotion of a thought that shows no feeling comes from the tick's
signals, the novelty comparison is asked only where it can change the verdict, and the open questions are put to
the model only when the conversation touches them. Each cheap path, and the ambiguous cases that still ask."""

from __future__ import annotations

from types import SimpleNamespace

from nodes.reflexes.anti_stagnation.verdict import comparison_decides
from nodes.reflexes.emotion import signal_rating
from persona.drives import touched_questions
from persona.settings import ReflexSettings
from tests.fakes.llm import FakeLLM
from tests.unit.test_anti_stagnation import KeywordEmbedder

VOCABULARY = ["joy", "curiosity", "calm", "sadness", "anxiety", "boredom", "tenderness"]
RATED = {"emotions": [{"emotion": "sadness", "strength": 3, "reason": "a heavy heart"}]}


def json_calls(fake: FakeLLM) -> list[dict]:
    return [c for c in fake.calls if c["json_schema"] is not None]


def test_signal_rating_reads_the_novelty_band_and_the_felt_drive():
    new = signal_rating(
        "Octopuses have three hearts and blue blood.",
        {"band": "new", "similarity": 0.1},
        VOCABULARY,
        drives={"dominant": "devotion", "level": 0.7, "inject_at": 0.4},
        human_spoke=False,
        previous=[],
    )
    assert new == ["curiosity:3 (a new thought)", "tenderness:2 (devotion drive at 0.70)"]
    close = signal_rating(
        "The tide again, a little later tonight.",
        {"band": "uncertain", "similarity": 0.55},
        VOCABULARY,
        drives={"dominant": "boredom", "level": 0.2, "inject_at": 0.4},
        human_spoke=False,
        previous=None,
    )
    assert close == ["calm:2 (a thought close to an earlier one)"]  # a drive below inject_at is not felt
    again = signal_rating(
        "The tide again.",
        {"band": "stagnant", "similarity": 0.9},
        ["calm"],
        drives=None,
        human_spoke=False,
        previous=None,
    )
    assert again == ["calm:2 (the same thought again)"]  # no boredom in this vocabulary: calm


def test_signal_rating_leaves_the_ambiguous_to_the_model():
    calm = {"band": "new", "similarity": 0.2}
    assert (
        signal_rating("My heart is heavy tonight.", calm, VOCABULARY, drives=None, human_spoke=False, previous=[]) == []
    )
    assert signal_rating("What a sea tonight!", calm, VOCABULARY, drives=None, human_spoke=False, previous=[]) == []
    assert signal_rating("Bread and yeast.", calm, VOCABULARY, drives=None, human_spoke=True, previous=[]) == []
    assert (
        signal_rating(
            "Bread and yeast.", calm, VOCABULARY, drives=None, human_spoke=False, previous=["anxiety:4 (the storm)"]
        )
        == []
    )  # whether the anxiety passed is the model's call
    assert signal_rating("Bread and yeast.", calm, ["joy"], drives=None, human_spoke=False, previous=[]) == []


def test_the_comparison_is_asked_only_where_it_can_clear_a_flag():
    settings = ReflexSettings()
    assert comparison_decides({"band": "uncertain", "similarity": 0.7}, settings)
    assert not comparison_decides({"band": "uncertain", "similarity": 0.55}, settings)  # not flagged either way
    assert not comparison_decides({"band": "new", "similarity": 0.1}, settings)
    assert not comparison_decides({"band": "stagnant", "similarity": 0.9}, settings)
    assert not comparison_decides({"band": "uncertain", "similarity": 0.7}, ReflexSettings(compare_with_llm=False))


def test_feelingless_thoughts_cost_one_call_per_tick_and_are_rated_from_signals(agent_factory):
    thoughts = [
        "Octopuses have three hearts and blue blood.",
        "Old maps were drawn from ships' logs.",
        "Quick sort works in place.",
    ]
    fake = FakeLLM("fake", responses=thoughts, json_answer=RATED)
    agent = agent_factory(fake)
    states = [agent.tick() for _ in thoughts]
    assert json_calls(fake) == [] and len(fake.calls) == 3  # one call per tick: the thought
    assert all(s["emotion_eval"]["source"] == "signals" for s in states)
    assert states[1]["emotions"][0].startswith("curiosity:")  # a new thought
    with agent.services.db.unit() as repos:
        stored = repos.messages.recent("main", 5, kinds=("response",))
        assert [(m.meta or {}).get("emotion_source") for m in stored] == ["signals"] * 3
        assert "curiosity" in [e.emotion for e in repos.emotion_log.recent("persona")]


def test_a_feeling_the_lexicon_cannot_name_and_a_human_note_still_ask_the_model(agent_factory):
    fake = FakeLLM(
        "fake", responses=["My heart is heavy tonight.", "Bread rises slowly in the warm kitchen."], json_answer=RATED
    )
    agent = agent_factory(fake)
    felt = agent.tick()
    assert felt["emotion_eval"]["source"] == "llm" and felt["emotions"] == ["sadness:3 (a heavy heart)"]
    with agent.services.db.unit() as repos:
        repos.notes.add("Tell me about bread.", source="user")
    answered = agent.tick()
    assert answered["emotion_eval"]["source"] == "llm"  # a human spoke: the model rates the answer
    assert [("emotions" in c["json_schema"]["properties"]) for c in json_calls(fake)] == [True, True]


def test_a_similar_thought_below_the_flag_line_asks_no_comparison(agent_factory):
    fake = FakeLLM(
        "fake", responses=["Moon, tide and sea tonight.", "Moon and tide over the harbour, a boat."], json_answer=RATED
    )
    agent = agent_factory(fake, embedder=KeywordEmbedder(), reflexes={"emotion_every": 1})
    agent.tick()
    state = agent.tick()
    signals = state["novelty"]
    assert 0.5 <= signals["max_similarity"] < 0.62 and not signals["stagnation_flag"]  # uncertain, not flagged
    assert signals["method"] == "cheap" and json_calls(fake) == []  # embeddings decided; no model call at all


def test_touched_questions_share_a_content_word_with_the_conversation():
    questions = [
        SimpleNamespace(id=1, topic="What is my human's favourite book?", context=None),
        SimpleNamespace(id=2, topic="Why is the sea salty?", context="tides"),
        SimpleNamespace(id=3, topic="How do lighthouses work?", context=None),
    ]
    talk = "User: My favourite books are about lighthouse keepers.\nLumen: Tell me more!"
    assert [q.id for q in touched_questions(talk, questions)] == [1, 3]
    assert touched_questions("User: What do you think about today?", questions) == []


def test_a_conversation_that_touches_no_open_question_costs_no_call(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=["Good morning to you too."],
        json_answer=lambda prompt: {"resolved": [{"id": 1, "answer": "x"}]} if "open questions" in prompt else RATED,
    )
    agent = agent_factory(fake)
    with agent.services.db.unit() as repos:
        repos.questions.add("Why is the sea salty?", priority=0.9)
        repos.notes.add("Good morning! What will you do today?", source="user")
    agent.tick()
    agent.tick()  # the conversation would be judged now
    assert not [c for c in json_calls(fake) if "open questions" in c["prompt"]]
    with agent.services.db.unit() as repos:
        assert [q.status for q in repos.questions.list()] == ["open"]
        assert repos.config.resolution_note_pointer is not None  # looked at: not asked again next tick
