"""bench/candidate_lab.py's pieces: which questions it reads as asking for a list, and the per-session diversity that
gathers a list question's hits across sessions (δ 0: the fused order as it is)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bench.candidate_lab import asks_for_list, diverse_top


@pytest.mark.parametrize(
    "question",
    [
        "What books has Melanie read?",
        "Which cities has Jon visited?",
        "What kinds of art does Caroline make?",
        "How many hikes has Joanna been on?",
        "What are some changes Caroline has faced?",
        "What do Jon and Gina both like?",
    ],
)
def test_list_questions_are_read_as_lists(question):
    assert asks_for_list(question)


@pytest.mark.parametrize(
    "question",
    [
        "When did Melanie paint a sunrise?",
        "What does Melanie do to destress?",
        "What is Caroline's identity?",
        "Where did Caroline move from?",
    ],
)
def test_other_questions_are_not(question):
    assert not asks_for_list(question)


def test_a_list_question_gathers_its_hits_across_sessions():
    session = {"a1": 1, "a2": 1, "a3": 1, "b1": 2, "c1": 3}
    score = {"a1": 5.0, "a2": 4.9, "a3": 4.8, "b1": 4.0, "c1": 3.5}
    order = sorted(score, key=score.__getitem__, reverse=True)
    conversation = SimpleNamespace(session=session)
    assert diverse_top(order, score, conversation, 3, 0.0) == ["a1", "a2", "a3"]  # δ 0: by score alone
    assert diverse_top(order, score, conversation, 3, 1.0) == ["a1", "b1", "c1"]  # one per session first
    assert diverse_top(order, score, conversation, 5, 1.0)[3:] == ["a2", "a3"]  # then the rest, by score
