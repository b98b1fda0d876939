"""Memory tiers, their commands, the index's sync and hybrid retrieval, and what the tick injects.

Unit level: SQLite + a real Chroma PersistentClient in tmp_path, with the deterministic HashEmbedder
(tests/integration/test_memory_embedded.py repeats the retrieval checks with the real MiniLM model).
"""

import json
from datetime import UTC

import pytest

from memory import Database
from memory.repositories import MemoryLimitError
from memory.retrieval.index import MemoryIndex, Query
from memory.retrieval.lexical import CorpusSample, bag, idf, scores, selective_terms
from memory.retrieval.query import about_author, asks_something, asks_when, first_person, says_when, time_ranges
from memory.text import chunks, tokenize
from memory.upkeep.manager import set_memory_status
from nodes.context import utcnow
from tests.fakes.llm import FakeLLM
from tests.fakes.managers import answer
from tests.fakes.memory import HashEmbedder


def block(*commands) -> str:
    cmds = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return "A thought.\n# Commands:\n" + json.dumps(cmds) + "\n# End commands"


def refs(hits):
    return [h.item.ref for h in hits]


# ---- text and BM25 ------------------------------------------------------------------------------------------


def test_tokenize_stems_drops_stop_words_and_handles_cyrillic_and_cjk():
    assert tokenize("Caroline's paintings were running") == ["carolin", "paint", "run"]
    assert "бегущ" in tokenize("Они были бегущими")
    assert "東京" in tokenize("東京に行きました")


def test_chunks_split_sentences_and_cap_their_number():
    assert chunks("One short sentence only.") == []
    assert chunks("I went to the sea. It was cold and grey. Ok.") == ["I went to the sea.", "It was cold and grey. Ok."]
    many = " ".join(f"Sentence number {i} is here." for i in range(40))
    assert len(chunks(many, max_chunks=12)) <= 12


def test_bm25_weights_the_neighbours_words_half_and_ignores_unknown_terms():
    documents = {
        1: (" ".join(tokenize("the lighthouse keeper")), ""),
        2: (" ".join(tokenize("a quiet harbour")), " ".join(tokenize("lighthouse"))),
        3: (" ".join(tokenize("bread and butter")), ""),
    }
    weights = {"lighthous": idf(3, 2), "nowher": idf(3, 0)}
    found = scores(documents, weights, average_length=2.0)
    assert found[1] > found[2] > 0 and found[3] == 0  # context tokens count half
    sample = CorpusSample.of(documents)
    mean, std = sample.mean_std(weights, sample.average_length)
    assert sample.average_length == pytest.approx(sum(sum(bag(*d).values()) for d in documents.values()) / 3)
    assert sample.holding("lighthous") == 2 and mean == pytest.approx(
        sum(scores(documents, weights, sample.average_length).values()) / 3
    )  # zeros included
    assert std > 0


def test_bm25_scores_equal_the_formula_over_whole_bags_substrings_included():
    """The scorer skips documents without a query term and counts only the query's terms: the same figures as
    Okapi BM25 over each document's whole bag, a term that is only part of a token ("art" in "party") counting 0."""
    import random

    rng = random.Random(7)
    words = ["art", "party", "cart", "sea", "season", "lighthous", "bread", "keeper", "a", "the"]
    documents = {
        n: (" ".join(rng.choices(words, k=rng.randint(0, 12))), " ".join(rng.choices(words, k=rng.randint(0, 6))))
        for n in range(300)
    }
    weights = {"art": 1.7, "sea": 0.9, "lighthous": 2.2, "nowher": 3.0}

    def reference(own: str, context: str) -> float:
        counts = bag(own, context)
        norm = 1.2 * (1 - 0.75 + 0.75 * sum(counts.values()) / 6.5)
        return sum(w * counts[t] * 2.2 / (counts[t] + norm) for t, w in weights.items() if counts.get(t))

    found = scores(documents, weights, average_length=6.5)
    assert found == {n: pytest.approx(reference(*d), abs=1e-12) for n, d in documents.items()}
    assert (
        found[
            next(
                n
                for n, (own, ctx) in documents.items()
                if "party" in own
                and "art" not in own.split()
                and "art" not in ctx.split()
                and not {"sea", "lighthous"} & set((own + " " + ctx).split())
            )
        ]
        == 0
    )


