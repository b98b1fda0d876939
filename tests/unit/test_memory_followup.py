"""The memory index's follow-up (memory/followup.py) on constructed cases: event time apart from record time
(memory/event_time.py, dateparser), knowledge updates found after every write, recall filtering and boosting by
event time and saying what a memory replaced, and a 300,000-character paste that neither blocks a tick nor is lost
(SQLite + a real Chroma in tmp_path, the deterministic HashEmbedder of tests/fakes/memory.py)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from memory.event_time import event_time
from memory.followup import DEEP_BATCH_CHARS
from memory.retrieval.index import Query
from memory.store import record_turn
from memory.text import PART_CHARS, parts, split_written, tokenize
from memory.updates import version_note, versions_of, when_label
from tests.fakes.llm import FakeLLM

THURSDAY = datetime(2023, 5, 11, 15, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "text,day,precision",
    [
        ("I went to a support group yesterday and it was powerful.", "2023-05-10", "day"),
        ("Last Tuesday I signed up for a pottery class.", "2023-05-09", "day"),
        ("The day before yesterday I met Anna at the station.", "2023-05-09", "day"),
        ("We went camping three weeks ago!", "2023-04-17", "week"),
        ("I ran a charity race on 2 May 2023.", "2023-05-02", "day"),
        ("I moved to Boston in March.", "2023-03-01", "month"),
        ("I painted that lake sunrise last year.", "2022-01-01", "year"),
        ("Вчера я ходила в бассейн.", "2023-05-10", "day"),
        ("В прошлый вторник мы были в театре.", "2023-05-09", "day"),
        ("昨日、公園に行きました。", "2023-05-10", "day"),
        ("3日前に引っ越した。", "2023-05-08", "day"),
    ],
)
def test_event_time_is_resolved_against_the_record_time(text, day, precision):
    found = event_time(text, THURSDAY)
    assert found is not None and f"{found.at:%Y-%m-%d}" == day and found.precision == precision


@pytest.mark.parametrize("text", ["I may go there one day.", "I have 3 days off.", "Nothing happened.", ""])
def test_a_text_that_names_no_time_has_no_event_time(text):
    assert event_time(text, THURSDAY) is None


def _write(index, ref, text, at, author="Ann", episode="chat"):
    with index.db.unit() as repos:
        item_id = record_turn(repos, ref=ref, text=text, author=author, episode=episode, created_at=at).id
    index.sync()
    return item_id


def _settled(index, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not index.follow_up.idle():
        assert time.monotonic() < deadline, "the follow-up did not catch up"
        time.sleep(0.05)


def test_the_follow_up_thread_marks_updates_and_event_times_after_every_write(index):
    index.follow_up.start()
    old = _write(index, "1", "I live in Boston with my sister.", THURSDAY - timedelta(days=30))
    _write(index, "2", "We went camping with the kids.", THURSDAY - timedelta(days=20))
    new = _write(index, "3", "I moved to Denver last Tuesday, I live there now.", THURSDAY)
    _settled(index)
    with index.db.unit() as repos:
        rows = repos.items.many([old, new])
        assert rows[old].status == "superseded" and rows[old].meta["superseded_by"] == new
        assert rows[new].meta["replaces"] == [old]
        # record time and event time, apart
        assert rows[new].created_at.date().isoformat() == "2023-05-11"
        assert f"{rows[new].event_at:%Y-%m-%d}" == "2023-05-09"
        assert rows[new].meta["event"] == {"from": "text", "phrase": "last Tuesday", "precision": "day"}
        assert rows[old].event_at is None  # it names no time: it happened when it was said
        texts = versions_of(repos, [rows[new], rows[old]])
        # recall says what a memory replaced, and what replaced an older one
        assert version_note(rows[new], texts) == " (updates: I live in Boston with my sister.)"
        assert version_note(rows[old], texts).startswith(" (superseded by: I moved to Denver")
        assert when_label(rows[new]) == "2023-05-11, happened 2023-05-09"
    hits = {h.item.id: h for h in index.search(Query(text="Where does Ann live?", k=3, mmr_lambda=1.0))}
    assert hits[old].parts["superseded"] < 0 == hits[new].parts["superseded"]  # kept, found, ranked lower


def test_recall_filters_and_boosts_by_event_time(index):
    index.follow_up.start()
    # said in June about May, said in May about nothing earlier, said in June about June
    may_event = _write(
        index, "1", "I ran the charity race on 2 May 2023, a great day.", datetime(2023, 6, 20, tzinfo=UTC)
    )
    may_record = _write(index, "2", "Running the charity race felt great today.", datetime(2023, 5, 25, tzinfo=UTC))
    june = _write(
        index, "3", "I ran the charity race yesterday, it was a great day.", datetime(2023, 6, 10, tzinfo=UTC)
    )
    _settled(index)
    found = index.search(
        Query(
            text="charity race",
            k=5,
            happened_since=datetime(2023, 5, 1, tzinfo=UTC),
            happened_until=datetime(2023, 5, 31, tzinfo=UTC),
        )
    )
    assert {h.item.id for h in found} == {may_event, may_record}  # event time, else record time
    recorded = index.search(Query(text="charity race", k=5, since=datetime(2023, 6, 1, tzinfo=UTC)))
    assert {h.item.id for h in recorded} == {may_event, june}  # record time
    asked = {h.item.id: h for h in index.search("What did Ann do in May 2023?", k=5)}
    assert asked[may_event].parts["period"] > 0 and asked[june].parts["period"] == 0


def test_a_long_paste_is_chunked_indexed_in_the_background_and_not_lost(agent_factory, monkeypatch):
    """A 300,000-character note: the tick embeds a bounded part of it (the whole text's vector and the parts of its
    first WRITTEN_CHARS), its full text and full-text document are stored at once, and the follow-up embeds every
    other part later, after which a question about a sentence deep inside it finds it by meaning as well."""
    filler = "The logs show the usual retries from the cache warmer and nothing else of note. "
    deep = " ".join(["The forgotten harbour lighthouse keeper painted turquoise shutters every spring."] * 8)
    paste = (filler * 3600)[:290_000] + deep + " " + filler * 200
    paste = paste[:300_000]
    assert len(paste) == 300_000 and deep in paste
    agent = agent_factory(FakeLLM("fake", responses=["I read the whole log you pasted."]))
    memory = agent.services.memory
    embedded: list[str] = []
    real_embed = memory.embedder.embed

    def counting(texts):
        embedded.extend(texts)
        return real_embed(texts)

    monkeypatch.setattr(memory.embedder, "embed", counting)
    with agent.services.db.unit() as repos:
        note = repos.notes.add(paste, source="user")
    state = agent.tick()
    assert state["tick"] == 1
    written, later = split_written(parts(paste))
    from_paste = [t for t in embedded if "cache warmer" in t or "lighthouse" in t]
    assert len(from_paste) == 1 + len(written) < 100 < len(later)  # the tick's share: bounded, whatever the length
    with agent.services.db.unit() as repos:
        item = repos.items.find("message", f"note:{note.id}")
        assert item is not None and len(item.text) == 300_000  # stored whole
        assert item.id in repos.items.lexical.candidates(tokenize("turquoise"), 5)  # searchable by word to its end
    question = memory.embedder.embed([f"{item.author}: the harbour lighthouse keeper painted turquoise shutters"])[0]
    memory.sync()
    with agent.services.db.unit() as repos:
        before = float(
            (
                repos.items.vectors.get(memory.embedder.name, [item.id])[item.id].vectors.astype("float32") @ question
            ).max()
        )
    embedded.clear()
    report = memory.follow_up.run_pending()
    assert report.deep_parts == len(later) > 1000
    # now embedded in parts of its own (the update check's query is the paste's opening: no "turquoise" in it)
    assert any("turquoise shutters" in t and len(t) <= 2 * PART_CHARS for t in embedded)
    with agent.services.db.unit() as repos:
        stored = repos.items.vectors.get(memory.embedder.name, [item.id])[item.id]
        assert len(stored.vectors) == 1 + len(written) + len(later)  # the write's rows and every later part's
    after = float((stored.vectors.astype("float32") @ question).max())
    assert after > before + 0.3  # its best vector now holds the deep sentence: found by meaning too
    assert memory.caches.vectors[item.id].shape == stored.vectors.shape  # what ranking scores, in this process
    assert item.id in {h.item.id for h in memory.search(Query(text="lighthouse keeper turquoise shutters", k=3))}
    assert memory.follow_up.run_pending().deep_parts == 0  # done once


def test_an_older_database_gets_event_time_and_keeps_its_memories(tmp_path):
    from sqlalchemy import inspect

    from memory import SCHEMA_VERSION, Database
    from tests.old_databases import as_version, schema_version

    db = Database.open(tmp_path)
    with db.unit() as repos:
        record_turn(repos, ref="1", text="I went to the market yesterday.", author="Ann", episode="chat")
    db.close()
    as_version(
        tmp_path,
        20,
        "DROP INDEX ix_memory_items_event_at",  # before v21
        "ALTER TABLE memory_items DROP COLUMN event_at",
    )
    db = Database.open(tmp_path)
    try:
        assert schema_version(db) == SCHEMA_VERSION
        with db.session() as s:
            assert "ix_memory_items_event_at" in {i["name"] for i in inspect(s.bind).get_indexes("memory_items")}
        with db.unit() as repos:
            item = repos.items.find("message", "1")
            assert item.text == "I went to the market yesterday." and item.event_at is None
    finally:
        db.close()


def _block(cmd: str, args: dict) -> str:
    import json

    return (
        "I look it up.\n# Commands:\n" + json.dumps([{"cmd_id": "c1", "type": cmd, "args": args}]) + "\n# End commands"
    )


def test_the_persona_searches_by_event_time_and_reads_what_a_memory_replaced(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            _block(
                "memory.search",
                {"query": "where Ann works", "happened_after": "2023-05-08", "happened_before": "2023-05-10"},
            ),
            _block("memory.search", {"query": "x", "happened_after": "May"}),
        ],
    )
    agent = agent_factory(fake)
    memory = agent.services.memory
    with agent.services.db.unit() as repos:
        record_turn(
            repos,
            ref="w1",
            text="I work at Acme as a tester.",
            author="Ann",
            episode="w",
            created_at=datetime(2023, 4, 1, tzinfo=UTC),
        )
        record_turn(
            repos,
            ref="w2",
            text="Last Tuesday I quit Acme, I work at Globex now.",
            author="Ann",
            episode="w",
            created_at=THURSDAY,
        )
    memory.sync()
    assert memory.follow_up.run_pending().superseded
    [ran] = agent.tick()["executed"]
    assert ran["status"] == "executed", ran
    [line] = ran["result"].splitlines()
    assert "· 2023-05-11, happened 2023-05-09] Ann: Last Tuesday I quit Acme" in line
    assert line.endswith("(updates: I work at Acme as a tester.)")
    [refused] = agent.tick()["executed"]
    assert refused["status"] != "executed" and "happened_after" in refused["result"]  # the field is named


def test_the_api_and_the_page_show_record_and_event_time(web):
    services = web.agent.services
    with services.db.unit() as repos:
        record_turn(
            repos,
            ref="p1",
            text="We planted the pear tree last Tuesday.",
            author="Ann",
            episode="garden",
            created_at=THURSDAY,
        )
    services.memory.sync()
    services.memory.follow_up.run_pending()
    got = web.client.get(
        "/api/memory/search", params={"q": "pear tree", "happened_after": "2023-05-09", "happened_before": "2023-05-10"}
    )
    assert got.status_code == 200, got.text
    [hit] = [h for h in got.json()["hits"] if "pear tree" in h["text"]]
    assert hit["recorded_at"].startswith("2023-05-11") and hit["happened_at"].startswith("2023-05-09")
    assert hit["happened_as"] == "last Tuesday · day"
    none = web.client.get("/api/memory/search", params={"q": "pear tree", "happened_after": "2023-06-01"}).json()
    assert none["hits"] == []
    page = web.client.get("/memory/search", params={"q": "pear tree", "happened_after": "", "happened_before": ""})
    assert "recorded 2023-05-11" in page.text and "happened 2023-05-09 (last Tuesday · day)" in page.text
    bad = web.client.get("/memory/search", params={"q": "pear tree", "happened_after": "someday"})
    assert bad.status_code == 422 and "happened_after" in bad.text


def test_a_stop_between_a_pastes_batches_of_parts_keeps_none_and_leaves_it_for_the_next_pass(index, monkeypatch):
    import threading

    text = "The harbour lighthouse keeper painted the shutters. " * 2000
    paste, pieces = _write(index, "p", text, THURSDAY), len(split_written(parts(text))[1])
    assert pieces * 52 > 2 * DEEP_BATCH_CHARS  # more than one batch
    stop, embed, batches = threading.Event(), index.embedder.embed, []

    def embed_parts(texts):
        if len(texts) > 100:  # a batch of parts (not the update check's query): the process stops
            batches.append(len(texts))
            stop.set()
        return embed(texts)

    monkeypatch.setattr(index.embedder, "embed", embed_parts)
    report = index.follow_up.run_pending(stop=stop)
    assert report.deep_parts == 0 and len(batches) == 1 < pieces / batches[0]  # not the remaining batches
    with index.db.reading() as reads:
        assert reads.config.follow_up_cursor < paste  # not marked done
        assert len(reads.items.vectors.get(index.embedder.name, [paste])[paste].vectors) < pieces
    monkeypatch.setattr(index.embedder, "embed", embed)
    assert index.follow_up.run_pending().deep_parts == pieces  # the next pass does it whole
