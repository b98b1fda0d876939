"""bench/locomo.py's plain-BM25 reference and its metrics: the reference ranks the turn that shares the question's
rare words first, and recall@k / MRR / per-category figures are what the rankings give."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bench.locomo import bm25_ranking, ranking_metrics

AT = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
TURNS = [
    {"ref": "D1:1", "author": "Caroline", "text": "I went to a support group yesterday.", "at": AT},
    {"ref": "D1:2", "author": "Melanie", "text": "I painted a sunrise over the lake last week.", "at": AT},
    {"ref": "D1:3", "author": "Caroline", "text": "The pottery class starts on Monday.", "at": AT},
]


def test_bm25_reference_ranks_the_turn_with_the_questions_rare_words_first():
    assert bm25_ranking(TURNS, "What did Melanie paint over the lake?")[0] == "D1:2"
    assert bm25_ranking(TURNS, "When does the pottery class start?")[0] == "D1:3"
    assert sorted(bm25_ranking(TURNS, "pottery")) == ["D1:1", "D1:2", "D1:3"]  # every turn ranked, none lost


def test_ranking_metrics_give_recall_at_k_mrr_and_categories():
    rankings = [
        (1, ["a", "x", "b", "y"], {"a", "b"}),  # multi-hop: one of two evidence turns at 1, the other at 3
        (4, ["x", "y", "c"], {"c"}),  # single-hop: found at rank 3
        (4, ["x", "y", "z"], {"d"}),  # single-hop: not found
    ]
    got = ranking_metrics(rankings, [1, 2, 3])
    assert got["recall@1"] == pytest.approx(round((0.5 + 0 + 0) / 3, 4))
    assert got["recall@3"] == pytest.approx(round((1 + 1 + 0) / 3, 4))
    assert got["mrr@3"] == pytest.approx(round((1 + 1 / 3 + 0) / 3, 4))
    assert got["by_category"]["1 multi-hop"] == {
        "questions": 1,
        "recall@1": 0.5,
        "recall@2": 0.5,
        "recall@3": 1.0,
        "mrr@3": 1.0,
    }
    assert got["by_category"]["4 single-hop"]["recall@3"] == 0.5
    assert got["by_category"]["4 single-hop"]["mrr@3"] == pytest.approx(round(1 / 6, 4))
