"""The tick's own cost (issue 15 §6): what a tick reads once and shares, what it no longer reads, and each text
embedded once. Counts of statements and embedder calls, never times (bench/tick.py measures those)."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import timedelta

import numpy as np
from sqlalchemy import event, text

from memory import Database
from memory.clock import utcnow
from memory.text import with_author
from nodes.context import TICK_SUMMARY, TickReads
from tests.conftest import make_agent
from tests.fakes.llm import FakeLLM
from tests.fakes.memory import HashEmbedder


@contextmanager
def statements(db: Database):
    """The SQL statements `db` sends inside the block."""
    sent: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        sent.append(" ".join(statement.split()))

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(db.engine, "before_cursor_execute", record)


class CountingEmbedder(HashEmbedder):
    """Records every call: `embed` texts, and `embed_parts` documents as (prefix + body) — a memory's vectors come
    from one pass over it (memory/retrieval/embeddings.py), here from the hashed texts."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[list[str]] = []

    def embed(self, texts):
        self.texts.append(list(texts))
        return super().embed(texts)

    def embed_parts(self, documents):
        self.texts.append([prefix + body for prefix, body, _ in documents])
        return [
            HashEmbedder.embed(self, [prefix + body, *(prefix + part for part in parts)])
            for prefix, body, parts in documents
        ]


def test_a_unit_of_work_reads_each_config_key_once(tmp_path):
    db = Database.open(tmp_path)
    with db.unit() as repos:
        repos.config.set("persona/cycle.pause_s", 3)
        repos.config.set("drives/a", 1)
    with db.unit() as repos, statements(db) as sent:
        repos.config.preload("drives/a", "drives/missing", prefixes=("persona/",))
        assert len(sent) == 1
        assert repos.config.get("drives/a") == 1 and repos.config.get("drives/missing") is None
        assert repos.config.with_prefix("persona/") == {"persona/cycle.pause_s": 3}
        assert repos.config.get("other") is None and repos.config.get("other", "x") == "x"
        assert len(sent) == 2  # only the key not loaded before, and only once
        repos.config.set("drives/missing", [1])
        assert repos.config.get("drives/missing") == [1]
    with db.unit() as repos:
        assert repos.config.many("drives/missing", "drives/a", "nope") == {
            "drives/missing": [1],
            "drives/a": 1,
            "nope": None,
        }
    db.close()


def test_a_unit_of_work_holds_the_threads_it_read(tmp_path):
    db = Database.open(tmp_path)
    with db.unit() as repos:
        root = repos.threads.ensure("main")
        repos.threads.create_child("child", root, label="c", window_ratio=0.5, origin="command", owner="test")
    with db.unit() as repos, statements(db) as sent:
        assert [t.id for t in repos.threads.lineage("child")] == ["main", "child"]
        first = len(sent)
        assert repos.threads.ratio_product("child") == 0.5 and [t.id for t in repos.threads.lineage("child")] == [
            "main",
            "child",
        ]
        assert len(sent) == first == 2  # the identity map alone would have forgotten them between the calls
        repos.threads.set_tick("child", 7)
        assert repos.threads.get("child").tick == 7  # the held row sees the update
    db.close()


def test_leading_goals_are_the_per_horizon_lists_in_one_query(tmp_path):
    db = Database.open(tmp_path)
    with db.unit() as repos:
        for n, (horizon, priority) in enumerate(
            [
                ("short", 1),
                ("long", 5),
                ("short", 5),
                ("short", 3),
                ("long", 2),
                ("short", 5),
                ("long", 9),
                ("long", 1),
                ("short", 0),
            ]
        ):
            repos.goals.add(f"goal {n}", horizon=horizon, priority=priority)
        done = repos.goals.add("done", horizon="short", priority=10)
        repos.goals.set_status(done.id, "completed")
        archived = repos.goals.add("set aside", horizon="long", priority=10)
        repos.goals.archive(archived.id, utcnow())
    with db.unit() as repos:
        leading = repos.goals.leading(per_horizon=3)
        assert [g.id for g in leading[:3]] == [g.id for g in repos.goals.list(status="active", limit=3)]
        for horizon in ("short", "long"):
            assert [g.id for g in leading if g.horizon == horizon] == [
                g.id for g in repos.goals.list(status="active", horizon=horizon, limit=3)
            ]
        assert "done" not in {g.title for g in leading} and "set aside" not in {g.title for g in leading}
    db.close()