def test_only_selective_terms_are_searched_in_the_engine():
    counts = {"carolin": 9000, "paint": 40, "sunset": 3, "zzz": 0}
    assert selective_terms(counts, postings_budget=1000) == ["sunset", "paint"]  # rarest first, within the budget
    assert selective_terms({"carolin": 9000}, postings_budget=1000) == []  # a term in most documents finds nothing


def test_first_person_rewrite_for_author_queries():
    assert first_person("What did Caroline research?", "Caroline") == "Caroline: What did I research?"
    assert first_person("What is Caroline's identity?", "Caroline") == "Caroline: What is my identity?"
    assert about_author("What did Caroline research?", {"Caroline", "Melanie"}) == "Caroline"
    assert about_author("Did Caroline and Melanie meet?", {"Caroline", "Melanie"}) is None  # both: no one in particular
    assert about_author("What did Caroline research?", {"Caroline"}) is None  # the only author: nothing to prefer


def test_what_a_query_says_about_time():
    from datetime import datetime

    now = datetime(2024, 6, 20, 15, tzinfo=UTC)
    day = lambda text: [
        (r.start.date().isoformat(), r.end.date().isoformat(), r.weight) for r in time_ranges(text, now)
    ]  # noqa: E731
    assert day("What did Nate play on 9 October, 2022?") == [("2022-10-09", "2022-10-10", 1.0)]
    assert day("What happened on May 25th 2023?") == [("2023-05-25", "2023-05-26", 1.0)]
    assert day("What did she start in December 2023?") == [("2023-12-01", "2024-01-01", 0.5)]
    assert day("Where did he travel in 2022?") == [("2022-01-01", "2023-01-01", 0.25)]
    assert day("What did we talk about yesterday?") == [("2024-06-19", "2024-06-20", 1.0)]
    assert day("the film from three days ago") == [("2024-06-16", "2024-06-18", 1.0)]
    assert day("What did he do last year?") == []  # too wide to point at anything
    assert day("on 31 February 2023") == [("2023-02-01", "2023-03-01", 0.5)]  # no such day: its month
    assert asks_when("When did Caroline go to the support group?") and asks_when("How long ago was her birthday?")
    assert not asks_when("What did Caroline research?")
    assert says_when("I went to a support group yesterday!") and says_when("We moved here in 2019.")
    assert says_when("My sister's wedding is on 14 June.") and says_when("The talk is on June 14th in Lisbon.")
    assert not says_when("That sounds lovely.") and not says_when("I may 5 times a day")
    assert says_when("YESTERDAY was long.") and says_when("Back In March we met.")  # case does not matter
    assert asks_something("Did you paint that yourself? ") and not asks_something("I painted it.")


# ---- index sync and retrieval ------------------------------------------------------------------------------


def test_writes_updates_deletes_and_archive_stay_in_sync(index):
    with index.db.unit() as repos:
        a = repos.diary.add("The lighthouse keeper waved at me from the rocks.", tags=["sea"])
        repos.diary.add("Baking bread with rosemary.", tags=["food"])
    assert refs(index.search("lighthouse keeper", k=1)) == [str(a.id)]
    with index.db.unit() as repos:
        repos.diary.update(a.id, text="The harbour master counted boats.")
    assert "lighthouse" not in index.search("lighthouse keeper", k=1)[0].item.text
    assert refs(index.search("harbour master boats", k=1)) == [str(a.id)]
    with index.db.unit() as repos:
        set_memory_status(repos, "diary", a.id, "archived")
    assert str(a.id) not in refs(index.search("harbour master boats", k=3))
    assert str(a.id) in refs(index.search(Query("harbour master boats", k=3, include_archived=True)))
    with index.db.unit() as repos:
        set_memory_status(repos, "diary", a.id, "active")
        assert repos.items.find("diary", a.id).status == "active"
    assert refs(index.search("harbour master boats", k=1)) == [str(a.id)]
    with index.db.unit() as repos:
        repos.diary.purge(a.id)
    assert str(a.id) not in refs(index.search("harbour master boats", k=3))
    index.flush()
    assert index.collection.get(where={"item_id": a.id})["ids"] == []  # vectors gone too
    with index.db.unit() as repos:
        assert repos.items.vectors.get(index.embedder.name, [a.id]) == {}  # from the database as well


