"""Notes: the shared notepad between the human, the persona, its tasks and the system (HMP `notes`) — and the
messages the persona sends its human, stored as outgoing notes.

Rules: a task sub-cycle's notes go to the main loop unread (source `llm:task`); the persona rewrites the text only of
its own notes (another's words are never rewritten; their tags and priority it may change); a delete hides the note,
restorable."""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from memory.models import Note
from memory.repositories import NotFound
from memory.tiers import Conflict

if TYPE_CHECKING:
    from managers import Managers

OWN_SOURCES = ("llm", "llm:task")  # what the persona wrote itself


class NoteManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    def list(self, *, source: str | None = None, unread_only: bool = False, limit: int = 10) -> builtins.list[Note]:
        """The visible notes (hidden ones left out)."""
        return self.repos.notes.list(source=source, unread_only=unread_only, limit=limit, include_hidden=False)

    def read(self, note_id: int) -> Note:
        """The note, marked read; NotFound when there is none."""
        note = self.repos.notes.get(note_id)
        if note is None:
            raise NotFound(f"no note {note_id}")
        self.repos.notes.mark_read([note_id])
        return note

    def add(self, text: str, *, tags: Iterable[str] = (), priority: int = 0, task_id: int | None = None,
            thread_id: str | None = None, llm_id: str | None = None, now: datetime | None = None) -> Note:
        """The persona's note; written in a task's sub-cycle (`task_id`), it goes to the main loop unread."""
        from_task = task_id is not None
        return self.repos.notes.add(text, source="llm:task" if from_task else "llm", tags=list(tags), task_id=task_id,
                                    priority=priority, thread_id=thread_id, llm_id=llm_id, read=not from_task,
                                    created_at=now)

    def tag(self, note_id: int, tags: builtins.list[str]) -> Note:
        note = self.repos.notes.set_tags(note_id, tags)
        if note is None:
            raise NotFound(f"no note {note_id}")
        return note

    def mark_read(self, ids: Iterable[int], read: bool = True) -> int:
        return self.repos.notes.mark_read([int(i) for i in ids], read=read)

    def update(self, note_id: int, *, text: str | None = None, tags: builtins.list[str] | None = None,
               priority: int | None = None) -> Note:
        """Change what is given; NotFound for a missing or hidden note, Conflict for another's text."""
        note = self.repos.notes.get(note_id)
        if note is None or note.hidden:
            raise NotFound(f"no note {note_id}")
        if text is not None and note.source not in OWN_SOURCES:
            raise Conflict(f"note {note_id} is from {note.source}; I change only the text of my own notes "
                           "(its tags and priority I may change)", field="text")
        self.repos.notes.update(note_id, text=text, tags=tags, priority=priority)
        return note

    def hide(self, note_id: int) -> bool:
        """The persona's delete: hidden (out of lists and the prompt), restorable; False when there is nothing to
        hide."""
        return self.repos.notes.archive(note_id)

    def outgoing(self, text: str, *, to: str, thread_id: str | None, llm_id: str | None, now: datetime) -> Note:
        """A message to the human (or `to`), kept as an outgoing note."""
        return self.repos.notes.add(text, source="llm", thread_id=thread_id, llm_id=llm_id, read=True,
                                    tags=["outgoing", f"to:{to}"], created_at=now)


__all__ = ["OWN_SOURCES", "NoteManager"]