def test_latest_episodes_are_each_periods_recent_ones(tmp_path):
    db = Database.open(tmp_path)
    start = utcnow().date()
    with db.unit() as repos:
        for back in range(10):
            repos.episodes.upsert("day", (start - timedelta(days=back)).isoformat(), f"day {back}")
        for back in (7, 14):
            repos.episodes.upsert("week", (start - timedelta(days=back)).isoformat(), f"week {back}")
        repos.episodes.upsert("month", (start - timedelta(days=40)).isoformat(), "month")
    with db.unit() as repos:
        latest = repos.episodes.latest({"day": 7, "week": 1, "month": 1})
        for period, n in (("day", 7), ("week", 1), ("month", 1)):
            assert [e.id for e in latest[period]] == [e.id for e in repos.episodes.recent(period, n)]
    db.close()


def test_a_new_memory_is_one_insert_and_its_neighbour_learns_it(tmp_path):
    db = Database.open(tmp_path)
    with db.unit() as repos:
        first = repos.items.put("message", "msg:1", "The tide is high.", author="Lumen", episode="main")
    with db.unit() as repos, statements(db) as sent:
        second = repos.items.put("message", "msg:2", "The moon pulls it.", author="Lumen", episode="main")
        second_id = second.id
    assert len([s for s in sent if s.startswith("INSERT INTO memory_items")]) == 1
    assert not [s for s in sent if s.startswith("UPDATE memory_items") and "context_before" in s]
    assert len([s for s in sent if s.startswith("INSERT INTO memory_journal")]) == 1  # both journal rows at once
    with db.unit() as repos:
        before, after = repos.items.get(first.id), repos.items.get(second_id)
        assert (before.seq, after.seq) == (0, 1)
        assert (
            before.context_after == "Lumen: The moon pulls it." and after.context_before == "Lumen: The tide is high."
        )
        assert set(repos.items.changed_since(0, repos.items.journal_head())) == {first.id, second_id}
        assert repos.items.any_active(["message"]) and not repos.items.any_active(["kb"])
    db.close()


def test_tick_reads_are_per_thread_and_tick():
    reads = TickReads()
    loads: list[str] = []
    assert reads.get("main", 1, "x", lambda: loads.append("a") or "first") == "first"
    assert reads.get("main", 1, "x", lambda: loads.append("b") or "again") == "first"
    assert reads.get("child", 1, "x", lambda: "child's") == "child's"
    assert reads.peek("main", 2, "x") is None
    reads.put("main", 1, TICK_SUMMARY, {"attempts": 1})
    assert reads.first_run("main", 1) and not reads.first_run("main", 2)
    reads.start("main", 1)  # the tick starts again: nothing of the earlier run is kept
    assert reads.peek("main", 1, "x") is None and not reads.first_run("main", 1)
    for tick in range(20):
        reads.put("main", 100 + tick, "x", tick)
    assert reads.peek("main", 100, "x") is None and reads.peek("main", 119, "x") == 19  # only the last few ticks
    assert loads == ["a"]


def thoughts(prompt: str) -> str:
    return f"The harbour at dusk, thought {len(prompt) % 97}. Gulls circle while the boats come home."


def test_a_tick_embeds_the_thought_once(tmp_path):
    embedder = CountingEmbedder()
    agent = make_agent(tmp_path, FakeLLM("fake", responses=thoughts), embedder=embedder, checkpointer="sqlite")
    for _ in range(3):
        agent.tick()
    embedder.texts.clear()
    state = agent.tick()
    stored = with_author(agent.services.persona.display_name, state["thought"])
    embedded = [text for call in embedder.texts for text in call]
    assert embedded.count(state["thought"]) == 1 and embedded.count(stored) == 1  # novelty and memory, one call
    assert [call for call in embedder.texts if stored in call] == [
        call for call in embedder.texts if state["thought"] in call
    ]
    assert len(embedder.texts) == 1  # nothing else this tick: the recall query is the thought embedded last tick
    with agent.services.db.unit() as repos:
        item = repos.items.find("message", f"msg:{state['response_id']}")
    assert item is not None and agent.services.memory.search(state["thought"], k=1)[0].item.id == item.id
    agent.close()


