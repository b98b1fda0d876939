"""Ranking rules of the memory index (memory/retrieval/ranker.py) and the query reading they rest on (issue 19:
LoCoMo recall), each with the setting that turns it off. SQLite + Chroma in tmp_path with the deterministic HashEmbedder
(tests/conftest.py)."""

import pytest

from memory.retrieval.index import RetrievalSettings
from memory.retrieval.query import asking_share, first_person, named_authors, subjects
from memory.store import record_turn

AUTHORS = {"Ann", "Bob", "Cy"}


def test_named_authors_in_order_and_the_ones_asked_about():
    assert named_authors("What does Bob think about Ann's dog?", AUTHORS) == ["Bob", "Ann"]
    assert named_authors("What did Bob adopt?", {"Bob"}) == []  # the only author: nothing to prefer
    assert subjects("What does Bob think about Ann's dog?", ["Bob", "Ann"]) == ["Bob"]  # the other is the topic
    assert subjects("What do Ann and Bob both like?", ["Ann", "Bob"]) == ["Ann", "Bob"]
    assert subjects("Did both Ann and Bob go?", ["Ann", "Bob"]) == ["Ann", "Bob"]
    assert subjects("What did Ann tell Bob and Cy?", ["Ann", "Bob", "Cy"]) == ["Bob", "Cy"]  # joined ones
    assert subjects("What did Ann adopt?", ["Ann"]) == ["Ann"] and subjects("Any news?", []) == []
    assert first_person("What does Bob think about Ann's dog?", "Ann") == "Ann: What does Bob think about my dog?"


def _chat(index):
    with index.db.unit() as repos:
        record_turn(repos, ref="1", text="I adopted a dog last week.", author="Ann", episode="chat")
        record_turn(repos, ref="2", text="I adopted a cat last week.", author="Bob", episode="chat")
        record_turn(repos, ref="3", text="I adopted a parrot last week.", author="Cy", episode="chat")


def test_a_query_naming_two_authors_boosts_the_one_it_asks_about(index):
    _chat(index)
    hits = {h.item.author: h for h in index.search("What does Bob think about Ann's adoption?", k=3)}
    assert hits["Bob"].parts["author"] > 0 and hits["Ann"].parts["author"] == 0 == hits["Cy"].parts["author"]
    both = {h.item.author: h for h in index.search("What did Ann and Bob adopt?", k=3)}
    assert both["Ann"].parts["author"] > 0 and both["Bob"].parts["author"] > 0 and both["Cy"].parts["author"] == 0
    index.config = RetrievalSettings(each_author_query=False)  # before: a query naming two authors prefers no one
    assert all(h.parts["author"] == 0 for h in index.search("What did Ann and Bob adopt?", k=3))


def test_each_named_authors_items_meet_the_query_in_their_first_person(index, monkeypatch):
    _chat(index)
    asked = []
    start = index.embedding.start_texts  # a search's dense queries, embedded while it reads SQL
    monkeypatch.setattr(
        index.embedding, "start_texts", lambda texts, *a, **k: asked.append(list(texts)) or start(texts, *a, **k)
    )
    index.search("What did Ann and Bob adopt?", k=3)
    assert asked[-1] == ["Ann: What did I and Bob adopt?", "Bob: What did Ann and I adopt?"]
    index.config = RetrievalSettings(each_author_query=False)
    index.search("What did Ann and Bob adopt?", k=3)
    assert asked[-1] == ["What did Ann and Bob adopt?"]


def test_a_near_copy_of_a_chosen_hit_is_passed_over_unless_the_query_wants_every_copy(index):
    from memory.retrieval.ranker import Query

    with index.db.unit() as repos:
        record_turn(repos, ref="a", text="The studio has twelve mats per class.", author="Ann", episode="one")
        record_turn(repos, ref="b", text="The studio has twelve mats per class.", author="Ann", episode="two")
        record_turn(repos, ref="c", text="Classes are booked online.", author="Ann", episode="three")
    refs = [h.item.ref for h in index.search(Query(text="How many mats does the studio have?", k=3))]
    assert len(refs) == 2 and len({"a", "b"} & set(refs)) == 1 and "c" in refs
    every = [h.item.ref for h in index.search(Query(text="How many mats does the studio have?", k=3, distinct=False))]
    assert {"a", "b", "c"} == set(every)
    index.config = RetrievalSettings(duplicate_similarity=1.01)  # off
    assert len(index.search(Query(text="How many mats does the studio have?", k=3))) == 3