def test_a_new_process_catches_up_from_the_journal(tmp_path):
    db = Database.open(tmp_path)
    first = MemoryIndex(db, HashEmbedder(), chroma_path=tmp_path / "chroma")
    with db.unit() as repos:
        repos.diary.add("Seagulls argue over a fish.")
    first.sync()
    # written after the last sync, e.g. by `run.py kb add` in another process, or before a crash
    with db.unit() as repos:
        late = repos.diary.add("The tide took my sandcastle.")
    second = MemoryIndex(db, HashEmbedder(), chroma_path=tmp_path / "chroma")
    assert refs(second.search("tide sandcastle", k=1)) == [str(late.id)]
    second.close()  # writes what it queued for Chroma
    with db.unit() as repos:
        assert second.collection.metadata["journal"] == repos.items.journal_head()
        assert {int(r.split(":")[0]) for r in second.collection.get()["ids"]} == {
            item.id for item in repos.items.indexed()
        }
    db.close()


def test_every_vector_is_stored_in_the_database_and_chroma_holds_one_record_per_memory(index):
    with index.db.unit() as repos:
        long = repos.diary.add("The lighthouse keeper paints the rail. Gulls watch him. The tide turns at noon.")
        short = repos.diary.add("Rosemary bread.")
    index.sync(flush=True)
    with index.db.unit() as repos:
        stored = repos.items.vectors.get(index.embedder.name, [long.id, short.id])
    assert (
        stored[long.id].vectors.shape == (1 + len(chunks(long.text)), index.embedder.dim)
        and len(chunks(long.text)) == 3
    )
    assert stored[short.id].vectors.shape == (1, index.embedder.dim)
    records = index.collection.get(include=["embeddings"])
    assert sorted(records["ids"]) == sorted([str(long.id), str(short.id)])  # the whole-item vectors only
    whole = dict(zip(records["ids"], records["embeddings"]))[str(long.id)]
    assert abs(float(whole @ stored[long.id].vectors[0].astype("float32")) - 1) < 1e-3


def test_a_crash_before_the_chroma_write_is_repaired_from_the_stored_vectors_without_embedding_again(tmp_path):
    db = Database.open(tmp_path)
    first = MemoryIndex(db, HashEmbedder(), chroma_path=tmp_path / "chroma")
    with db.unit() as repos:
        note = repos.diary.add("The lighthouse keeper paints the rail green.")
    first.sync()  # embedded and stored; the Chroma write is still queued when the process dies
    assert first.journal.pending and first.collection.count() == 0
    first.journal.pending.clear()
    embedder = HashEmbedder()
    second = MemoryIndex(db, embedder, chroma_path=tmp_path / "chroma")
    assert refs(second.search("lighthouse rail green", k=1)) == [str(note.id)]
    second.flush()
    assert (
        second.collection.get()["ids"] == [str(note.id)] and embedder.calls == 1
    )  # the query's vector, not the note's
    db.close()


def test_a_search_is_not_held_up_while_another_thread_embeds_a_long_text(tmp_path):
    import threading

    from tests.fakes.memory import HeldEmbedder

    db = Database.open(tmp_path)
    embedder = HeldEmbedder(marker="Zanzibar")
    index = MemoryIndex(db, embedder, chroma_path=tmp_path / "chroma")
    with db.unit() as repos:
        keeper = repos.diary.add("The lighthouse keeper paints the rail green.")
    index.sync()
    with db.unit() as repos:
        paste = repos.diary.add("Zanzibar notes. " + "Spice markets and dhow boats in the old harbour. " * 300)
    writer = threading.Thread(target=index.sync, name="writer-sync")  # the writer's sync, as after a tick's write
    writer.start()
    found: dict[str, list[str]] = {}
    try:
        assert embedder.holding.wait(timeout=60)  # the writer's sync is inside the embedder, on the long text

        def search() -> None:
            found["keeper"] = refs(index.search("lighthouse rail green", k=1))
            found["paste"] = refs(index.search("dhow boats harbour", k=1))  # by its words while its vectors are made

        searcher = threading.Thread(target=search, name="searcher")
        searcher.start()
        searcher.join(timeout=60)  # (only so a broken index fails the test instead of hanging it)
        assert not searcher.is_alive() and not embedder.release.is_set()  # answered while the embedder is held
        assert found == {"keeper": [str(keeper.id)], "paste": [str(paste.id)]}
    finally:
        embedder.release.set()
        writer.join(timeout=60)
    assert not writer.is_alive()
    assert refs(index.search("spice markets dhow boats", k=1)) == [str(paste.id)]
    index.sync(flush=True)
    assert embedder.marked_calls == 1  # the long text embedded once: the searches' syncs did not embed it again
    with db.unit() as repos:
        assert index.collection.metadata["journal"] == repos.items.journal_head()
        assert repos.items.vectors.get(embedder.name, [paste.id])[paste.id].vectors.shape[0] > 1
    index.close()
    db.close()