def test_the_reflexes_read_the_recent_outputs_once_and_drives_and_prompt_share_the_notes(tmp_path):
    agent = make_agent(tmp_path, FakeLLM("fake", responses=thoughts), checkpointer="sqlite")
    for _ in range(2):
        agent.tick()
    with agent.services.db.unit() as repos:
        repos.notes.add("How are the boats tonight?", source="user")
    with statements(agent.services.db) as sent:
        state = agent.tick()
    recent = [
        s
        for s in sent
        if s.startswith("SELECT messages.") and "messages.kind IN (?, ?)" in s and "ORDER BY messages.id DESC" in s
    ]
    assert len(recent) == 1  # evaluate_emotion and check_stagnation share one read
    unread = [
        s
        for s in sent
        if s.startswith("SELECT notes.") and "notes.read IS 0" in s and not s.startswith("SELECT notes.id FROM")
    ]
    assert len(unread) == 1 and state["incoming_note_ids"]  # update_drives' read serves prepare_context
    looks = [s for s in sent if s.startswith("SELECT notes.id FROM notes WHERE notes.read IS 0")]
    assert len(looks) <= 1  # whether someone else waits, before the reflexes' side calls (nodes/attention.py)
    assert not [s for s in sent if s.startswith("SELECT ticks.") and "ticks.tick = ?" in s]  # the kept answer: no read
    agent.close()


def test_an_answer_kept_by_a_killed_run_is_reused_and_its_rows_updated(tmp_path):
    fake = FakeLLM("fake", responses=thoughts)
    agent = make_agent(tmp_path, fake, checkpointer="sqlite")
    agent.tick()
    answer = {
        "response": "The kept thought of a run that died.",
        "native_tool_calls": [],
        "parse_errors": [],
        "degraded": False,
        "degraded_ticks": 0,
        "llm": {"llm_id": "fake"},
    }
    with agent.services.db.unit() as repos:  # tick 2 ran until the model answered, then the process died
        repos.ticks.start("main", 2, "chat")
        repos.ticks.keep_answer("main", 2, answer)
        repos.messages.upsert(
            "main:2:response", thread_id="main", tick=2, kind="response", role="assistant", content="half-written"
        )
    thinking = len([c for c in fake.calls if c["json_schema"] is None])
    state = agent.tick()
    assert state["tick"] == 2 and state["response"] == answer["response"]
    assert len([c for c in fake.calls if c["json_schema"] is None]) == thinking  # not generated twice
    with agent.services.db.unit() as repos:
        rows = [m for m in repos.messages.log("main") if m.tick == 2]
        assert [m.content for m in rows] == [answer["response"]]  # the killed run's row updated, not doubled
    assert not agent.services.reads.first_run("main", 2)  # its second start: rows were looked for
    state = agent.tick()  # and the next tick is a first run again
    assert state["tick"] == 3 and agent.services.reads.first_run("main", 3)
    agent.close()


def test_a_new_turn_is_one_insert_held_by_the_session_and_its_neighbour_learns_it(tmp_path):
    """A turn's new item: one Core INSERT (no read back), the session holds it as the ORM would; the item before it
    learns its text in one UPDATE — also as the unit holds that item — and both are in the full-text index."""
    from memory.models import MemoryItem
    from memory.store import record_turn

    db = Database.open(tmp_path)
    with db.unit() as repos:
        first = record_turn(repos, ref="msg:1", text="The heron waits at the pier.", author="Ann", episode="e").id
    with db.unit() as repos:
        held = repos.items.get(first)  # the unit holds the item before the new one
        assert held is not None and held.context_after == ""
        with statements(db) as sent:
            item = record_turn(repos, ref="msg:2", text="It caught a fish at dawn.", author="Bob", episode="e")
        assert [s.split()[0] for s in sent if s.startswith(("INSERT INTO memory_items", "UPDATE memory_items"))] == [
            "UPDATE",
            "INSERT",
        ]
        assert not any(s.startswith("SELECT") and "memory_items.id = ?" in s for s in sent)  # nothing read back
        with statements(db) as read:  # every column is held: none is loaded
            columns = {column.key: getattr(item, column.key) for column in MemoryItem.__table__.columns}
        assert read == [] and columns["event_at"] is None and columns["episode"] == "e"
        assert repos.items.get(item.id) is item and item.seq == 1 and item.status == "active"
        assert item.context_before == "Ann: The heron waits at the pier."
        assert held.context_after == "Bob: It caught a fish at dawn."  # as the unit holds it
        item.importance = 0.9  # a change to the held item is flushed like any other
    with db.unit() as repos:
        stored = repos.items.get(item.id)
        assert stored is not None and stored.importance == 0.9 and stored.meta == {} and stored.tags == []
        before = repos.session.get(MemoryItem, first)
        assert before is not None and before.context_after == "Bob: It caught a fish at dawn."
        found = {
            row for (row,) in repos.session.execute(text("SELECT rowid FROM memory_fts WHERE memory_fts MATCH 'fish'"))
        }
        assert found == {first, item.id}  # the new item's words, and its neighbour's context