def _copies_and_others(index, copies: int) -> None:
    """Two memories that answer the query less well, then `copies` identical ones that answer it best."""
    with index.db.unit() as repos:
        record_turn(repos, ref="opens", text="The studio opens at nine.", author="Ann", episode="o")
        record_turn(repos, ref="booked", text="Studio classes are booked online.", author="Ann", episode="b")
        for n in range(copies):
            record_turn(
                repos, ref=f"copy{n}", text="The studio has twelve mats per class.", author="Ann", episode=f"c{n}"
            )
    index.sync(flush=True)  # in Chroma: its nearest, not the queue of new vectors, are the dense candidates


def test_the_guard_reads_on_past_a_first_page_of_near_copies(index):
    from memory.retrieval.ranker import Query

    _copies_and_others(index, 40)
    question = "How many mats does the studio have?"
    everything = [h.item.ref for h in index.search(Query(text=question, k=42, distinct=False))]
    assert everything.index("opens") >= 30 and everything.index("booked") >= 30  # past the first page (6k, 30)
    refs = [h.item.ref for h in index.search(Query(text=question, k=3))]
    assert len(refs) == 3 and {"opens", "booked"} < set(refs) and refs[0].startswith("copy")  # one copy, best first


def test_the_guard_asks_the_engines_for_more_when_their_candidates_are_near_copies(index, monkeypatch):
    from memory.retrieval.ranker import DEEPER, DEEPEST, Query

    _copies_and_others(index, 12)
    asked = []
    nearest = index.store.nearest
    monkeypatch.setattr(
        index.store, "nearest", lambda vectors, n, where=None: asked.append(n) or nearest(vectors, n, where)
    )
    index.config = RetrievalSettings(candidates=4)  # the first candidates are copies only
    refs = [h.item.ref for h in index.search(Query(text="How many mats does the studio have?", k=3))]
    assert len(refs) == 3 and {"opens", "booked"} < set(refs) and sum(r.startswith("copy") for r in refs) == 1
    assert asked == [4, 4 * DEEPER]  # one wider round was enough

    with index.db.unit() as repos:  # only copies: it stops at the widest pool, with the one distinct hit it has
        for ref in ("opens", "booked"):
            assert repos.items.remove("message", ref)
    index.sync(flush=True)
    asked.clear()
    index.config = RetrievalSettings(candidates=1)
    assert len(index.search(Query(text="How many mats does the studio have?", k=3))) == 1
    assert asked == [1, DEEPER, DEEPER * DEEPER] and DEEPER * DEEPER == DEEPEST  # bounded: at most two more rounds


def test_the_question_penalty_weighs_the_share_of_a_turn_that_asks(index):
    assert asking_share("Is it far?") == 1.0 == asking_share("Wow! What did you paint?")  # "Wow!" joins the question
    # the share of its words in what it asks: 5 of 12 (the statement's 7 are evidence)
    assert asking_share("The studio is in Lisbon, so Europe/Lisbon. Does daylight saving matter there?") == 5 / 12
    assert asking_share("The studio is in Lisbon.") == 0.0  # does not end with a question: no penalty at all
    with index.db.unit() as repos:
        record_turn(repos, ref="q", text="Where is the studio?", author="Dana", episode="chat")
        record_turn(
            repos,
            ref="s",
            text="The studio is in Lisbon, so Europe/Lisbon. Does daylight saving matter there?",
            author="Dana",
            episode="other",
        )
    hits = {h.item.ref: h for h in index.search("Which city is the studio in?", k=2)}
    assert hits["q"].parts["asks"] == -0.6 and hits["s"].parts["asks"] == pytest.approx(-0.6 * 5 / 12)