def test_a_collection_of_the_old_layout_is_dropped_and_its_memories_embedded_again(tmp_path):
    import chromadb

    db = Database.open(tmp_path)
    with db.unit() as repos:
        note = repos.diary.add("The lighthouse keeper paints the rail. Gulls watch him.")
    client = chromadb.PersistentClient(
        path=str(tmp_path / "chroma"), settings=chromadb.Settings(anonymized_telemetry=False)
    )
    embedder = HashEmbedder()
    old = client.get_or_create_collection(
        f"anima-memory-{embedder.name}", embedding_function=None, metadata={"journal": 99, "embedder": embedder.name}
    )
    old.add(
        ids=[f"{note.id}:0", f"{note.id}:1"],
        embeddings=embedder.embed(["a", "b"]),
        metadatas=[{"item_id": note.id, "part": 0}, {"item_id": note.id, "part": 1}],
    )
    index = MemoryIndex(db, embedder, chroma_path=tmp_path / "chroma")
    assert refs(index.search("lighthouse keeper", k=1)) == [str(note.id)]
    index.flush()
    names = {c.name for c in client.list_collections()}
    assert names == {index.collection.name} and index.collection.get()["ids"] == [str(note.id)]
    db.close()


def test_index_writes_wait_for_a_batch_and_searches_see_them_meanwhile(index):
    with index.db.unit() as repos:
        first = repos.diary.add("The lighthouse keeper paints the rail green.")
    index.sync()
    assert index.collection.count() == 0 and index.journal.pending  # queued, not written yet
    assert refs(index.search("lighthouse rail green", k=1)) == [str(first.id)]  # found through the queue
    with index.db.unit() as repos:
        for n in range(70):  # past FLUSH_RECORDS: the batch is written
            repos.diary.add(f"Entry {n}: gulls over the harbour at dawn, number {n}.")
    index.sync()
    assert index.journal.pending == {} and index.collection.count() >= 71
    with index.db.unit() as repos:
        assert index.collection.metadata["journal"] == repos.items.journal_head()
    assert refs(index.search("lighthouse rail green", k=1)) == [str(first.id)]  # now found in Chroma


def test_filters_by_tier_tags_and_time(index):
    with index.db.unit() as repos:
        d = repos.diary.add("Rain on the window all evening.", tags=["weather"])
        c = repos.concepts.add("rain", "Water falling from clouds; rain makes me calm.", tags=["weather"])
        repos.diary.add("Rain again, the garden is happy.", tags=["garden"])
    assert {h.item.tier for h in index.search(Query("rain", k=5, tiers=["concept"]))} == {"concept"}
    tagged = index.search(Query("rain", k=5, tags=["weather"]))
    assert {h.item.ref for h in tagged} == {str(d.id), str(c.id)}
    from datetime import datetime, timedelta

    assert index.search(Query("rain", k=5, since=datetime.now(UTC) + timedelta(days=1))) == []


def test_author_mentioned_in_the_query_is_preferred(index):
    with index.db.unit() as repos:
        from memory.store import record_turn

        record_turn(repos, ref="1", text="I adopted a dog last week.", author="Ann", episode="chat")
        record_turn(repos, ref="2", text="I adopted a cat last week.", author="Bob", episode="chat")
    hits = index.search("What did Bob adopt?", k=2)
    assert hits[0].item.author == "Bob" and hits[0].parts["author"] > 0 and hits[1].parts["author"] == 0


