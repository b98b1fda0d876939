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
