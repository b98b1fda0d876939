"""Notes: the shared notepad between the human, the persona, its tasks and the system (HMP `notes`). (A human's words
come in, and the persona's messages go out, through the conversation: managers/conversation.py.)

Rules: a task sub-cycle's notes go to the main loop unread (source `llm:task`); the persona rewrites the text only of
its own notes (another's words are never rewritten; their tags and priority it may change); a delete hides the note,
restorable.

Distributed notes (HMP's "from the user's notepad to a distributed chat"): every note is private — it stays here —
until `share` makes one of the persona's own public: it goes, signed, to the persona's friends (peers tagged
`friend`), who take it into their notes and carry it on to theirs (managers/mesh.py); its mentions and hashtags
are parsed here, when it is shared, so no receiver has to."""

from __future__ import annotations

import builtins
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from memory.models import Note
from memory.note_kinds import OWN_SOURCES, OWNER_SOURCES, NoteSource
from memory.repositories import NotFound
from memory.tiers import Conflict
from persona.settings import NotesFilter

if TYPE_CHECKING:
    from managers import Managers
    from managers.loop import ThreadCycle
    from persona.settings import Settings

PUBLIC = "public"  # the tag of a note this persona shared with its friends
MENTION = re.compile(r"(?<![\w@])@([\w.-]{1,60})")
HASHTAG = re.compile(r"(?<![\w#&])#(\w[\w-]{0,59})")


SCAN_FACTOR = 3  # notes read per note shown when a mention must be checked to its end
CLEANUP_MAX = 2000  # notes a cleanup hides at once (the next one goes on)


@dataclass(frozen=True)
class Incoming:
    """The unread notes an auto-mode tick shows, and how many unread notes there are in all."""

    notes: builtins.list[Note]
    unread: int
    filter: NotesFilter

    @property
    def held(self) -> int:
        """Unread notes the filter keeps back (or that wait beyond the tick's limit)."""
        return max(0, self.unread - len(self.notes))


def notes_filter(cycle: ThreadCycle, settings: Settings) -> NotesFilter:
    """The filter in force for a thread: the one its cycle settings hold (cycle.mode), else config.yaml's
    `cycle.notes_filter` (so too when the thread's could not be read: managers/records.py); an older cycle's
    `notes_min_priority` still counts."""
    wanted = cycle.notes_filter if cycle.notes_filter is not None else settings.cycle.notes_filter
    if wanted.min_priority is None and cycle.notes_min_priority is not None:
        wanted = wanted.model_copy(update={"min_priority": cycle.notes_min_priority})
    return wanted


def marks_of(text: str) -> tuple[builtins.list[str], builtins.list[str]]:
    """A note's mentions (@name) and hashtags (#tag), each once, in order of appearance."""
    mentions = [m.rstrip(".") for m in MENTION.findall(text)]
    return list(dict.fromkeys(m for m in mentions if m)), list(dict.fromkeys(HASHTAG.findall(text)))