def test_episode_neighbours_get_context_and_lift_each_other(index):
    from memory.store import record_turn

    with index.db.unit() as repos:
        record_turn(repos, ref="q", text="Where did you go on holiday?", author="Ann", episode="s1")
        record_turn(repos, ref="a", text="Lisbon, with my sister.", author="Bob", episode="s1")
        record_turn(repos, ref="x", text="Unrelated chatter about football.", author="Ann", episode="s2")
        answer = repos.items.find("message", "a")
        question = repos.items.find("message", "q")
        assert answer.seq == 1 and answer.context_before == "Ann: Where did you go on holiday?"
        assert question.context_after == "Bob: Lisbon, with my sister."
    hits = index.search("holiday", k=2)
    assert set(refs(hits)) == {"q", "a"}
    answer_hit = next(h for h in hits if h.item.ref == "a")
    assert answer_hit.parts["neighbours"] > 0  # lifted by the question it answers


def test_meditation_prefers_diverse_results(index):
    with index.db.unit() as repos:
        for i in range(4):
            repos.diary.add(f"Waves waves waves on the shore, variant {i}.")
        repos.diary.add("Waves of sound from the city orchestra.")
    every = index.search(Query("waves", k=3, mode="standard", distinct=False))
    assert [h.item.text.startswith("Waves waves") for h in every] == [True] * 3  # by relevance: the copies first
    plain = [h.item.text for h in index.search(Query("waves", k=3, mode="standard"))]
    assert sum(t.startswith("Waves waves") for t in plain) == 1 and any("orchestra" in t for t in plain)  # one copy
    diverse = index.search(Query("waves", k=3, mode="meditation"))
    assert any("orchestra" in h.item.text for h in diverse)


# ---- tiers -----------------------------------------------------------------------------------------------


def test_core_memory_is_never_saved_over_its_limit(tmp_path):
    db = Database.open(tmp_path)
    with db.unit() as repos:
        repos.blocks.write("core", "I am Mira.")
        with pytest.raises(MemoryLimitError, match="over its 2000-char limit"):
            repos.blocks.append("core", "x" * 2000)
    with db.unit() as repos:
        assert repos.blocks.get("core").content == "I am Mira."
    db.close()


def test_entities_are_merged_not_duplicated(tmp_path):
    db = Database.open(tmp_path)
    with db.unit() as repos:
        repos.entities.merge(
            "Tanaka", kind="person", description="My human.", facts=["likes poems"], aliases=["Tanaka-san"]
        )
        repos.entities.merge("tanaka-san", facts=["likes poems", "writes at night"])
        rows = repos.entities.all()
        assert len(rows) == 1 and rows[0].facts == ["likes poems", "writes at night"] and rows[0].kind == "person"
        assert [e.name for e in repos.entities.mentioned_in("I wrote to Tanaka-san today")] == ["Tanaka"]
    db.close()


def test_goals_subgoals_progress_and_cycles_refused(tmp_path):
    db = Database.open(tmp_path)
    with db.unit() as repos:
        top = repos.goals.add("Spread the ideas", horizon="long", constraints=["stay honest"])
        sub = repos.goals.add("Write three posts", parent_id=top.id)
        repos.tasks.add("Draft post 1", goal_id=sub.id)
        done = repos.tasks.add("Outline", goal_id=sub.id)
        repos.tasks.update(done.id, status="done")
        assert [g.id for g in repos.goals.subgoals(top.id)] == [sub.id]
        assert repos.goals.progress(sub.id) == {"tasks": 2, "done": 1, "completion_rate": 50.0}
        with pytest.raises(ValueError, match="cycle"):
            repos.goals.link(sub.id, top.id)
        with pytest.raises(ValueError, match="status"):
            repos.goals.set_status(top.id, "finished")
    db.close()


# ---- the tick ------------------------------------------------------------------------------------------------


