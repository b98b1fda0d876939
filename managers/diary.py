"""The cognitive diary (HMP `diary_entries`): written only by explicit commands; reading an archived entry brings it
back, and reading one counts as using it (retrieval ranks what is used)."""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from typing import TYPE_CHECKING

from memory.models import DiaryEntry
from memory.repositories.diary import DEBUG_TAG_PREFIX

if TYPE_CHECKING:
    from managers import Managers


class DiaryManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    def add(
        self,
        text: str,
        *,
        tags: Iterable[str] = (),
        emotions: Iterable[str] = (),
        priority: int = 0,
        thread_id: str | None = None,
        tick: int | None = None,
    ) -> DiaryEntry:
        return self.repos.diary.add(
            text, tags=tags, emotions=emotions, priority=priority, thread_id=thread_id, tick=tick
        )

    def list(
        self,
        *,
        limit: int = 10,
        tag: str | None = None,
        include_archived: bool = False,
        pinned_only: bool = False,
        debug: bool | None = False,
    ) -> builtins.list[DiaryEntry]:
        """Entries tagged `debug:*` (HMP's debug marks, traces) are kept apart: left out unless `debug` is True (only
        them) or None (all), or the tag asked for is a debug one."""
        if tag and tag.startswith(DEBUG_TAG_PREFIX):
            debug = None
        return self.repos.diary.list(
            limit=limit, tag=tag, include_archived=include_archived, pinned_only=pinned_only, debug=debug
        )

    def read(self, entry_id: int) -> DiaryEntry:
        """The entry, restored if it was archived, and marked used now."""
        entry = self.repos.diary.get(entry_id)
        if entry.status == "archived":
            self.repos.restore("diary", entry.id)
        self.house.memory.touch("diary", entry.id)
        return entry

    def update(
        self,
        entry_id: int,
        *,
        text: str | None = None,
        tags: builtins.list[str] | None = None,
        priority: int | None = None,
    ) -> DiaryEntry:
        """Change what is given (None: unchanged)."""
        return self.repos.diary.update(entry_id, text=text, tags=tags, priority=priority)

    def set_pinned(self, entry_id: int, pinned: bool) -> DiaryEntry:
        return self.repos.diary.set_pinned(entry_id, pinned)


__all__ = ["DiaryManager"]
