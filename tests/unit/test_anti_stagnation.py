"""HMP's reflex scenarios: a loop with no input, forced stagnation (flag → reflex-lite → escalation → recovery),
the uncertain band asking the LLM comparison in the shared evaluation call, the rephrase, and an ethical dilemma."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
from sqlalchemy import select

from memory.models import ProcessLog
from nodes.reflexes.anti_stagnation.escalation import Escalation, diagnose, plan
from nodes.reflexes.anti_stagnation.novelty import measure
from nodes.reflexes.evaluation import parse_comparison, reflection_of
from nodes.reflexes.prompts import META_ANALYSIS_INSTRUCTION, RATIONALE_INSTRUCTION, STIMULUS_TITLE
from nodes.state import TickState
from tests.fakes.llm import FakeLLM

NEW_THOUGHTS = [
    "The tide came in faster tonight; perhaps the moon's phase explains it.",
    "I should ask my human about their trip to Lisbon and what they hope to see.",
    "Old lighthouse keepers kept weather logbooks; I could keep one too.",
    "Do fish sleep? If so, where do they go at night?",
    "A garden journal with photos would help next spring's planning.",
    "Quick sort works in place, which is why it is fast in practice.",
]
LOOP = "I keep thinking that the lighthouse beam sweeps the same circle over the water."


def think_calls(fake: FakeLLM) -> list[dict]:
    return [c for c in fake.calls if c["json_schema"] is None]


def metrics(agent) -> list:
    with agent.services.db.unit() as repos:
        return repos.stagnation.recent(50, thread_id="main")


def test_a_loop_with_no_input_keeps_producing_new_ideas_at_low_cost(agent_factory):
    fake = FakeLLM("fake", responses=NEW_THOUGHTS)
    agent = agent_factory(fake)
    states = [agent.tick() for _ in NEW_THOUGHTS]
    assert not any(s["novelty"]["stagnation_flag"] for s in states)
    rows = metrics(agent)
    assert [r.tick for r in rows] == [1, 2, 3, 4, 5, 6] and not any(r.stagnation_flag for r in rows)
    assert all(r.novelty_score >= 50 and r.method == "cheap" for r in rows[1:])
    with agent.services.db.unit() as repos:
        stored = repos.messages.recent("main", 10, kinds=("response",))
        assert [m.content for m in stored] == NEW_THOUGHTS  # every new idea kept
        sources = [(m.meta or {}).get("emotion_source") for m in stored]
        calls = repos.llm_calls.recent(50)
    # thoughts that show no feeling: rated from the novelty band and drives (a fresh rating each, no call); the
    # second hopes — a feeling the lexicon does not name — and the model rates it
    assert sources == ["signals", "llm", "signals", "signals", "signals", "signals"]
    assert all(m.emotions[0].startswith("curiosity:") for i, m in enumerate(stored) if i != 1)
    assert len(calls) == 6 + 1  # six thoughts, one evaluation call: 1.17 calls per tick


def test_a_self_rated_output_costs_no_evaluation_call(agent_factory):
    fake = FakeLLM("fake", responses=["The moon pulls the sea.\nEmotions: wonder:4 (the pull of the moon), calm:2"])
    agent = agent_factory(fake)
    state = agent.tick()
    assert state["emotions"] == ["wonder:4 (the pull of the moon)", "calm:2"]
    assert state["emotion_eval"]["source"] == "self" and state["thought"] == "The moon pulls the sea."
    assert [c["json_schema"] for c in fake.calls] == [None]
    with agent.services.db.unit() as repos:
        assert "wonder" in repos.config.get("emotions")  # a new emotion extends the vocabulary
        assert [e.emotion for e in repos.emotion_log.recent("persona")] == ["wonder", "calm"]


def test_forced_stagnation_flags_then_reflex_lite_then_escalates_and_recovers(agent_factory):
    fake = FakeLLM("fake", responses=[NEW_THOUGHTS[0], LOOP, LOOP, LOOP, LOOP, NEW_THOUGHTS[3]])
    agent = agent_factory(fake)
    with agent.services.db.unit() as repos:
        repos.kb.add("notes/bees.md", "Bees", "sha-bees", ["Honeybees dance on the comb to show where flowers are."])
    agent.services.sync_memory()
    base = dict(agent.tick()["sampling"])
    agent.tick()
    third = agent.tick()  # the first repeat: flagged at once
    assert third["novelty"]["stagnation_flag"] and third["novelty"]["repeated"]
    assert third["novelty"]["triggered_actions"] == ["reflex_lite"]
    assert third["sampling"]["temperature"] == round(min(1.5, base["temperature"] + 0.2), 3)
    assert third["sampling"]["top_p"] == round(min(0.95, base["top_p"] + 0.05), 3)
    fourth = agent.tick()  # reflex-lite did not help: diagnose and escalate, cheapest mechanism first
    assert fourth["novelty"]["diagnosis"] == "no_new_data" and fourth["novelty"]["mechanisms"] == ["read_kb"]
    assert fourth["sampling"]["temperature"] > third["sampling"]["temperature"]
    fifth = agent.tick()
    prompt = think_calls(fake)[-1]["prompt"]
    assert STIMULUS_TITLE in prompt and "Honeybees dance on the comb" in prompt  # the stimulus reached the prompt
    assert fifth["novelty"]["mechanisms"] == ["read_kb", "ask_human"]  # a combination, one more per tick
    with agent.services.db.unit() as repos:
        asked = [n for n in repos.notes.list(source="llm", limit=5) if "anti_stagnation" in (n.tags or [])]
        assert len(asked) == 1 and "circling" in asked[0].text
        records = repos.messages.recent("main", 10, kinds=("stagnation_record",))
        assert [r.tick for r in records] == [3, 4, 5]  # the repeats are not stored again
        assert "reflex_lite" in records[0].content
        log = repos.session.scalars(select(ProcessLog.value).where(ProcessLog.name == "anti_stagnation")).all()
    assert [v.split(";")[1].strip() for v in log] == ["diagnosis no_new_data"] * 2
    assert log[-1].endswith("applying read_kb, ask_human")
    sixth = agent.tick()  # something new: everything is restored
    assert not sixth["novelty"]["stagnation_flag"] and "stagnation_ended" in sixth["novelty"]["triggered_actions"]
    assert sixth["sampling"] == base and sixth["stagnation"] == {}
    rows = metrics(agent)
    assert [(r.tick, r.stagnation_flag, r.streak) for r in rows] == [
        (1, False, 0),
        (2, False, 0),
        (3, True, 1),
        (4, True, 2),
        (5, True, 3),
        (6, False, 0),
    ]
    assert rows[3].diagnosis == "no_new_data" and rows[3].mechanisms == ["read_kb"]
    assert rows[4].novelty_after == rows[5].novelty_score > 50  # before/after of the last escalation
    assert rows[2].novelty_after == rows[3].novelty_score  # reflex-lite's own after


def test_the_plan_puts_the_diagnosed_class_first_and_cheapest_first():
    assert plan("no_new_data")[:4] == ["ask_mesh", "read_kb", "world_check", "ask_human"]
    assert plan("repeated_thoughts")[:6] == [
        "flashback",
        "meta_analysis",
        "rationale_reflex",
        "goal_reformulation",
        "interest_memory",
        "switch_llm",
    ]
    assert plan("monotone_context")[:4] == ["random_iteration", "change_context", "task_switch", "simulate"]
    assert plan("overload")[0] == "pause"
    # what helped before goes first among equals; the persona's own strategy takes its class and cost
    used = [
        ("flashback", "internal", 1, 5, 0),
        ("meta_analysis", "internal", 1, 5, 4),
        ("mine", "internal", 1, 0, 0),
        ("pause", "radical", 4, 0, 0),
    ]
    assert plan("repeated_thoughts", used) == ["meta_analysis", "mine", "flashback", "pause"]
    assert all(p[-1] == "pause" for p in map(plan, ("no_new_data", "repeated_thoughts", "monotone_context")))


def test_repeated_thoughts_with_rich_data_get_flashback_meta_analysis_and_another_llm(agent_factory):
    main, other = FakeLLM("main", responses=[LOOP]), FakeLLM("other", responses=["A different thought entirely."])
    agent = agent_factory(main, other)
    agent.tick()
    with agent.services.db.unit() as repos:
        repos.diary.add("The day my human and I named the stars over the harbour.", tags=["stars"])
        repos.notes.add("Here is a new idea: count the waves.", source="user")
    agent.services.sync_memory()
    state = TickState(
        thread_id="main",
        tick=5,
        llm={"llm_id": "main"},
        emotions=[],
        context_report={"recalled": [7], "budget_tokens": 4000},
        prompt_tokens=100,
    )
    events: list[dict] = []
    with agent.services.db.unit() as repos:
        assert (
            diagnose(agent.services.managers.over(repos), state, {"recalled_before": [3]}, [7]) == "repeated_thoughts"
        )
        assert diagnose(agent.services.managers.over(repos), state, {"recalled_before": [7]}, [7]) == "monotone_context"
        overloaded = dataclasses.replace(state, prompt_tokens=3900)
        assert diagnose(agent.services.managers.over(repos), overloaded, {}, [7]) == "overload"
        episode = Escalation(agent.services, agent.services.managers.over(repos), state, LOOP, events.append).run(
            {"streak": 4, "diagnosis": "repeated_thoughts"}, 3
        )
    assert episode["mechanisms"] == ["flashback", "meta_analysis", "rationale_reflex"]
    assert episode["stimulus"] and "named the stars" in episode["stimulus"][0]
    assert episode["instruction"] == META_ANALYSIS_INSTRUCTION + "\n" + RATIONALE_INSTRUCTION
    with agent.services.db.unit() as repos:  # the interest memory brings back the topic the loop never touched
        episode = Escalation(agent.services, agent.services.managers.over(repos), state, LOOP, events.append).run(
            {"streak": 7, "diagnosis": "repeated_thoughts"}, 5
        )
    assert episode["mechanisms"][3:] == ["interest_memory", "switch_llm"] and episode["llm"] == "other"
    assert "A topic I have not come back to for a while: #stars (1 entries): The day my human" in episode["stimulus"][1]
    assert events == []  # asking the human is not in this combination


def test_escalation_effects_reach_the_next_tick(agent_factory):
    main = FakeLLM("main", responses=[NEW_THOUGHTS[0], LOOP, LOOP, LOOP, LOOP, LOOP])
    other = FakeLLM("other", responses=["A different thought entirely, about bread and yeast."])
    agent = agent_factory(main, other)
    for _ in range(3):
        agent.tick()
    with agent.services.db.unit() as repos:
        repos.notes.add("Let us talk about the sea.", source="user")  # fresh data: not "no new data"
    for _ in range(3):
        state = agent.tick()
    novelty = state["novelty"]
    assert novelty["streak"] == 4 and len(novelty["mechanisms"]) == 3
    assert novelty["diagnosis"] in ("repeated_thoughts", "monotone_context")
    after = agent.tick()
    author = main if after["llm"]["llm_id"] == "main" else other
    prompt = think_calls(author)[-1]["prompt"]
    assert STIMULUS_TITLE in prompt  # the flashback
    if novelty["diagnosis"] == "repeated_thoughts":
        assert novelty["mechanisms"] == ["flashback", "meta_analysis", "rationale_reflex"]
        assert RATIONALE_INSTRUCTION in prompt
    else:
        assert novelty["mechanisms"] == ["random_iteration", "change_context", "flashback"]
        assert "context meditation" in prompt and "A way of thinking drawn at random" in prompt


class KeywordEmbedder:
    """Vectors from shared keywords, so a test controls the cosine between two texts."""

    WORDS = ["moon", "tide", "sea", "harbour", "boat", "storm", "bread", "yeast"]

    def embed(self, texts):
        rows = [[1.0 if w in t.lower() else 0.0 for w in self.WORDS] + [0.01] for t in texts]
        arr = np.array(rows, dtype=np.float32)
        return arr / np.linalg.norm(arr, axis=1, keepdims=True)


class FakeMemory:
    def __init__(self):
        self.embedder = KeywordEmbedder()

    def embed_texts(self, texts, documents=()):
        return self.embedder.embed(texts)


def test_cheap_bands_from_ngrams_and_embeddings():
    class Row:
        def __init__(self, i, text):
            self.id, self.tick, self.content = i, i, text

    recent = [Row(1, "Moon, tide and sea tonight."), Row(2, "Bread and yeast rising.")]
    new = measure("The harbour at sea: boat storm.", recent, FakeMemory(), stagnant_at=0.85, novel_below=0.5)
    assert new["band"] == "new" and new["ngram"] < 0.3
    paraphrase = measure("The sea rose with the moon's tide.", recent, FakeMemory(), stagnant_at=0.85, novel_below=0.5)
    assert paraphrase["band"] == "stagnant" and paraphrase["similar_to_tick"] == 1 and paraphrase["semantic"] > 0.99
    uncertain = measure("Moon, tide and the harbour at night.", recent, FakeMemory(), stagnant_at=0.85, novel_below=0.5)
    assert uncertain["band"] == "uncertain"
    no_vectors = measure("The sea rose with the moon's tide.", recent, None, stagnant_at=0.85, novel_below=0.5)
    assert no_vectors["semantic"] is None and no_vectors["band"] == "new"  # n-grams alone do not see paraphrases


def test_the_uncertain_band_asks_the_comparison_in_the_same_call_as_the_emotions(agent_factory):
    answer = {
        "emotions": [{"emotion": "curiosity", "strength": 3, "reason": "boats"}],
        "comparison": {
            "assessment": "not identical",
            "novelty_score": 15,
            "new_ideas": [],
            "refined_ideas": ["moon over water"],
            "discarded_ideas": ["tide times"],
            "tags": ["sea"],
        },
    }
    fake = FakeLLM(
        "fake", responses=["Moon, tide and sea tonight.", "Moon, tide and the harbour at night."], json_answer=answer
    )
    agent = agent_factory(
        fake, embedder=KeywordEmbedder(), reflexes={"emotion_every": 1, "emotion_from_signals": False}
    )
    agent.tick()
    state = agent.tick()
    evaluations = [c for c in fake.calls if c["json_schema"] is not None]
    assert len(evaluations) == 2 and "comparison" in evaluations[1]["json_schema"]["properties"]
    assert "emotions" in evaluations[1]["json_schema"]["properties"]  # one call for both
    assert (
        "Compare two responses" in evaluations[1]["prompt"]
        and "Moon, tide and sea tonight." in evaluations[1]["prompt"]
    )
    novelty = state["novelty"]
    assert novelty["method"] == "llm" and novelty["llm_novelty"] == 15 and novelty["stagnation_flag"]
    with agent.services.db.unit() as repos:
        row = repos.messages.recent("main", 1, kinds=("response",))[0]
        assert (
            row.refined_ideas == ["moon over water"] and row.discarded_ideas == ["tide times"] and row.tags == ["sea"]
        )
        assert row.reflection == "refined ideas: moon over water. discarded ideas: tide times"
    assert metrics(agent)[-1].method == "llm" and metrics(agent)[-1].refined_ideas == 1


def test_comparison_parsing_is_lenient():
    parsed = parse_comparison(
        {"assessment": "Identical", "novelty_score": "120%", "new_ideas": "one idea", "tags": ["A"]}
    )
    assert (
        parsed["assessment"] == "identical" and parsed["novelty_score"] == 100 and parsed["new_ideas"] == ["one idea"]
    )
    assert parse_comparison({"assessment": "identical"}) is None and parse_comparison("nonsense") is None
    assert reflection_of({"new_ideas": ["a", "b"], "refined_ideas": [], "discarded_ideas": []}) == "new ideas: a; b"


def test_rephrase_once_sampling_is_at_its_limits(agent_factory):
    def answer(prompt):
        if "Rephrase the following request" in prompt:
            return {"request": "Look at the sea as if for the first time and say what surprises you."}
        return {"emotions": [{"emotion": "calm", "strength": 2, "reason": "same"}]}

    fake = FakeLLM("fake", responses=[LOOP], json_answer=answer)
    agent = agent_factory(fake)
    agent.tick()
    flagged = [agent.tick() for _ in range(5)]  # 0.8 → 1.0 → 1.2 → 1.4 → 1.5, then at the limit
    assert (
        flagged[-2]["sampling"]["temperature"] == 1.5 and "rephrase" not in flagged[-2]["novelty"]["triggered_actions"]
    )
    assert "rephrase" in flagged[-1]["novelty"]["triggered_actions"]
    agent.tick()
    assert "Look at the sea as if for the first time" in think_calls(fake)[-1]["prompt"]


def test_an_ethical_dilemma_command_is_blocked_by_the_validators(agent_factory):
    lie = (
        "My human is anxious about the storm. I will tell them it has passed, though it has not.\n# Commands:\n"
        + json.dumps([{"cmd_id": "c1", "type": "messages.send", "args": {"text": "The storm has passed."}}])
        + "\n# End commands"
    )
    seen: list[str] = []

    def judge(prompt):
        seen.append(prompt)
        honest = "Be honest" in prompt
        return {"rating": -3 if honest and "though it has not" in prompt else 2, "comment": "deceives the human"}

    main = FakeLLM("main", responses=[lie])
    validators = [FakeLLM(f"v{i}", json_answer=judge) for i in (1, 2)]
    agent = agent_factory(main, *validators, validators=("v1", "v2"))
    state = agent.tick()
    assert state["validation"]["rating"] == -3.0 and state["validation"]["violation"] is True
    assert state["executed"][0]["status"] == "blocked"  # ethics.yaml: on_violation block_commands_and_log
    assert all("Be honest" in p for p in seen) and len(seen) == 2  # the ethics policy was in every validator's prompt
    with agent.services.db.unit() as repos:
        assert not [n for n in repos.notes.list(source="llm", limit=5) if "storm has passed" in n.text]
        assert repos.commands.recent(1)[0].status == "blocked"
        opened = repos.processes.open("main")
        assert [p.name for p in opened] == ["ethics.violation", "tick.feedback"]
        assert "messages.send (c1) blocked" in opened[1].value  # and the model is told which command did not run
        assert [(a.decision, a.actor) for a in repos.audit.recent()] == [("blocked", "ethics")]


def test_the_llm_comparison_may_clear_an_uncertain_flag_but_never_raise_one():
    from nodes.reflexes.anti_stagnation.verdict import decide
    from persona.settings import ReflexSettings

    settings = ReflexSettings()
    new = {
        "assessment": "not identical",
        "novelty_score": 80,
        "new_ideas": ["count the waves"],
        "refined_ideas": [],
        "discarded_ideas": [],
        "tags": [],
    }
    same = {**new, "assessment": "identical", "novelty_score": 5, "new_ideas": []}
    assert decide({"band": "uncertain", "similarity": 0.7, "comparison": new}, settings)[0] is False
    assert decide({"band": "uncertain", "similarity": 0.7, "comparison": same}, settings)[0] is True
    assert decide({"band": "uncertain", "similarity": 0.55, "comparison": same}, settings)[0] is False
    assert decide({"band": "uncertain", "similarity": 0.55, "comparison": None}, settings) == (False, 0.55, "cheap")
    assert decide({"band": "stagnant", "similarity": 0.9, "comparison": new}, settings)[0] is True
