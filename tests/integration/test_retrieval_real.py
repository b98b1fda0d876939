"""Every retrieval component on the real parts: all-MiniLM-L6-v2 (onnxruntime), Chroma, and the full-text index on
real SQLite (FTS5) and a real PostgreSQL server (tsvector + GIN). One conversation is written through the tick's
write path on each database; the same searches must find the same turns on both."""

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sqlalchemy import text

from memory import Database
from memory.retrieval.embeddings import LocalEmbedder
from memory.retrieval.index import MemoryIndex
from memory.store import record_turn
from memory.text import parts

pytestmark = pytest.mark.integration  # bounded: the server starts within its timeouts, every query is local

NOW = datetime(2024, 6, 20, 12, tzinfo=UTC)
SESSIONS = [  # (session date, [(speaker, text)])
    (
        datetime(2024, 5, 3, 18, tzinfo=UTC),
        [
            ("Ann", "Hey Bob! Guess what, I adopted a puppy from the shelter last week!"),
            ("Bob", "No way! What breed is she?"),
            ("Ann", "A beagle mix. She chews everything in sight, but she is so sweet."),
            ("Bob", "Ha. I started learning the cello, my fingers hurt."),
        ],
    ),
    (
        datetime(2024, 6, 14, 9, tzinfo=UTC),
        [
            ("Bob", "Morning Ann. My sister moved to Lisbon, so the flat is quiet now."),
            ("Ann", "Oh, you must miss her. What do you like to read when it is quiet?"),
            ("Bob", "Mostly old science fiction. Right now it is Solaris."),
            ("Ann", "Work has been exhausting, lots of deadlines. The puppy keeps me sane."),
        ],
    ),
]


@pytest.fixture(scope="module")
def embedder():
    return LocalEmbedder()


@pytest.fixture(scope="module")
def pg_url(postgres):
    """A database of this module's own on the session's PostgreSQL cluster (tests/conftest.py)."""
    return postgres.database("retrieval")