class NoteManager:
    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    def list(self, *, source: str | None = None, unread_only: bool = False, limit: int = 10) -> builtins.list[Note]:
        """The visible notes (hidden ones left out)."""
        return self.repos.notes.list(source=source, unread_only=unread_only, limit=limit, include_hidden=False)

    def unread(self, limit: int) -> builtins.list[Note]:
        """The unread notes a tick reads when no filter is in force: at most `limit`, highest priority first, the
        oldest first within a priority."""
        return self.repos.notes.unread_incoming(limit=limit)

    def incoming(self, wanted: NotesFilter, *, limit: int, now: datetime) -> Incoming:
        """The unread notes a tick shows under `wanted` (settings NotesFilter: the owner's always), at most `limit`,
        highest priority first."""
        if not wanted.active():
            notes = self.repos.notes.unread_incoming(limit=limit)
            return Incoming(notes, len(notes), wanted)
        since = now - timedelta(hours=wanted.max_age_hours) if wanted.max_age_hours is not None else None
        found, unread = self.repos.notes.unread_filtered(
            limit=limit * SCAN_FACTOR if wanted.mentions else limit,
            min_priority=wanted.min_priority,
            tags=wanted.tags,
            sources=wanted.sources,
            mentions=wanted.mentions,
            since=since,
        )
        if wanted.mentions:  # the query found `@ann` in `@anna` too: a mention must end where the name does
            names = {m.lower() for m in wanted.mentions}
            owners = {p.id for p in self.repos.people.owners()}
            found = [
                n
                for n in found
                if n.source in OWNER_SOURCES or (n.source == "channel" and n.author_id in owners) or _mentions(n, names)
            ][:limit]
        return Incoming(found, unread, wanted)

    def read(self, note_id: int) -> Note:
        """The note, marked read; NotFound when there is none."""
        note = self.repos.notes.get(note_id)
        if note is None:
            raise NotFound(f"no note {note_id}")
        self.repos.notes.mark_read([note_id])
        return note

    def add(
        self,
        text: str,
        *,
        tags: Iterable[str] = (),
        priority: int = 0,
        task_id: int | None = None,
        thread_id: str | None = None,
        llm_id: str | None = None,
        now: datetime | None = None,
    ) -> Note:
        """The persona's note; written in a task's sub-cycle (`task_id`), it goes to the main loop unread."""
        from_task = task_id is not None
        return self.repos.notes.add(
            text,
            source=NoteSource.TASK if from_task else NoteSource.PERSONA,
            tags=list(tags),
            task_id=task_id,
            priority=priority,
            thread_id=thread_id,
            llm_id=llm_id,
            read=not from_task,
            created_at=now,
        )

    def tag(self, note_id: int, tags: builtins.list[str]) -> Note:
        note = self.repos.notes.set_tags(note_id, tags)
        if note is None:
            raise NotFound(f"no note {note_id}")
        return note

    def mark_read(self, ids: Iterable[int], read: bool = True) -> int:
        return self.repos.notes.mark_read([int(i) for i in ids], read=read)

    def update(
        self,
        note_id: int,
        *,
        text: str | None = None,
        tags: builtins.list[str] | None = None,
        priority: int | None = None,
    ) -> Note:
        """Change what is given; NotFound for a missing or hidden note, Conflict for another's text."""
        note = self.repos.notes.get(note_id)
        if note is None or note.hidden:
            raise NotFound(f"no note {note_id}")
        if text is not None and note.source not in OWN_SOURCES:
            raise Conflict(
                f"note {note_id} is from {note.source}; I change only the text of my own notes "
                "(its tags and priority I may change)",
                field="text",
            )
        self.repos.notes.update(note_id, text=text, tags=tags, priority=priority)
        return note

    def cleanup(self, *, days: float) -> int:
        """HMP's cleanup of outdated notes: those written and read more than `days` ago are hidden (restorable, as a
        delete is), never a human's words or a message the persona sent — a conversation is kept whole — and never an
        unread note; how many."""
        before = self.house.deps.clock() - timedelta(days=days)
        return len(self.repos.notes.hide_read_before(before, limit=CLEANUP_MAX))

    def hide(self, note_id: int) -> bool:
        """The persona's delete: hidden (out of lists and the prompt), restorable; False when there is nothing to
        hide."""
        return self.repos.notes.archive(note_id)

    def share(self, note_id: int) -> builtins.list[dict[str, Any]]:
        """Make one of the persona's own notes public: it goes to each friend (the sent envelopes are returned) and is
        tagged `public` here. Another's words (the human's, a peer's, the system's) are not the persona's to publish
        (Conflict); NotFound for a missing or hidden note; ValueError when there is no friend."""
        note = self.repos.notes.get(note_id)
        if note is None or note.hidden:
            raise NotFound(f"no note {note_id}")
        if note.source not in OWN_SOURCES:
            raise Conflict(f"note {note_id} is from {note.source}: I share only my own notes", field="id")
        if PUBLIC in (note.tags or []):
            raise Conflict(f"note {note_id} is shared already", field="id")
        mentions, hashtags = marks_of(note.text)
        sent = self.house.mesh.share_note(note.text, mentions=mentions, hashtags=hashtags, priority=note.priority)
        self.repos.notes.set_tags(note_id, [*(note.tags or []), PUBLIC])
        return sent


def _mentions(note: Note, names: set[str]) -> bool:
    """Whether the note names one of `names` (lower case) whole: `@name` in its words, or its tag `@name`."""
    said = {m.lower() for m in marks_of(note.text)[0]}
    tagged = {str(t)[1:].lower() for t in note.tags or [] if isinstance(t, str) and t.startswith("@")}
    return bool(names & (said | tagged))


__all__ = ["OWN_SOURCES", "PUBLIC", "Incoming", "NoteManager", "marks_of", "notes_filter"]