def test_memory_commands_through_a_tick(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            block(
                ("diary.add", {"text": "Today I learnt the tide tables.", "tags": ["sea"]}),
                ("concepts.add", {"name": "tide", "description": "The sea rising and falling."}),
                ("concepts.add", {"name": "moon", "description": "It pulls the sea."}),
                ("links.add", {"source": "tide", "target": "moon", "relation": "caused_by"}),
                ("goals.add", {"title": "Understand the sea", "horizon": "long"}),
                ("tasks.add", {"title": "Read about tides", "goal_id": 1, "pinned": True}),
                ("core.update", {"text": "My human lives by the sea."}),
                ("notepad.update", {"text": "x" * 5000}),
                ("tags.stats", {}),
                ("memory.search", {"query": "tide tables"}),
                ("config.update", {"key": "memory_manager.mode", "value": "meditation"}),
            )
        ],
    )
    agent = agent_factory(fake)
    state = agent.tick()
    status = {e["cmd_id"]: (e["status"], e["result"]) for e in state["executed"]}
    assert all(status[f"c{i}"][0] == "executed" for i in (1, 2, 3, 4, 5, 6, 7, 9, 10)), status
    assert status["c11"] == ("pending_approval", "waits for my human's approval (approval 1)")  # config is modify_self
    assert status["c8"][0] == "failed" and "over its 3000-char limit" in status["c8"][1]
    assert "sea: 1" in status["c9"][1]
    assert "Today I learnt the tide tables." in status["c10"][1]
    with agent.services.db.unit() as repos:
        assert repos.diary.list()[0].tags == ["sea"]
        assert repos.links.list()[0].relation == "caused_by"
        assert repos.tasks.list()[0].pinned and repos.tasks.list()[0].goal_id == 1
        assert repos.blocks.get("core").content == "My human lives by the sea."
        assert repos.blocks.get("notepad").content == ""  # never saved over the limit
    # the next tick's prompt carries core memory, goals, pinned tasks and the memories recalled for the note
    with agent.services.db.unit() as repos:
        repos.notes.add("Tell me about the tide tables?", source="user")
    fake.responses = ["Second thought."]
    answer(agent.services.db, 1, approve=True, by="human", now=utcnow())  # the config change runs at the next tick
    agent.tick()
    with agent.services.db.unit() as repos:
        assert repos.config.get("persona/memory_manager.mode") == "meditation"
        assert repos.config.get("memory/abstract_request/main")["trigger"] == "mode_change"
        assert repos.approvals.get(1).status == "executed"
    think = next(c["prompt"] for c in fake.calls if c["json_schema"] is None and "Tell me about" in c["prompt"])
    assert "My human lives by the sea." in think
    assert (
        "[goal 1 long, priority 1] Understand the sea" in think
        and "[task 1 pinned, priority 1] Read about tides" in think
    )
    recall = think.split("# Memories that came to mind", 1)[1]
    assert "Today I learnt the tide tables." in recall.split("\n#", 1)[0]
    agent.tick()
    with agent.services.db.unit() as repos:  # the abstract the mode change asked for was built in the next upkeep
        abstract = repos.abstracts.latest()
        assert abstract is not None and abstract.trigger == "mode_change"
        assert any(s.startswith("diary:") for s in abstract.sources) and any(
            s.startswith("message:") for s in abstract.sources
        )
        assert repos.config.get("memory/abstract_request/main") is None


def test_responses_and_human_notes_become_conversation_memories(agent_factory):
    fake = FakeLLM("fake", responses=["The lighthouse blinks twice.", "I keep thinking of lanterns."])
    agent = agent_factory(fake)
    with agent.services.db.unit() as repos:
        repos.notes.add("Is the lighthouse still working?", source="user")
    agent.tick()
    agent.tick()
    with agent.services.db.unit() as repos:
        items = repos.items.of_tier("message")
        assert [(i.author, i.text) for i in items] == [
            ("User", "Is the lighthouse still working?"),
            (agent.services.persona.display_name, "The lighthouse blinks twice."),
            (agent.services.persona.display_name, "I keep thinking of lanterns."),
        ]
        # the human's words in their conversation's episode (managers/conversation.py), the persona's thoughts in
        # the thread's
        assert [(i.episode, i.seq) for i in items] == [("conversation:person:1", 0), ("main", 0), ("main", 1)]
        assert repos.emotion_log.recent("persona")  # the emotion reflex's result is logged
    hits = agent.services.memory.search("lighthouse working", k=2)
    assert {h.item.ref.split(":")[0] for h in hits} == {"note", "msg"}


def test_concentration_mode_filters_recent_thoughts_by_tags(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            "About the sea.",
            "About bread.",
            "Now.",
            block(("cycle.concentration", {"tags": ["sea"]})),
            "Focused.",
        ],
    )
    agent = agent_factory(fake)
    for _ in range(3):
        agent.tick()
    with agent.services.db.unit() as repos:
        first, second = repos.messages.recent("main", 3)[:2]
        first.tags, second.tags = ["sea"], ["bread"]
    agent.tick()
    agent.tick()
    think = [c["prompt"] for c in fake.calls if "My recent thoughts" in c.get("prompt", "")][-1]
    recent = think.split("# My recent thoughts", 1)[1].split("\n#", 1)[0]
    assert "About the sea." in recent and "About bread." not in recent
    assert "context concentration" in think


