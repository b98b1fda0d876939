"""claw0's ranking rule (issue 33): recency and importance change the ranking — of two memories alike in everything
else, the older one ranks lower, and the less important one ranks lower; with the weight at 0 the difference goes.
SQLite + Chroma in tmp_path with the deterministic HashEmbedder (tests/conftest.py `index`). The two memories are
copies,
so the queries look past the near-copy guard (`distinct=False`), which would keep only the better of them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memory.retrieval.index import Query, RetrievalSettings

TEXT = "The lighthouse keeper paints the rail green every spring."


def test_an_older_memory_ranks_below_a_newer_one_all_else_equal(index):
    now = datetime.now(UTC)
    with index.db.unit() as repos:
        repos.items.put("diary", "old", TEXT, created_at=now - timedelta(days=60))
        repos.items.put("diary", "new", TEXT, created_at=now - timedelta(hours=1))
    hits = index.search(Query("lighthouse keeper rail green", k=2, distinct=False))
    assert [h.item.ref for h in hits] == ["new", "old"]
    new, old = hits
    assert new.parts["recency"] > old.parts["recency"] > 0
    assert new.parts["bm25"] == old.parts["bm25"] and new.parts["dense"] == old.parts["dense"]
    assert new.parts["importance"] == old.parts["importance"]
    assert new.score > old.score
    index.config = RetrievalSettings(recency_weight=0.0)  # the rule off: nothing tells them apart any more
    off = index.search(Query("lighthouse keeper rail green", k=2, distinct=False))
    assert off[0].score == off[1].score and all(h.parts["recency"] == 0 for h in off)


def test_a_less_important_memory_ranks_below_a_more_important_one_all_else_equal(index):
    made = datetime.now(UTC) - timedelta(days=3)
    with index.db.unit() as repos:
        repos.items.put("diary", "minor", TEXT, importance=0.2, created_at=made)
        repos.items.put("diary", "major", TEXT, importance=0.9, created_at=made)
    hits = index.search(Query("lighthouse keeper rail green", k=2, distinct=False))
    assert [h.item.ref for h in hits] == ["major", "minor"]
    major, minor = hits
    assert major.parts["importance"] > 0 > minor.parts["importance"]
    assert major.parts["recency"] == minor.parts["recency"] and major.parts["bm25"] == minor.parts["bm25"]
    assert major.score > minor.score
    index.config = RetrievalSettings(importance_weight=0.0)
    off = index.search(Query("lighthouse keeper rail green", k=2, distinct=False))
    assert off[0].score == off[1].score and all(h.parts["importance"] == 0 for h in off)
