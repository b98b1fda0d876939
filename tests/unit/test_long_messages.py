"""Long messages found as well as short ones: what a text is indexed as (memory/text.py `parts`, read in windows of
the model's length: embeddings.py `window_bounds`), BM25 by passages with a capped share of the neighbours' words
(lexical.py `Shape`), the best vector measured against what that many vectors reach by chance (ranker.py
`expected_best`), a reply's share of its question by the question's length over a longer reply's (`balance`), and the
asker's first
person read as naming them (query.py)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from memory.retrieval import query as reading
from memory.retrieval.embeddings import BATCH_TOKENS, LocalEmbedder, window_bounds
from memory.retrieval.journal import EMBED_BATCH, EMBED_BATCH_CHARS, embed_batches
from memory.retrieval.lexical import CONTEXT_WEIGHT, WHOLE, CorpusSample, Shape, passages, scores
from memory.retrieval.ranker import Ranker, balance, engine_votes, expected_best
from memory.retrieval.settings import RetrievalSettings
from memory.text import MAX_PARTS, PART_CHARS, WRITTEN_CHARS, parts, split_written


def test_a_text_is_indexed_as_its_sentences_a_long_sentence_in_pieces_and_a_huge_one_grouped():
    assert parts("Just one sentence here.") == []  # its whole vector serves
    text = "The boat left at dawn. We reached the island by noon. " + "word " * 400 + "end."
    found = parts(text)
    assert found[:2] == ["The boat left at dawn.", "We reached the island by noon."]
    assert len(found) > 3 and all(len(p) <= PART_CHARS for p in found)  # the 2,000-character sentence in pieces
    assert "".join(found).replace(" ", "") == text.replace(" ", "")  # nothing left out
    huge = " ".join(f"Sentence number {n} is here." for n in range(3 * MAX_PARTS))
    grouped = parts(huge)
    assert len(grouped) <= MAX_PARTS and grouped[0].startswith("Sentence number 0 is here. Sentence number 1")


def test_the_write_embeds_a_long_texts_first_part_and_leaves_the_rest_to_the_follow_up():
    found = parts(" ".join(f"Line {n} of the long log file." for n in range(2000)))
    written, later = split_written(found)
    assert written + later == found and later
    assert WRITTEN_CHARS <= sum(len(p) + 1 for p in written) < WRITTEN_CHARS + PART_CHARS
    assert split_written(found[:10]) == (found[:10], [])


def test_windows_cover_the_text_within_the_model_length_and_end_where_a_part_ends():
    cuts = [30, 90, 150, 151, 260, 400]
    found = window_bounds(5, 400, cuts, 100)
    assert found[0][0] == 5 and found[-1][1] == 400
    assert all(a == b for (_, a), (b, _) in zip(found, found[1:]))  # contiguous, no token twice
    assert all(hi - lo <= 100 for lo, hi in found)
    assert [hi for _, hi in found] == [90, 151, 251, 260, 360, 400]  # at a part's end when one is in reach
    assert window_bounds(0, 50, [], 100) == [(0, 50)]


def test_the_models_runs_hold_texts_of_like_length_up_to_a_token_budget():
    embedder = LocalEmbedder()  # (nothing is loaded: the batches are planned from the lengths alone)
    lengths = [256, 12, 256, 40, 256, 12, 256, 30, 7]
    batches = embedder.batches(lengths)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))  # every text, once
    for batch in batches:
        assert len(batch) == 1 or len(batch) * max(lengths[i] for i in batch) <= BATCH_TOKENS
    assert [[lengths[i] for i in batch] for batch in batches] == [[7, 12, 12, 30, 40], [256, 256], [256, 256]]
    assert embedder.threads >= 1
    assert LocalEmbedder(batch_size=2).batches([5] * 5) == [[0, 1], [2, 3], [4]]  # at most batch_size a run
    assert LocalEmbedder(precision="int8").batches([5, 6]) == [[0], [1]]  # int8: one text a run


def test_the_write_embeds_long_texts_in_batches_bounded_by_characters_so_progress_shows():
    item = lambda size: SimpleNamespace(text="x" * size)  # noqa: E731
    long = [item(EMBED_BATCH_CHARS // 3) for _ in range(7)]
    batches = embed_batches(long)
    assert [len(b) for b in batches] == [3, 3, 1]
    assert [len(b) for b in embed_batches([item(10)] * (EMBED_BATCH + 1))] == [EMBED_BATCH, 1]
    assert [len(b) for b in embed_batches([item(EMBED_BATCH_CHARS * 2), item(1)])] == [1, 1]  # a huge one alone
    assert embed_batches([]) == []


def test_engine_votes_reorder_only_the_head_putting_first_what_both_engines_rank_high():
    # 1 leads by a hair on the fused score from meaning alone; 2 is second by both words and meaning
    parts = {
        1: {"bm25": -1.0, "dense": 3.0},
        2: {"bm25": 2.0, "dense": 2.9},
        3: {"bm25": 3.0, "dense": 0.0},
        4: {"bm25": 0.5, "dense": 0.5},
        5: {"bm25": 4.0, "dense": 4.0},  # outside the head: the votes never lift it in
    }
    final = {1: 2.0, 2: 1.998, 3: 1.5, 4: 0.2, 5: 0.1}
    ranked = engine_votes([1, 2, 3, 4, 5], dict(final), {i: dict(p) for i, p in parts.items()}, 1.0, 3, 30)
    assert ranked[:3] == [2, 1, 3] and ranked[3:] == [4, 5]  # the head's members are the fused score's
    scores = dict(final)
    engine_votes([1, 2, 3, 4, 5], scores, {i: dict(p) for i, p in parts.items()}, 1.0, 3, 30)
    assert min(scores[i] for i in (1, 2, 3)) > max(scores[i] for i in (4, 5))  # the head stays ahead
    assert engine_votes([1, 2, 3, 4, 5], dict(final), {i: dict(p) for i, p in parts.items()}, 0.01, 3, 30) == [
        1,
        2,
        3,
        4,
        5,
    ]  # a small weight only breaks near-ties: 1 stays first


def test_bm25_by_passages_neither_buries_a_long_text_nor_lifts_it_for_its_length():
    filler = " ".join(f"filler{n}" for n in range(600))
    passage = "spare key boathouse canoe"
    documents = {
        1: (f"{filler} {passage} {filler}", ""),
        2: (passage, ""),
        3: (" ".join(["spare"] * 5 + ["boathouse"] * 5 + [filler]), ""),
    }
    weights = {"spare": 2.0, "key": 1.0, "boathouse": 3.0}
    whole = scores(documents, weights, average_length=40)
    shaped = scores(documents, weights, average_length=40, shape=Shape(passage=64))
    assert whole[1] < 0.5 * whole[2]  # one document: the long one buried by its length
    assert shaped[1] > 3 * whole[1]  # its best passage: scored as a 64-token message holding the terms …
    assert shaped[1] < shaped[2]  # … and no more: the short text that is only them stays first
    assert shaped[3] > shaped[1]  # the terms several times over still count (within a passage)
    assert [(a, b) for a, b, _ in passages(["w"] * 130, [], Shape(passage=64))] == [
        (0, 64),
        (32, 96),
        (64, 128),
        (96, 130),
    ]


def test_the_neighbours_words_weigh_at_most_a_share_of_a_short_messages_own():
    own, context = ["wow", "really"], ["word"] * 400  # "Wow, really?" between two long replies
    assert passages(own, context)[0][2] == CONTEXT_WEIGHT  # uncapped: 200 words' weight around 2 of its own
    capped = passages(own, context, Shape(context_cap=1.0))[0][2]
    assert capped * len(context) == 2.0  # as much as its own length
    assert passages(own, context, Shape(context_cap=1.0, context_floor=20))[0][2] * len(context) == 20.0
    sample = CorpusSample.of({1: ("wow really", " ".join(context)), 2: ("a b c", "")}, Shape(context_cap=1.0))
    assert sample.lengths.tolist() == [4.0, 3.0]


def test_a_corpus_sample_in_passages_counts_documents_not_passages():
    long = " ".join(f"t{n}" for n in range(300)) + " rare"
    sample = CorpusSample.of({1: (long, ""), 2: ("rare words", ""), 3: ("other words", "")}, Shape(passage=64))
    assert len(sample) == 3 and len(sample.lengths) > 3
    assert sample.holding("rare") == 2 and sample.holding("words") == 2
    mean, std = sample.mean_std({"rare": 1.0}, average_length=float(sample.lengths.mean()))
    assert mean > 0 and std > 0


def test_the_best_of_many_parts_is_measured_against_what_that_many_reach_by_chance():
    chance = expected_best(np.array([1, 2, 10, 100, 1000]))
    assert chance[0] == 0.0 and all(np.diff(chance) > 0)
    assert 1.4 < chance[2] < 1.7 and 2.9 < chance[4] < 3.4  # the best of 10 and of 1,000 standard normals
    rng = np.random.default_rng(7)
    query = rng.normal(size=32)
    query /= np.linalg.norm(query)

    def item(best: float, noise_parts: int) -> np.ndarray:
        rows = rng.normal(size=(1 + noise_parts, 32))
        rows -= np.outer(rows @ query, query)  # orthogonal to the query …
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        rows[1] = best * query + np.sqrt(1 - best**2) * rows[1]  # … but one part, this close
        rows[0] = 0.3 * query + np.sqrt(1 - 0.09) * rows[0]
        return rows

    short, long = item(0.6, 2), item(0.6, 400)
    matrix = np.vstack([short, long]).astype(np.float32)
    starts = np.array([0, len(short)])
    ranker = SimpleNamespace(config=RetrievalSettings())
    raw = Ranker.dense_scores(ranker, (matrix, starts), query.astype(np.float32))
    assert abs(raw[0] - raw[1]) < 1e-5  # raw similarities: the same best part, the same score
    measured = Ranker.dense_scores(ranker, (matrix, starts), query.astype(np.float32), (0.0, 0.2, 0.0, 0.2))
    assert measured[0] > measured[1]  # the long text's best part is what 400 tries reach more easily


def test_a_long_reply_inherits_less_of_its_short_questions_relevance():
    assert balance(50, 20) == 1.0 == balance(50, 50)  # a reply no longer than its question leans on it
    assert balance(30, 3000) == 0.01  # 3,000 characters after a one-liner: about itself
    assert balance(300, 3000) == 0.1
    assert balance(0, 0) == 0.0


def test_a_query_in_the_first_or_second_person_is_about_the_asker_or_the_one_asked():
    assert reading.speaks_of_self("What did I say about my trip?")
    assert reading.speaks_of_self("Что я говорил про мой отпуск?")
    assert not reading.speaks_of_self("What did Caroline research?")
    assert reading.speaks_to_addressee("What did you recommend for the trip?")
    assert not reading.speaks_to_addressee("Can you summarise the trip?")  # a request, not about their words
    assert reading.speaks_to_addressee("Can you remind me what you suggested?")


def test_a_question_that_also_states_something_counts_only_its_asking_clause_as_asking():
    assert (
        reading.asking_clause("I prefer a balanced approach, using AI but keeping oversight, what do you think?")
        == "what do you think?"
    )
    assert reading.asking_clause("Is it far?") == "Is it far?"
    assert reading.asking_share("Is it far?") == 1.0
    assert reading.asking_share("The studio is in Lisbon. Does daylight saving matter?") == 4 / 9
    assert reading.asking_share("I moved to Lisbon in May, how is the weather?") == 4 / 10
    assert reading.asking_share("I moved to Lisbon in May.") == 0.0
    assert WHOLE.context_cap is None