def test_an_in_over_fixed_values_is_plain_bound_values():
    from sqlalchemy import select

    from memory.models import Note
    from memory.repositories.base import none_of, one_of, table_of

    c = table_of(Note).c
    sql = str(select(c.id).where(one_of(c.source, ("user", "cli")), none_of(c.text, ("a",))))
    assert "POSTCOMPILE" not in sql and "notes.source IN (:param_1, :param_2)" in sql
    assert "(notes.text NOT IN (:param_3))" in sql


def test_a_thought_that_comes_back_is_embedded_neither_for_the_reflexes_nor_for_its_memory(tmp_path):
    """A stagnating persona repeats itself. A thought that comes back: its text's vector (the reflexes) and its
    memory's (the write) are those made the first time, not made again — whether it is remembered again (it left the
    recent outputs) or replaced by a stagnation record (it repeats the last one)."""
    embedder = CountingEmbedder()
    said = "The harbour at dusk: gulls circle while the boats come home."
    between = [
        f"{topic.capitalize()} {n}, nothing like the others."
        for n, topic in enumerate(
            (
                "cello scales",
                "old maps",
                "rain on tin",
                "bread rising",
                "a chess endgame",
                "fog horns",
                "moss on stone",
                "kite strings",
                "ink stains",
                "copper pans",
            )
        )
    ]
    opening = "Morning. The tide is out and the mud smells of salt."  # (a thread's first thought has none to be
    # compared with: its memory is embedded at its write)
    agent = make_agent(
        tmp_path,
        FakeLLM("fake", responses=[opening, said, *between, said, said]),
        embedder=embedder,
        checkpointer="sqlite",
    )
    assert agent.services.settings.cycle.responses == len(between)  # the first one has left the recent outputs
    agent.tick()
    first = agent.tick()
    for _ in between:
        agent.tick()
    stored = with_author(agent.services.persona.display_name, said)
    for repeat in ("remembered again", "a stagnation record"):
        embedder.texts.clear()
        state = agent.tick()
        assert state["thought"] == said, repeat
        embedded = [text for call in embedder.texts for text in call]
        assert said not in embedded and stored not in embedded, repeat
        if repeat == "remembered again":
            again = state
    with agent.services.db.unit() as repos:
        items = [repos.items.find("message", f"msg:{s['response_id']}") for s in (first, again)]
        assert items[0] is not None and items[1] is not None and items[0].id != items[1].id
        vectors = repos.items.vectors.get(embedder.name, [item.id for item in items])
        assert repos.items.find("message", f"msg:{state['response_id']}") is None  # the repeat is not remembered
    assert np.array_equal(vectors[items[0].id].vectors, vectors[items[1].id].vectors)  # the kept ones, written again
    agent.services.memory.sync(flush=True)
    records = agent.services.memory.collection.get(ids=[str(item.id) for item in items], include=["embeddings"])
    assert len(records["ids"]) == 2 and np.allclose(*records["embeddings"])  # both in Chroma, the same vector
    assert agent.services.memory.search(said, k=1)[0].item.id in {item.id for item in items}
    agent.close()


def test_kept_memory_vectors_go_when_sentence_vectors_are_made_another_way(tmp_path):
    from memory.retrieval.index import MemoryIndex

    embedder = CountingEmbedder()
    db = Database.open(tmp_path)
    index = MemoryIndex(db, embedder, chroma_path=tmp_path / "chroma")
    document = index.record_texts("The heron waits. It caught a fish.", "Ann")
    index.embed_texts(["The heron waits."], documents=[document])
    index.embed_texts(["The heron waits."], documents=[document])
    assert embedder.texts == [["The heron waits.", "Ann: The heron waits. It caught a fish."]]  # kept: asked once
    index.config = index.config.model_copy(update={"sentence_vectors": "separate"})  # each sentence on its own
    index.embed_texts(["The heron waits."], documents=[document])
    assert embedder.texts[1:] == [
        ["Ann: The heron waits. It caught a fish.", "Ann: The heron waits.", "Ann: It caught a fish."]
    ]  # made again, the new way (the text is still kept)
    index.close()
    db.close()