def test_pin_archive_and_restore_commands(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            block(
                ("diary.add", {"text": "Storm over the bay."}),
                ("diary.pin", {"id": 1}),
                ("tasks.add", {"title": "Check the boat"}),
                ("tasks.pin", {"id": 1}),
                ("memory.archive", {"tier": "diary", "ref": "1"}),
            ),
            block(
                ("diary.unpin", {"id": 1}),
                ("memory.restore", {"tier": "diary", "ref": "1"}),
                ("memory.restore", {"tier": "diary", "ref": "1"}),
            ),
        ],
    )
    agent = agent_factory(fake)
    agent.services.settings.consent.auto_approve = ["memory.archive"]  # the human approved archiving in advance
    agent.tick()
    with agent.services.db.unit() as repos:
        entry = repos.diary.get(1)
        assert entry.pinned and entry.status == "archived" and repos.tasks.get(1).pinned
        assert repos.items.find("diary", 1).status == "archived"
    assert "diary" not in {h.item.tier for h in agent.services.memory.search("storm bay", k=3)}
    state = agent.tick()
    assert [e["status"] for e in state["executed"]] == ["executed", "executed", "failed"]
    assert state["executed"][2]["result"] == "memory.restore: no archived diary 1 to restore"
    with agent.services.db.unit() as repos:
        entry = repos.diary.get(1)
        assert not entry.pinned and entry.status == "active"
    assert agent.services.memory.search("storm over the bay", k=1)[0].item.text == "Storm over the bay."


def test_what_ranking_keeps_in_memory_follows_the_journal(index):
    from memory.store import record_turn

    with index.db.unit() as repos:
        question = record_turn(repos, ref="1", text="Which lighthouse did you paint?", author="Ann", episode="chat")
    first = {h.item.ref: h for h in index.search("lighthouse paint", k=2)}
    assert set(first) == {"1"} and index.caches.positions  # its neighbours' places are kept: none after it yet
    with index.db.unit() as repos:  # written elsewhere (another process, or the next tick): the journal says so
        record_turn(repos, ref="2", text="The red one on the north cape, at dawn.", author="Bob", episode="chat")
    reply = {h.item.ref: h for h in index.search("lighthouse paint", k=2)}["2"]
    assert reply.parts["answers"] > 0  # the new turn is found after the question it answers
    with index.db.unit() as repos:
        repos.items.set_status([question.id], "archived")
    assert [h.item.ref for h in index.search("lighthouse paint", k=2)] == ["2"]  # its kept status was dropped


def test_a_restarted_index_warms_what_ranking_reads_and_never_keeps_a_row_the_journal_has_moved_past(tmp_path):
    from memory.store import record_turn

    db = Database.open(tmp_path)
    with db.unit() as repos:
        turns = [
            record_turn(repos, ref=str(n), text=f"Turn {n} about the harbour.", author="Ann", episode="chat")
            for n in range(5)
        ]
    MemoryIndex(db, HashEmbedder(), chroma_path=tmp_path / "chroma").sync(flush=True)
    restarted = MemoryIndex(db, HashEmbedder(), chroma_path=tmp_path / "chroma")
    restarted.search("harbour", k=1)  # starts the background copy
    restarted.caches.warmup.join(timeout=60)
    assert set(restarted.caches.ranked) == set(restarted.caches.documents_of) == {t.id for t in turns}
    assert restarted.caches.positions[("chat", 3)] == turns[3].id and len(restarted.caches.vectors) == 5

    later = MemoryIndex(db, HashEmbedder(), chroma_path=tmp_path / "chroma")
    later.sync()
    reads = []

    def read_while_a_change_lands(repos, after):
        page = later.caches.ranking_page(repos, after)
        if not reads:  # the page was read, then the turn was archived and synced before it could be kept
            with db.unit() as writer:
                writer.items.set_status([turns[2].id], "archived")
            later.sync()
        reads.append(page)
        return page

    later.caches.warm_pages(read_while_a_change_lands, later.caches.keep_ranking)
    assert len(reads) == 3  # the stale page read again, then the end
    assert reads[0][turns[2].id][0].status == "active" and later.caches.ranked[turns[2].id].status == "archived"
    db.close()
