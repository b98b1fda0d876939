"""The prompt's plain-row reads give what the objects they replace gave: the latest strategy, the core and notepad
blocks (made, empty, when missing), the newest active llm_memory entries oldest first."""

from __future__ import annotations

from datetime import UTC, datetime

from memory.db import Database
from nodes.steps.s04_prepare_context.memory_lines import strategy_line
from tests.fakes.managers import managers_over


def _strategy(repos, tainted: bool = False) -> list[str]:
    standing = managers_over(repos).prompt.standing(
        datetime.now(UTC), focus_tags=None, delivery="auto", episode_days=3, tainted=tainted
    )
    return strategy_line(standing)


def test_strategy_line_is_the_latest_insights_strategy(tmp_path):
    db = Database.open(tmp_path)
    with db.unit() as repos:
        assert _strategy(repos) == [] and _strategy(repos, tainted=True) == []
        repos.insights.add("first", strategy="walk the shore")
        assert _strategy(repos) == ["walk the shore"] == _strategy(repos, tainted=True)
        repos.insights.add("second", strategy="")
        assert _strategy(repos) == [] == _strategy(repos, tainted=True)  # the latest has none: nothing older is shown
    db.close()


def test_block_contents_make_missing_blocks_as_many_does(tmp_path):
    db = Database.open(tmp_path)
    with db.unit() as repos:
        assert repos.blocks.contents("core", "notepad") == {"core": "", "notepad": ""}
    with db.unit() as repos:
        assert set(repos.blocks.many("core", "notepad")) == {"core", "notepad"}  # stored by the first read
        repos.blocks.write("notepad", "tides at six")
    with db.unit() as repos:
        assert repos.blocks.contents("core", "notepad") == {"core": "", "notepad": "tides at six"}
    db.close()


def test_llm_memory_recent_lines_match_recent(tmp_path):
    db = Database.open(tmp_path)
    with db.unit() as repos:
        for i in range(5):
            repos.llm_memory.add(f"idea {i}", title=f"t{i}" if i % 2 else "")
        repos.llm_memory.archive(repos.llm_memory.recent(5)[2].id)
        rows = repos.llm_memory.recent_lines(3)
        assert [(r.id, r.title, r.content) for r in rows] == [
            (m.id, m.title, m.content) for m in repos.llm_memory.recent(3)
        ]
        assert [r.content for r in rows] == ["idea 1", "idea 3", "idea 4"]
    db.close()


def test_focus_text_takes_the_last_thought_else_the_last_continuation(tmp_path):
    from memory.models import Thread
    from nodes.steps.s04_prepare_context.memory_lines import focus_text

    db = Database.open(tmp_path)
    with db.unit() as repos:
        repos.session.add(Thread(id="main"))
        repos.session.flush()
        assert focus_text(managers_over(repos), "main", [], []) == ""
        repos.messages.add_keyed("c", thread_id="main", kind="continuation", content="a continued line")
        assert focus_text(managers_over(repos), "main", [], []) == "a continued line"
        repos.messages.add_keyed("r1", thread_id="main", kind="response", content="first thought")
        repos.messages.add_keyed("r2", thread_id="main", kind="response", content="x" * 900 + "latest thought")
        text = focus_text(managers_over(repos), "main", [], [])
        assert text.endswith("latest thought") and "first" not in text and len(text) < 900
    db.close()


def test_task_counts_and_the_humans_last_note_time(tmp_path):
    db = Database.open(tmp_path)
    with db.unit() as repos:
        assert repos.tasks.counts() == {} and repos.notes.latest_human_at() is None
        repos.tasks.add("one")
        repos.tasks.add("two")
        note = repos.notes.add("hello", source="user")
        assert repos.tasks.counts() == {"open": 2}
        at = repos.notes.latest_human_at()
        assert at is not None and at.replace(tzinfo=None) == note.created_at.replace(tzinfo=None)
    db.close()


def test_the_resident_memory_is_read_at_once_as_the_prompt_shows_it(tmp_path):
    """`PromptManager.standing`: abstracts on request name only the newest; otherwise the focus tags' newest first,
    the newest of all when none has the tags; the blocks, goals, open tasks and the model's notes beside them."""
    from nodes.steps.s04_prepare_context.memory_lines import abstract_lines, goal_lines

    db = Database.open(tmp_path)
    now = datetime.now(UTC)
    with db.unit() as repos:
        older = repos.abstracts.add("tides", "the moon pulls", tags=["sea"])
        newest = repos.abstracts.add("bread", "flour and time", tags=["kitchen"])
        repos.blocks.write("notepad", "tides at six")
        repos.goals.add("learn the tides", horizon="short", priority=5)
        repos.tasks.add("read a tide table")
        repos.llm_memory.add("the sea is patient", title="idea")
    with db.unit() as repos:
        prompt = managers_over(repos).prompt
        asked = prompt.standing(now, focus_tags=None, delivery="manual", episode_days=3, tainted=False)
        assert asked.abstract_on_request == newest.id and list(asked.abstracts) == []
        assert abstract_lines(asked, on_request="ask for {id}") == [f"ask for {newest.id}"]
        focused = prompt.standing(now, focus_tags=["sea"], delivery="auto", episode_days=3, tainted=False)
        assert [a.id for a in focused.abstracts] == [older.id] and focused.abstract_on_request is None
        unfocused = prompt.standing(now, focus_tags=["nothing"], delivery="auto", episode_days=3, tainted=False)
        assert [a.id for a in unfocused.abstracts] == [newest.id, older.id]  # newest first; shown oldest first
        assert abstract_lines(unfocused)[-1].startswith(f"[abstract {newest.id} bread]")
        assert (unfocused.core, unfocused.notepad) == ("", "tides at six")
        assert [m.content for m in unfocused.ideas] == ["the sea is patient"]
        lines = goal_lines(unfocused)
        assert any("learn the tides" in line and "short" in line for line in lines)
        assert "tasks: 1 open" in lines and any("read a tide table" in line for line in lines)
    db.close()
