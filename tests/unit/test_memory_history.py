"""The memory history: every change to a memory tier lands in `memory_history` from one flush listener — created,
updated (the changed columns before and after), archived, restored, deleted — naming who did it (the unit's actor:
"persona" by default, "human" for the web), in the same transaction as the change."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory import Database

NOW = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
DIARY = (
    '# Commands:\n[{"cmd_id": "d1", "type": "diary.add", "args": {"text": "The tide came in twice today."}}, '
    '{"cmd_id": "c1", "type": "core.update", "args": {"text": "I love the sea."}}]\n# End commands'
)


@pytest.fixture
def db(tmp_path):
    database = Database.open(tmp_path)
    yield database
    database.close()


def changes(db: Database, **where) -> list[tuple[str, str, str, str]]:
    with db.unit() as repos:
        return [(c.actor, c.action, c.tier, c.ref) for c in reversed(repos.history.list(limit=500, **where))]


def test_the_persona_s_commands_in_a_tick_are_history_named_persona(agent_factory):
    from tests.fakes.llm import FakeLLM

    agent = agent_factory(FakeLLM("fake", responses=[DIARY]))
    agent.tick()
    with agent.services.db.unit() as repos:
        rows = list(reversed(repos.history.list(limit=100)))
        entry = repos.diary.list()[-1]
    diary = [c for c in rows if c.tier == "diary"]
    assert [(c.actor, c.action, c.ref) for c in diary] == [("persona", "create", str(entry.id))]
    assert diary[0].before is None and diary[0].after["text"] == "The tide came in twice today."
    core = [c for c in rows if c.tier == "core" and c.action == "update"]
    assert core and core[-1].actor == "persona" and "I love the sea." in core[-1].after["content"]


def test_an_update_keeps_only_the_changed_columns_before_and_after(db):
    with db.unit() as repos:
        entry = repos.diary.add("the sea", tags=["sea"])
    with db.unit(actor="human") as repos:
        repos.diary.update(entry.id, text="the grey sea", tags=["sea"])
    with db.unit() as repos:
        last = repos.history.list(tier="diary", ref=entry.id, limit=1)[0]
    assert (last.actor, last.action) == ("human", "update")
    # tags (set to what they were) and updated_at are not changes
    assert last.before == {"text": "the sea"} and last.after == {"text": "the grey sea"}


def test_archive_restore_and_delete_of_every_kind_of_tier(db):
    with db.unit() as repos:
        entry = repos.diary.add("a diary entry")
        goal = repos.goals.add("learn the tides")
        a, b = repos.concepts.add("sea"), repos.concepts.add("moon")
        link = repos.links.add(a.id, b.id, "pulled_by")
        entity = repos.entities.merge("Ada", description="a friend")
    with db.unit(actor="human") as repos:
        for tier, ref in (("diary", entry.id), ("goal", goal.id), ("entity", entity.id), ("link", link.id)):
            assert repos.archive(tier, ref, NOW)
    with db.unit(actor="human") as repos:
        for tier, ref in (("diary", entry.id), ("goal", goal.id), ("entity", entity.id), ("link", link.id)):
            assert repos.restore(tier, ref)
    with db.unit(actor="human") as repos:
        repos.concepts.purge(a.id)  # its link goes with it, each recorded
    found = changes(db)
    for tier, ref in (("diary", entry.id), ("goal", goal.id), ("entity", entity.id), ("link", link.id)):
        by_human = [a for actor, a, t, r in found if (t, r) == (tier, str(ref)) and actor == "human"]
        assert by_human[:2] == ["archive", "restore"], tier
    assert ("human", "delete", "concept", str(a.id)) in found and ("human", "delete", "link", str(link.id)) in found
    with db.unit() as repos:
        deleted = repos.history.list(tier="concept", ref=a.id, action="delete")[0]
    assert deleted.before["name"] == "sea" and deleted.after is None


def test_core_memory_history_and_its_versions(db):
    with db.unit() as repos:
        repos.blocks.write("core", "I am Lumen.")
    with db.unit(actor="human") as repos:
        repos.blocks.write("core", "I am Lumen, of the sea.")
        version = repos.blocks.latest_version("core")
    with db.unit(actor="human") as repos:
        assert repos.restore("core", version.id)
    with db.unit() as repos:
        updates = [(c.actor, c.before, c.after) for c in reversed(repos.history.list(tier="core", action="update"))]
    assert updates == [
        ("persona", {"content": ""}, {"content": "I am Lumen."}),
        ("human", {"content": "I am Lumen."}, {"content": "I am Lumen, of the sea."}),
        ("human", {"content": "I am Lumen, of the sea."}, {"content": "I am Lumen."}),
    ]


def test_nothing_changed_is_no_history_and_a_rollback_takes_the_history_with_it(db):
    with db.unit() as repos:
        entry = repos.diary.add("steady")
    before = changes(db)
    with db.unit() as repos:
        repos.diary.update(entry.id, text="steady")  # same text: only updated_at moves
        repos.notes.add("not a memory tier", source="user")
    assert changes(db) == before
    with pytest.raises(RuntimeError), db.unit() as repos:
        repos.diary.update(entry.id, text="changed, then rolled back")
        repos.session.flush()
        raise RuntimeError("boom")
    assert changes(db) == before


def test_values_are_bounded(db):
    with db.unit() as repos:
        entry = repos.llm_memory.add("x" * 20000, tags=[f"t{i}" for i in range(200)])
    with db.unit() as repos:
        created = repos.history.list(tier="llm_memory", ref=entry.id)[0]
    assert len(created.after["content"]) <= 4001 and len(created.after["tags"]) == 50


def test_a_knowledge_base_document_archives_as_one_change(db, tmp_path):
    from memory.knowledge import ingest

    path = tmp_path / "tides.md"
    path.write_text("\n\n".join(f"Paragraph {i}: " + "the moon pulls the sea. " * 30 for i in range(6)))
    with db.unit() as repos:
        doc = ingest(repos, path)
    assert doc.chunks > 1
    with db.unit(actor="human") as repos:
        assert repos.kb.set_status(doc.doc_id, "archived")
    assert [c for c in changes(db, tier="kb")] == [
        ("persona", "create", "kb", str(doc.doc_id)),
        ("human", "archive", "kb", str(doc.doc_id)),
    ]


def test_the_history_is_installed_on_every_new_sessionmaker_even_where_a_collected_one_stood():
    """A new sessionmaker may get the id() of a collected one; SQLAlchemy's `event.contains` then answered from the
    stale entry ("installed") and that database recorded no history at all."""
    from sqlalchemy import create_engine, func, select
    from sqlalchemy.orm import sessionmaker

    from memory.history import install
    from memory.models import Base, DiaryEntry, MemoryChange

    engine = create_engine("sqlite://")
    Base.metadata.create_all(engine)
    for i in range(300):
        maker = sessionmaker(engine)
        install(maker)
        with maker() as session, session.begin():
            session.add(DiaryEntry(text=f"entry {i}"))
        with maker() as session:
            assert session.scalar(select(func.count(MemoryChange.id))) == i + 1, f"sessionmaker {i}"
        del maker
    engine.dispose()
