"""bench/train_adapter.py's pieces: the search with an adapter maps only the query's vectors (and is the shipped
search again afterwards), the surrogate re-ranking is the dumped order under the identity, and training moves an
evidence turn up against its negatives while a strong pull towards the identity keeps W near it."""

from __future__ import annotations

import numpy as np

from bench.train_adapter import adapter_applied, prepare, surrogate, train, turn_scores
from memory.retrieval.ranker import Ranker
from memory.store import record_turn


def test_the_adapter_maps_the_query_not_the_stored_vectors(index):
    with index.db.unit() as repos:
        for n, text in enumerate(["I adopted a dog last week.", "The bakery opens at nine.", "My sister plays cello."]):
            record_turn(repos, ref=str(n), text=text, author="Ann", episode="chat")
    plain = {h.item.ref: h.parts["dense"] for h in index.search("Which pet did Ann adopt?", k=3)}
    original = Ranker._read
    with adapter_applied(-np.eye(index.embed_texts(["x"]).shape[1], dtype=np.float32)):  # q → −q
        flipped = {h.item.ref: h.parts["dense"] for h in index.search("Which pet did Ann adopt?", k=3)}
    assert Ranker._read is original  # the search as shipped again
    assert flipped.keys() == plain.keys()
    # the stored vectors are as they were: every item's dense similarity (z against the same sample) changes sign
    assert all(abs(flipped[ref] + plain[ref]) < 1e-3 for ref in plain)
    again = {h.item.ref: h.parts["dense"] for h in index.search("Which pet did Ann adopt?", k=3)}
    assert again == plain
    with adapter_applied(None):  # no adapter: the same order and scores
        assert {h.item.ref: h.parts["dense"] for h in index.search("Which pet did Ann adopt?", k=3)} == plain


def _conversation(rng: np.random.Generator) -> dict:
    """Eight turns of 8-d unit vectors; each question's vector is nearest a distractor, its evidence one axis off."""
    turns = [{"ref": f"t{n}", "author": "Ann", "text": f"turn {n}"} for n in range(8)]
    basis = np.eye(8, dtype=np.float32)
    vectors = {f"t{n}": basis[n : n + 1] for n in range(8)}
    questions, texts = [], {}
    for n in range(4):
        query = 0.8 * basis[n] + 0.6 * basis[n + 4] + 0.05 * rng.standard_normal(8).astype(np.float32)
        texts[f"q{n}"] = query / np.linalg.norm(query)
        questions.append(
            {
                "question": f"q{n}",
                "category": 4,
                "evidence": [f"t{n + 4}"],
                "candidates": [{"ref": f"t{n}", "score": 2.0}, {"ref": f"t{n + 4}", "score": 1.0}],
            }
        )
    return {"sample_id": "c", "turns": turns, "vectors": vectors, "questions": questions, "embed": texts}


def _prepared() -> dict:
    conversation = _conversation(np.random.default_rng(0))
    return prepare(conversation, lambda texts: np.stack([conversation["embed"][t] for t in texts]), 30, "hard")


def test_the_identity_keeps_the_dumped_order():
    prepared = _prepared()
    assert [ranked for _, ranked, _ in surrogate(prepared, np.eye(8, dtype=np.float32))] == [
        [q["candidates"][0]["ref"], q["candidates"][1]["ref"]] for q in prepared["questions"]
    ]


def test_training_lifts_the_evidence_and_the_pull_to_the_identity_holds_it_back():
    import torch

    prepared = _prepared()
    loose = train([prepared], 1e-4, steps=60, lr=0.05)
    held = train([prepared], 100.0, steps=60, lr=0.05)

    def margin(w: np.ndarray) -> float:  # mean evidence score minus the distractor's
        with torch.no_grad():
            scores = turn_scores(torch, prepared, torch.from_numpy(w)).numpy()
        return float(np.mean([scores[n, n + 4] - scores[n, n] for n in range(4)]))

    assert margin(np.eye(8, dtype=np.float32)) < 0 < margin(loose)
    assert np.linalg.norm(held - np.eye(8)) < 0.1 * np.linalg.norm(loose - np.eye(8))
