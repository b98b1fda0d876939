"""Soft deletes: what the persona deletes is archived (out of lists, counts and retrieval) and can be restored;
`purge` (a human's delete) is for good. SQLite + a real Chroma index with the deterministic HashEmbedder."""

from datetime import UTC, datetime, timedelta

import pytest

from memory import Database
from memory.repositories import NotFound
from memory.retrieval.index import Query

NOW = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)


@pytest.fixture
def db(tmp_path):
    database = Database.open(tmp_path)
    yield database
    database.close()


def found(index, text: str, **kwargs) -> set[tuple[str, str]]:
    return {(h.item.tier, h.item.ref) for h in index.search(Query(text=text, k=10, **kwargs))}


@pytest.mark.parametrize("tier", ["diary", "llm_memory", "concept"])
def test_an_archived_memory_leaves_lists_and_search_and_comes_back(index, tier):
    with index.db.unit() as repos:
        row = {
            "diary": lambda: repos.diary.add("The heron fishes at the old pier"),
            "llm_memory": lambda: repos.llm_memory.add("The heron fishes at the old pier"),
            "concept": lambda: repos.concepts.add("heron", "The heron fishes at the old pier"),
        }[tier]()
    listed = {
        "diary": lambda r: r.diary.list(),
        "llm_memory": lambda r: r.llm_memory.recent(),
        "concept": lambda r: r.concepts.list(),
    }[tier]
    assert (tier, str(row.id)) in found(index, "heron pier")
    with index.db.unit() as repos:
        assert repos.archive(tier, row.id, NOW)
        assert not repos.archive(tier, row.id, NOW)  # already archived: nothing changes
        assert listed(repos) == [] and repos.items.find(tier, row.id).status == "archived"
    assert (tier, str(row.id)) not in found(index, "heron pier")
    assert (tier, str(row.id)) in found(index, "heron pier", include_archived=True)
    with index.db.unit() as repos:
        assert [(a.tier, a.ref) for a in repos.archived()] == [(tier, str(row.id))]
        assert repos.restore(tier, row.id) and not repos.restore(tier, row.id)
        assert [r.id for r in listed(repos)] == [row.id] and repos.archived() == []
    assert (tier, str(row.id)) in found(index, "heron pier")


def test_archiving_a_concept_takes_its_links_and_restoring_brings_back_only_those(db):
    with db.unit() as repos:
        tide, moon, sea, salt = (repos.concepts.add(name).id for name in ("tide", "moon", "sea", "salt"))
        pulls = repos.links.add(moon, tide, "pulls").id
        part_of = repos.links.add(tide, sea, "part_of").id
        tastes = repos.links.add(sea, salt, "tastes_of").id
        own = repos.links.add(tide, salt, "brings").id
        assert repos.links.archive(own)  # the persona archived this link itself
    with db.unit() as repos:
        assert repos.concepts.archive(tide) and repos.concepts.archive(moon)
        assert [link.id for link in repos.links.list()] == [tastes]
        assert {link.id for link in repos.links.list(include_archived=True)} == {pulls, part_of, tastes, own}
    with db.unit() as repos:
        assert repos.concepts.restore(tide)
        assert [link.id for link in repos.links.list(tide)] == [part_of]  # the moon is still archived
        with pytest.raises(ValueError, match="restore the concept first"):
            repos.links.restore(pulls)
        assert repos.concepts.restore(moon)
        assert [link.id for link in repos.links.list(tide)] == [pulls, part_of]  # `own` stays archived
        assert repos.restore("link", own) and not repos.restore("link", own)
        assert repos.archive("link", part_of, NOW) and repos.links.get(part_of).status == "archived"


def test_archived_goals_and_tasks_are_left_out_unless_asked(db):
    with db.unit() as repos:
        goal = repos.goals.add("Understand the sea")
        sub = repos.goals.add("Learn the tides", parent_id=goal.id)
        done = repos.tasks.add("Read the tables", goal_id=goal.id)
        repos.tasks.update(done.id, status="done")
        cycle = repos.tasks.add("Watch the harbour", goal_id=goal.id)
        repos.tasks.set_repl(cycle.id, repl_status="running")
        assert repos.goals.progress(goal.id) == {"tasks": 2, "done": 1, "completion_rate": 50.0}
        assert repos.archive("goal", sub.id, NOW) and repos.archive("task", cycle.id, NOW + timedelta(seconds=1))
        assert not repos.archive("task", cycle.id, NOW) and not repos.archive("task", 999, NOW)
    with db.unit() as repos:
        assert [g.id for g in repos.goals.list()] == [goal.id]
        assert [g.id for g in repos.goals.list(include_archived=True)] == [goal.id, sub.id]
        assert repos.goals.subgoals(goal.id) == [] and [g.id for g in repos.goals.parents(sub.id)] == [goal.id]
        assert [g.id for g in repos.goals.subgoals(goal.id, include_archived=True)] == [sub.id]
        assert [t.id for t in repos.tasks.list()] == [done.id] and repos.tasks.list(open_only=True) == []
        assert repos.tasks.counts() == {"done": 1} and repos.tasks.counts(include_archived=True) == {
            "done": 1,
            "open": 1,
        }
        assert repos.tasks.running_cycles() == [] and [
            t.id for t in repos.tasks.running_cycles(include_archived=True)
        ] == [cycle.id]
        assert repos.goals.progress(goal.id) == {"tasks": 1, "done": 1, "completion_rate": 100.0}
        with pytest.raises(ValueError, match="cycle"):  # an archived subgoal still counts against cycles
            repos.goals.link(sub.id, goal.id)
        assert [(a.tier, a.ref, a.title) for a in repos.archived()] == [
            ("task", str(cycle.id), "Watch the harbour"),
            ("goal", str(sub.id), "Learn the tides"),
        ]
        assert repos.restore("goal", sub.id) and repos.restore("task", cycle.id) and not repos.restore("task", cycle.id)
        assert repos.goals.get(sub.id).archived_at is None and len(repos.tasks.list()) == 2


