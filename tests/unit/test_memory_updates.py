"""Knowledge updates (memory/updates.py): detection on constructed cases, the chain on the items, restoring, and
recall preferring the newest (SQLite + Chroma in tmp_path, the deterministic HashEmbedder of tests/conftest.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory.store import record_turn
from memory.updates import Statement, chain, find_superseded, mark, restore, supersedes

T0 = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    "old,new",
    [
        ("I live in Boston with my sister.", "I moved to Denver last month, I live there now."),
        ("My favourite colour is blue.", "My favourite colour is green."),
        ("I work at Acme as a tester.", "I quit Acme, I work at Globex now."),
        ("My dog is called Rex.", "I renamed my dog, he is now called Max."),
    ],
)
def test_an_update_of_the_same_subject_by_the_same_author_is_found(old, new):
    found = supersedes(Statement(2, "Ann", new), Statement(1, "Ann", old))
    assert found is not None and found.older == 1 and found.newer == 2


@pytest.mark.parametrize(
    "old,new,author",
    [
        ("I live in Boston with my sister.", "I moved to Denver last month, I live there now.", "Bob"),  # someone else
        ("I live in Boston with my sister.", "I live in Boston with my sister.", "Ann"),  # a repetition
        ("I painted a sunset yesterday.", "We went camping with the kids.", "Ann"),  # another subject
    ],
)
def test_no_update_across_authors_repetitions_or_subjects(old, new, author):
    assert supersedes(Statement(2, author, new), Statement(1, "Ann", old)) is None


def _write(index, ref, text, days, author="Ann"):
    with index.db.unit() as repos:
        return record_turn(
            repos, ref=ref, text=text, author=author, episode="chat", created_at=T0 + timedelta(days=days)
        ).id


def test_the_older_is_kept_superseded_ranked_below_the_newer_and_restorable(index):
    old = _write(index, "1", "My favourite colour is blue.", 0)
    _write(index, "2", "We went camping with the kids.", 1)
    new = _write(index, "3", "My favourite colour is green.", 2)
    with index.db.unit() as repos:
        rows = repos.items.many([old, new])
        found = find_superseded(Statement(new, "Ann", rows[new].text), [Statement(old, "Ann", rows[old].text)])
        assert [(s.older, s.newer) for s in found] == [(old, new)]
        assert mark(repos, found, now=T0 + timedelta(days=2)) == 1
    with index.db.unit() as repos:
        rows = repos.items.many([old, new])
        assert rows[old].status == "superseded" and rows[old].meta["superseded_by"] == new
        assert rows[new].meta["replaces"] == [old]  # recall can say what it replaced
        assert chain(repos, new) == [old, new] == chain(repos, old)
    hits = index.search("What is Ann's favourite colour?", k=3)
    by_id = {h.item.id: h for h in hits}
    assert old in by_id and new in by_id  # kept and findable
    assert by_id[old].parts["superseded"] < 0 == by_id[new].parts["superseded"]
    assert [h.item.id for h in hits].index(new) < [h.item.id for h in hits].index(old)
    with index.db.unit() as repos:
        assert restore(repos, old)
    with index.db.unit() as repos:
        rows = repos.items.many([old, new])
        assert rows[old].status == "active" and "superseded_by" not in rows[old].meta
        assert rows[new].meta["replaces"] == []


def test_the_write_time_check_finds_the_older_statement_through_the_index(index):
    old = _write(index, "1", "I work at Acme as a tester.", 0)
    _write(index, "2", "I painted a sunset by the lake.", 1)
    other = _write(index, "3", "I work at Acme as a tester.", 2, author="Bob")
    new = _write(index, "4", "I quit Acme, I work at Globex now.", 3)
    index.sync()
    from memory.updates import supersede_older

    found = supersede_older(index, new)
    assert [(s.older, s.newer) for s in found] == [(old, new)]  # not Bob's
    with index.db.unit() as repos:
        rows = repos.items.many([old, other, new])
        assert rows[old].status == "superseded" and rows[other].status == "active"
    assert supersede_older(index, new) == []  # already done: the older one is no longer active


def test_a_long_pastes_check_searches_with_its_opening_and_still_finds_what_it_updates(index, monkeypatch):
    from memory.updates import QUERY_CHARS, supersede_older

    old = _write(index, "1", "I work at Acme as a tester.", 0)
    new = _write(
        index, "2", "I quit Acme, I work at Globex now. " + "Notes from the move. " * 600, 1
    )  # 3 x QUERY_CHARS
    index.sync()
    asked = []
    search = index.search
    monkeypatch.setattr(index, "search", lambda q: asked.append(len(q.text)) or search(q))
    assert [(s.older, s.newer) for s in supersede_older(index, new)] == [(old, new)]
    assert asked == [QUERY_CHARS]  # not the whole paste: the index's lock is held while a search ranks