def _write_conversation(db: Database) -> None:
    with db.unit() as repos:
        for number, (when, turns) in enumerate(SESSIONS, 1):
            for position, (speaker, said) in enumerate(turns):
                record_turn(
                    repos,
                    ref=f"{number}:{position}",
                    text=said,
                    author=speaker,
                    episode=f"session {number}",
                    created_at=when + timedelta(minutes=position),
                )


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path, embedder):
    """(database, index) over one conversation, on SQLite or on PostgreSQL (a new database on the shared server)."""
    if request.param == "sqlite":
        db = Database.open(tmp_path)
    else:
        from sqlalchemy import create_engine

        server = request.getfixturevalue("pg_url")
        name = f"retrieval_{request.node.name.split('[')[0][-30:].lower()}"
        admin = create_engine(server.replace("postgresql://", "postgresql+psycopg://", 1), isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {name}"))
            conn.execute(text(f"CREATE DATABASE {name}"))
        admin.dispose()
        db = Database.open(url=server.rsplit("/", 1)[0] + f"/{name}")
    _write_conversation(db)
    index = MemoryIndex(db, embedder, chroma_path=tmp_path / "chroma", clock=lambda: NOW)
    index.sync(flush=True)
    yield db, index
    index.close()
    db.close()


def refs(hits):
    return [h.item.ref for h in hits]


def test_the_full_text_index_is_written_with_the_catalogue_and_counts_terms(store):
    db, _ = store
    with db.unit() as repos:
        lexical = repos.items.lexical
        assert lexical.count() == 8
        beagle = repos.items.find("message", "1:2")
        own, context = lexical.documents([beagle.id])[beagle.id]
        assert own.split()[:4] == ["3", "may", "2024", "ann"] and "beagl" in own  # date, author, stemmed words
        assert "breed" in context and "cello" in context  # the turns before and after, weighted half
        # "puppy": two turns say it, two more have it as a neighbour; "Solaris": one turn, two neighbours
        assert lexical.document_frequencies(["puppi", "solari", "nowher"], 100) == {
            "puppi": 4,
            "solari": 3,
            "nowher": 0,
        }
        assert lexical.candidates(["solari"], 5)[0] == repos.items.find("message", "2:2").id
        repos.items.remove("message", "2:2")
    with db.unit() as repos:
        assert repos.items.lexical.count() == 7 and repos.items.lexical.documents([beagle.id])  # the others stay
        assert repos.items.lexical.document_frequencies(["solari"], 100) == {"solari": 2}  # only as a neighbour now


def test_hybrid_search_finds_paraphrases_authors_times_and_answers(store):
    _, index = store
    assert set(refs(index.search("What pet did Ann get?", k=2))) == {"1:0", "1:2"}  # her puppy, its breed: no word
    # in common with the question
    assert refs(index.search("Which instrument is Bob studying?", k=1)) == ["1:3"]
    when = index.search("When did Ann adopt the puppy?", k=3)
    assert when[0].item.ref == "1:0" and when[0].parts["when"] > 0  # it says when: "last week"
    answer = index.search("What book is Bob reading?", k=2)
    assert answer[0].item.ref == "2:2" and answer[0].parts["answers"] != 0  # the reply to Ann's question
    question = next(h for h in index.search("What does Bob like to read?", k=5) if h.item.ref == "2:1")
    assert question.parts["asks"] < 0  # a question tells less than its reply
    named = index.search("What did Bob tell Ann on 14 June 2024?", k=2)
    assert set(refs(named)) == {"2:0", "2:2"} and all(h.parts["period"] > 0 for h in named)  # his words that day
    bob = index.search("Where does Bob's sister live now?", k=1)[0]
    assert bob.item.ref == "2:0" and bob.parts["author"] > 0


def test_a_restarted_index_reads_what_is_stored_and_rebuilds_nothing(store, embedder, tmp_path):
    db, index = store
    before = [refs(index.search(q, k=3)) for q in ("puppy shelter", "sister Lisbon", "deadlines at work")]
    again = MemoryIndex(db, embedder, chroma_path=tmp_path / "chroma", clock=lambda: NOW)
    assert [refs(again.search(q, k=3)) for q in ("puppy shelter", "sister Lisbon", "deadlines at work")] == before
    assert again.journal.pending == {}  # nothing re-embedded: Chroma and the full-text index were up to date
    again.close()


def test_a_restarted_index_reads_its_vector_index_while_the_first_search_reads_the_rest(
    store, embedder, tmp_path, monkeypatch
):
    """Chroma reads its nearest-neighbour index on the first query after a start; the store asks for it right after
    opening, and the first search reads the lexical side meanwhile, then waits for it: the same hits as before."""
    import threading

    from memory.retrieval.ranker import Ranker
    from memory.retrieval.vector_store import VectorStore

    db, index = store
    asked = "When did Ann adopt the puppy from the shelter?"
    before = refs(index.search(asked, k=3))
    lexical_read, order = threading.Event(), []
    read_ahead, load_index = Ranker._read_ahead, VectorStore._load_index

    def reading_ahead(self, *args):
        read_ahead(self, *args)
        order.append("lexical side read")
        lexical_read.set()

    def loading(collection):
        lexical_read.wait(30)  # the index is read after the search has read ahead, so it must wait for it
        load_index(collection)
        order.append("vector index read")

    monkeypatch.setattr(Ranker, "_read_ahead", reading_ahead)
    monkeypatch.setattr(VectorStore, "_load_index", staticmethod(loading))
    again = MemoryIndex(db, embedder, chroma_path=tmp_path / "chroma", clock=lambda: NOW)  # a restarted process
    assert refs(again.search(asked, k=3)) == before
    assert order == ["lexical side read", "vector index read"] and not again.store.loading
    with db.reading() as repos:
        puppy = repos.items.find("message", "1:0").id
    assert puppy in again.caches.ranked and puppy in again.caches.documents_of  # read ahead, from the database
    assert refs(again.search(asked, k=3)) == before and order.count("lexical side read") == 1  # warm: no read-ahead
    again.close()


def test_every_vector_is_stored_in_the_database_and_chroma_holds_the_whole_item_ones(store, embedder, tmp_path):
    db, index = store
    with db.unit() as repos:
        beagle = repos.items.find("message", "1:2")
        stored = repos.items.vectors.get(embedder.name, [beagle.id])[beagle.id]
    assert stored.vectors.shape == (1 + len(parts(beagle.text)), 384) and len(parts(beagle.text)) == 2
    assert index.collection.count() == 8  # one record per memory
    whole = index.collection.get(ids=[str(beagle.id)], include=["embeddings"])["embeddings"][0]
    assert float(np.dot(whole, stored.vectors[0].astype(np.float32))) > 0.999
    again = MemoryIndex(db, embedder, chroma_path=tmp_path / "chroma", clock=lambda: NOW)  # a restarted process
    with db.unit() as repos:
        assert np.array_equal(again.caches.vectors_of(repos, [beagle.id])[beagle.id], stored.vectors)
    again.close()


def test_the_corpus_sample_draws_live_documents_only(store):
    db, _ = store
    with db.unit() as repos:
        for n in range(60):
            record_turn(
                repos,
                ref=f"9:{n}",
                text=f"Filler line number {n} about the weather.",
                author="Ann",
                episode="filler",
                created_at=NOW,
            )
        for n in range(0, 60, 2):
            repos.items.remove("message", f"9:{n}")
        live = {
            i
            for i in repos.items.ids_of("message", [f"9:{n}" for n in range(60)])
            if repos.items.get(i).status != "deleted"
        } | {i.id for i in repos.items.indexed() if i.ref[0] != "9"}
    with db.unit() as repos:
        few = repos.items.lexical.sample(5)  # a sample much smaller than the catalogue: drawn by id
        everything = repos.items.lexical.sample(1000)  # larger than the catalogue: all of its live documents
    assert len(few) == 5 and set(few) <= live
    assert set(everything) == live and len(live) == 8 + 30


def test_late_chunked_sentence_vectors_stand_for_their_sentences(embedder):
    body = "I adopted a beagle puppy from the shelter. Work has been exhausting with deadlines."
    whole, *sentences = embedder.embed_parts([("Ann: ", body, parts(body))])[0]
    assert len(sentences) == 2
    assert float(np.abs(whole - embedder.embed(["Ann: " + body])[0]).max()) < 1e-5  # the same pass as embed()
    dog, work = embedder.embed(["Ann: a dog from the animal shelter", "Ann: too much work and deadlines"])
    assert float(sentences[0] @ dog) > float(sentences[1] @ dog)
    assert float(sentences[1] @ work) > float(sentences[0] @ work)


def test_a_long_text_is_read_in_windows_one_pass_each_and_its_parts_pooled_in_them(embedder, monkeypatch):
    """Past the model's 256 tokens a text is read in windows of whole sentences, each one pass (the prefix and
    [CLS]/[SEP] in each): every part gets a vector from its own window, the whole one is the mean of all of them, and
    the model reads each token once."""
    body = " ".join(
        f"On day {n} of the trip we walked to the {place} and talked about {topic}."
        for n, (place, topic) in enumerate(
            [("harbour", "boats"), ("market", "cheese"), ("museum", "painters"), ("old mill", "flour")] * 15, 1
        )
    )
    body += " The spare key to the boathouse is taped under the blue canoe."
    found = parts(body)
    session, _ = embedder.load()
    widths, run = [], session.run

    def recording(outputs, feed):
        widths.extend(int(n) for n in feed["attention_mask"].sum(axis=1))
        return run(outputs, feed)

    monkeypatch.setattr(session, "run", recording)
    vectors = embedder.embed_parts([("Ann: ", body, found)])[0]
    monkeypatch.setattr(session, "run", run)
    full = embedder.untruncated_tokenizer()
    tokens = len(full.encode("Ann: " + body, add_special_tokens=False).ids)
    prefix = len(full.encode("Ann: ", add_special_tokens=False).ids)
    assert tokens > 3 * 256 and max(widths) <= 256 and min(sorted(widths)[1:]) > 200  # a pass per full window …
    assert sum(widths) == tokens + (len(widths) - 1) * prefix + 2 * len(widths)  # … each token read once
    assert vectors.shape == (1 + len(found), 384)
    key = embedder.embed(["Ann: where is the spare key for the boathouse?"])[0]
    assert int(np.argmax(vectors[1:] @ key)) == len(found) - 1  # the last sentence, in the last window
    alone = embedder.embed(["Ann: " + found[-1]])[0]
    assert float(vectors[-1] @ alone) > 0.8  # read in its window's context: close to the sentence alone


def test_a_fact_deep_inside_a_long_message_is_found_and_short_ones_are_not_swamped(tmp_path, embedder):
    """A long answer (about 12,000 characters: its first 8,000 embedded by the write, the rest by the follow-up)
    holds one fact near its end; a question about it finds that message first. A short message that answers
    another question outranks the long one, which mentions the same topic only in passing among many others."""
    from memory.followup import LONG_TEXT

    topics = [
        "the harbour",
        "the cheese market",
        "the painters' museum",
        "the old flour mill",
        "the cliff path",
        "the lighthouse",
        "the bakery on the square",
        "the night ferry",
    ]
    paragraphs = [
        f"Day {n}: we spent the morning at {topics[n % 8]}, then walked back along the river, "
        f"stopped for coffee, and planned the next day around the weather and the bus times."
        for n in range(1, 80)
    ]
    paragraphs.insert(70, "By the way, the spare key to the boathouse is taped under the blue canoe.")
    paragraphs.insert(20, "Tomatoes are easy to grow in pots if they get sun.")
    long_answer = " ".join(paragraphs)
    assert len(long_answer) > LONG_TEXT and long_answer.index("spare key") > LONG_TEXT
    db = Database.open(tmp_path)
    with db.unit() as repos:
        for n, (who, said) in enumerate(
            [
                ("Ann", "Can you write up the whole trip for me, day by day?"),
                ("assistant", long_answer),
                ("Ann", "I planted the tomatoes along the south fence of the garden."),
                ("assistant", "Good spot: the south fence gets the afternoon sun."),
                ("Ann", "The bus to the airport leaves at six."),
                ("assistant", "Then set an alarm for five."),
            ]
        ):
            record_turn(repos, ref=str(n), text=said, author=who, episode="chat", created_at=NOW + timedelta(minutes=n))
    index = MemoryIndex(db, embedder, chroma_path=tmp_path / "chroma", clock=lambda: NOW + timedelta(days=1))
    try:
        index.sync(flush=True)
        assert index.follow_up.run_pending().deep_parts > 0  # the parts past the write's share
        hits = index.search("Where is the spare key to the boathouse?", k=3)
        assert hits[0].item.ref == "1"
        hits = index.search("Where did Ann plant the tomatoes?", k=3)
        assert hits[0].item.ref == "2"
    finally:
        index.close()
        db.close()


def test_a_postgres_database_from_before_the_full_text_index_is_upgraded(pg_url):
    from sqlalchemy import create_engine

    name = "retrieval_upgrade"
    admin = create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://", 1), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {name}"))
        conn.execute(text(f"CREATE DATABASE {name}"))
    url = pg_url.rsplit("/", 1)[0] + f"/{name}"
    db = Database.open(url=url)
    _write_conversation(db)
    with db.unit() as repos:
        repos.session.execute(text("DROP TABLE memory_fts"))  # as a v8 database was
        repos.session.execute(text("UPDATE schema_version SET version = 8"))
    db.close()
    db = Database.open(url=url)
    with db.unit() as repos:
        assert repos.items.lexical.count() == 8
        said, heard = repos.items.find("message", "1:3").id, repos.items.find("message", "1:2").id
        assert repos.items.lexical.candidates(["cello"], 5) == [said, heard]  # its own words rank above a neighbour's
    db.close()
    admin.dispose()


def test_each_persona_schema_of_a_deployment_has_its_own_full_text_index(pg_url):
    from tests.integration.fleet_parts import schemas_seen

    a = Database.open(url=pg_url, schema="lexical_a")
    b = Database.open(url=pg_url, schema="lexical_b")
    with a.unit() as repos:
        record_turn(repos, ref="1", text="The heron fishes at the old pier.", author="Ann", episode="e")
    with b.unit() as repos:
        record_turn(repos, ref="1", text="Bread rises slowly in a cold kitchen.", author="Bob", episode="e")
    with a.unit() as repos:
        assert repos.items.lexical.candidates(["heron"], 5) == [repos.items.find("message", "1").id]
    with schemas_seen(b.base_engine) as seen, b.unit() as repos:
        assert repos.items.lexical.candidates(["heron"], 5) == [] and repos.items.lexical.count() == 1
        assert repos.items.lexical.document_frequencies(["bread", "heron"], 10) == {"bread": 1, "heron": 0}
        assert set(repos.items.lexical.sample(5)) == {repos.items.find("message", "1").id}
    touching = [(statement, schemas) for statement, schemas in seen if "memory_fts" in statement]
    assert touching and all(schemas == ["lexical_b"] for _, schemas in touching), touching
    a.close()
    b.close()


def test_texts_are_batched_by_their_length_in_tokens_and_padding_changes_no_vector(embedder, monkeypatch):
    """Batches are formed by tokens, not characters ("1234567890" is ten characters and many tokens; "Hey" is
    three and one): each run is as wide as its longest text, and a text's vector is the one it has alone."""
    texts = [
        "Hey",
        "9081726354 4455667788",
        "a cat",
        "Extraordinarily",
        "photosynthesis-adjacent biochemistry",
        "ok",
        "We went to the lake on Sunday and swam until dusk.",
        "1234567890",
    ]
    alone = np.vstack([embedder.embed([t]) for t in texts])
    session, tokenizer = embedder.load()
    widths, run = [], session.run

    def recording(outputs, feed):
        widths.append(feed["input_ids"].shape[1])
        assert feed["attention_mask"][:, -1].any()  # the widest text of the batch fills it: no all-padding column
        return run(outputs, feed)

    monkeypatch.setattr(embedder, "batch_size", 3)
    monkeypatch.setattr(session, "run", recording)
    together = embedder.embed(texts)
    lengths = sorted(len(tokenizer.encode(t).ids) for t in texts)
    # (the batches run on several threads at once: in any order)
    assert sorted(widths) == sorted(max(lengths[i : i + 3]) for i in range(0, len(texts), 3))
    assert np.allclose(together, alone, atol=1e-5)


def test_sentence_vectors_are_pooled_by_default_or_encoded_on_their_own(tmp_path, embedder):
    from memory.retrieval.index import RetrievalSettings

    body = "I adopted a beagle puppy from the shelter. Work has been exhausting with deadlines."
    found = {}
    for mode in ("pooled", "separate"):
        db = Database.open(tmp_path / mode)
        with db.unit() as repos:
            item = record_turn(repos, ref="1", text=body, author="Ann", episode="e")
        index = MemoryIndex(
            db, embedder, chroma_path=tmp_path / mode / "chroma", config=RetrievalSettings(sentence_vectors=mode)
        )
        index.sync(flush=True)
        index.close()
        with db.unit() as repos:  # what was stored: every vector in the database, the whole item's in Chroma
            found[mode] = repos.items.vectors.get(embedder.name, [item.id])[item.id].vectors.astype(np.float32)
        assert index.collection.get(ids=[str(item.id)], include=["embeddings"])["embeddings"].shape == (1, 384)
        assert index.collection.count() == 1
        db.close()
    alone = embedder.embed(["Ann: " + sentence for sentence in parts(body)])
    assert found["separate"].shape == found["pooled"].shape == (3, 384)
    assert float(np.abs(found["separate"][1:] - alone).max()) < 1e-2  # stored as float16
    assert float(np.abs(found["pooled"][1:] - alone).max()) > 0.05  # pooled in context: not the same vectors
    assert float(np.abs(found["pooled"][0] - found["separate"][0]).max()) < 1e-2  # the whole item: the same pass


def test_near_copies_filling_the_first_candidates_still_leave_k_distinct_results(tmp_path, embedder, monkeypatch):
    """Ten wordings of one turn (whole-item cosine 0.93–0.997 on MiniLM) fill the engines' first candidates: the
    guard keeps one of them and asks the engines for more rather than answering with fewer than k."""
    from memory.retrieval.index import Query, RetrievalSettings

    db = Database.open(tmp_path)
    with db.unit() as repos:
        for n, said in enumerate(
            ["The shelter asked us to walk the dogs every weekend.", "The puppy's vet visit is on Friday."]
        ):
            record_turn(
                repos, ref=f"other{n}", text=said, author="Ann", episode=f"o{n}", created_at=NOW - timedelta(days=9)
            )
        tails = [".", "!", "!!", "...", ", honestly.", ", really.", " :)", ", lol.", ", haha.", ", you know."]
        for n, tail in enumerate(tails):
            record_turn(
                repos,
                ref=f"copy{n}",
                author="Ann",
                episode=f"c{n}",
                created_at=NOW - timedelta(days=1),
                text=f"I adopted a beagle puppy from the shelter last week and she chews everything{tail}",
            )
    index = MemoryIndex(
        db, embedder, chroma_path=tmp_path / "chroma", clock=lambda: NOW, config=RetrievalSettings(candidates=3)
    )
    index.sync(flush=True)
    asked = []
    nearest = index.store.nearest
    monkeypatch.setattr(
        index.store, "nearest", lambda vectors, n, where=None: asked.append(n) or nearest(vectors, n, where)
    )
    try:
        hits = index.search(Query(text="What did Ann adopt from the shelter?", k=3))
        assert len(asked) > 1  # the first candidates held too few distinct memories
        assert len(hits) == 3 and sum(h.item.ref.startswith("copy") for h in hits) == 1
        with db.reading() as repos:
            vectors = index.caches.vectors_of(repos, [h.item.id for h in hits])
        whole = np.vstack([vectors[h.item.id][0] for h in hits])
        whole /= np.linalg.norm(whole, axis=1, keepdims=True)
        assert (whole @ whole.T)[np.triu_indices(3, 1)].max() < 0.9  # no two results are near-copies
    finally:
        index.close()
        db.close()


class CountedModel:
    """The real model, its calls counted (texts per call; a memory's document as prefix + body)."""

    def __init__(self, model: LocalEmbedder):
        self.model, self.name, self.calls = model, model.name, []

    def embed(self, texts):
        self.calls.append(list(texts))
        return self.model.embed(texts)

    def embed_parts(self, documents):
        self.calls.append([prefix + body for prefix, body, _ in documents])
        return self.model.embed_parts(documents)


def test_a_text_and_a_memory_embedded_once_are_not_embedded_again(tmp_path, embedder):
    """What the tick embeds — its thought for the reflexes, the memory it becomes ahead of the write — is kept by the
    index (memory/retrieval/caches.py): asked again, and written (twice: the thought came back), nothing reaches the
    model; the kept vectors are the model's own for each text alone."""
    model = CountedModel(embedder)
    db = Database.open(tmp_path)
    index = MemoryIndex(db, model, chroma_path=tmp_path / "chroma", clock=lambda: NOW)
    thought = "The beagle slept through the storm. Then she chewed my slippers to bits."
    document = index.record_texts(thought, "Ann")
    first = index.embed_texts([thought, "Bob: the storm kept me up."], documents=[document])
    assert model.calls == [[thought, "Bob: the storm kept me up.", "Ann: " + thought]]  # one call for all three
    for ref in ("1", "2"):
        with db.unit() as repos:
            record_turn(repos, ref=ref, text=thought, author="Ann", episode="e", created_at=NOW)
        index.sync(flush=True)
        assert np.array_equal(index.embed_texts([thought, "Bob: the storm kept me up."], documents=[document]), first)
    assert len(model.calls) == 1
    alone = embedder.embed([thought, "Bob: the storm kept me up."])
    assert float(np.abs(first - alone).max()) < 1e-6
    kept = index.embedding.documents[(document[0], document[1], tuple(document[2]))]
    assert float(np.abs(kept - embedder.embed_parts([document])[0]).max()) < 1e-6 and len(kept) == 3  # + 2 sentences
    with db.unit() as repos:
        ids = repos.items.ids_of("message", ["1", "2"])
        stored = repos.items.vectors.get(embedder.name, ids)
    assert len(stored) == 2 and all(np.array_equal(s.vectors, kept.astype(np.float16)) for s in stored.values())
    assert {h.item.ref for h in index.search("What did the dog chew?", k=1)} <= {"1", "2"}
    index.close()
    db.close()