def test_archive_takes_any_catalogue_tier_and_refuses_what_it_cannot_name(index):
    from memory.store import record_turn

    with index.db.unit() as repos:
        record_turn(repos, ref="msg:7", text="The lighthouse blinks twice", author="Lumen", episode="main")
        assert repos.archive("message", "msg:7", NOW) and repos.items.find("message", "msg:7").status == "archived"
        assert not repos.archive("diary", "the first one", NOW) and not repos.restore("goal", "x")
        assert not repos.archive("diary", 42, NOW) and not repos.archive("kb", "1:0", NOW)
    assert ("message", "msg:7") not in found(index, "lighthouse blinks")
    with index.db.unit() as repos:
        assert repos.restore("message", "msg:7")
    assert ("message", "msg:7") in found(index, "lighthouse blinks")


def test_archived_lists_every_tier_most_recent_first(db):
    with db.unit() as repos:
        entry = repos.diary.add("A storm over the bay")
        tide, moon = repos.concepts.add("tide").id, repos.concepts.add("moon").id
        link = repos.links.add(moon, tide, "pulls")
        goal = repos.goals.add("Sail to the island", description="in spring")
        repos.archive("diary", entry.id, NOW)
    with db.unit() as repos:
        repos.archive("link", link.id, NOW)
    with db.unit() as repos:
        repos.archive("goal", goal.id, datetime.now(UTC) + timedelta(minutes=1))
    with db.unit() as repos:
        rows = repos.archived()
        assert [(r.tier, r.ref) for r in rows] == [
            ("goal", str(goal.id)),
            ("link", str(link.id)),
            ("diary", str(entry.id)),
        ]
        assert (rows[0].title, rows[0].text) == ("Sail to the island", "in spring")
        assert rows[1].title == "moon —pulls→ tide" and rows[2].text == "A storm over the bay"
        assert len(repos.archived(limit=2)) == 2


def test_purge_deletes_for_good(index):
    with index.db.unit() as repos:
        entry = repos.diary.add("The heron fishes at the old pier")
        note = repos.llm_memory.add("plan: photograph the heron")
        heron, pier = repos.concepts.add("heron").id, repos.concepts.add("pier").id
        link = repos.links.add(heron, pier, "fishes_at").id
        other = repos.links.add(pier, heron, "shelters").id
        goal = repos.goals.add("Photograph birds")
        sub = repos.goals.add("Photograph the heron", parent_id=goal.id)
        task = repos.tasks.add("Buy a lens", goal_id=goal.id)
        repos.archive("diary", entry.id, NOW)  # archived or not, purge deletes
    with index.db.unit() as repos:
        repos.diary.purge(entry.id)
        repos.llm_memory.purge(note.id)
        repos.links.purge(other)
        repos.concepts.purge(heron)
        repos.tasks.purge(task.id)
        repos.goals.purge(goal.id)
    with index.db.unit() as repos:
        for get, row_id in (
            (repos.diary.get, entry.id),
            (repos.llm_memory.get, note.id),
            (repos.concepts.get, heron),
            (repos.links.get, link),
            (repos.goals.get, goal.id),
            (repos.tasks.get, task.id),
        ):
            with pytest.raises(NotFound):
                get(row_id)
        assert repos.items.find("diary", entry.id).status == "deleted" and repos.goals.parents(sub.id) == []
        assert not repos.restore("diary", entry.id) and repos.archived() == []
        with pytest.raises(NotFound):
            repos.diary.purge(entry.id)
    assert not {("diary", str(entry.id)), ("llm_memory", str(note.id))} & found(index, "heron", include_archived=True)


def test_tag_stats_leave_out_what_is_archived(db):
    with db.unit() as repos:
        kept = repos.diary.add("calm sea", tags=["sea"])
        gone = repos.diary.add("stormy sea", tags=["sea", "storm"])
        goal = repos.goals.add("Sail", tags=["sea"])
        repos.tasks.add("Mend the sail", tags=["boat"])
        repos.archive("diary", gone.id, NOW)
        repos.archive("goal", goal.id, NOW)
        assert repos.tags.stats() == {"sea": 1, "boat": 1}
        assert repos.tags.stats(include_archived=True) == {"sea": 3, "storm": 1, "boat": 1}
        assert repos.tags.stats("diary") == {"sea": 1} and kept.tags == ["sea"]
        with pytest.raises(ValueError, match="source must be one of all, diary"):
            repos.tags.stats("notes")
