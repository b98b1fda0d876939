"""The memory tiers declared once (memory/tiers.py) and the memory manager over them (managers/memory.py): typed
edits, refusals that name their field, and the same rules whichever door calls."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory import Database
from memory.tiers import (
    DIARY,
    FACTS,
    TIERS,
    Conflict,
    DiaryEdit,
    Invalid,
    NotEditable,
    RowNotFound,
    UnknownTier,
    tier_of,
)
from tests.fakes.managers import managers_over

NOW = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database.open(tmp_path)
    yield database
    database.close()


def test_every_tier_is_declared_once_with_what_may_be_done_to_it() -> None:
    assert list(TIERS) == [
        "core",
        "notepad",
        "llm_memory",
        "diary",
        "concept",
        "link",
        "goal",
        "task",
        "episode",
        "entity",
        "insight",
        "fact",
        "question",
        "kb",
    ]
    assert tier_of("diary") is DIARY and DIARY.searchable and DIARY.editable and DIARY.edit_model is DiaryEdit
    assert not TIERS["kb"].editable and TIERS["kb"].deletable and not TIERS["core"].deletable
    assert [f.name for f in DIARY.fields] == ["text", "tags", "priority", "pinned"]
    with pytest.raises(UnknownTier) as unknown:
        tier_of("dreams")
    assert unknown.value.field == "tier"


def test_a_typed_edit_changes_only_what_is_given(db: Database) -> None:
    with db.unit(actor="human") as repos:
        entry = repos.diary.add("The tide turned at noon.", tags=["sea"])
        done = managers_over(repos).memory.edit("diary", str(entry.id), DiaryEdit(pinned=True))
        assert done.changed and done.record is not None
        assert done.record.fields == {
            "text": "The tide turned at noon.",
            "tags": ["sea"],
            "priority": 0,
            "pinned": True,
        }
        assert done.record.actions == ["edit", "archive", "delete", "history"]


def test_refusals_name_their_field(db: Database) -> None:
    with db.unit(actor="human") as repos:
        memory = managers_over(repos).memory
        first = repos.concepts.add("tide")
        second = repos.concepts.add("moon")
        with pytest.raises(Invalid) as invalid:
            memory.edit("diary", "1", {"priority": 99})
        assert invalid.value.field == "priority"
        with pytest.raises(RowNotFound) as missing:
            memory.get("diary", "999")
        assert missing.value.field == "ref"
        with pytest.raises(Conflict) as taken:
            memory.edit("concept", str(second.id), {"name": first.name})
        assert taken.value.field == "name"
        with pytest.raises(Conflict):
            FACTS.archive(repos, "1", NOW)
        with pytest.raises(NotEditable) as kb:
            memory.edit("kb", "1", {})
        assert kb.value.field == "tier"
