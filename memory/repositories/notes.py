"""Notes (HMP `notes`): messages between the human, the persona, tasks and the system."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Unpack

from sqlalchemy import Row, Select, bindparam, func, select, update

from memory.models import Note, utcnow
from memory.repositories.base import Repo, matched, one_of, prepared, table_of

INCOMING_SOURCES = ("user", "cli", "channel", "system", "llm:task", "llm_task", "peer")  # llm_task: another model's
# answer; peer: another agent over A2A (its author in the tag `from:<peer>`)
HUMAN_SOURCES = ("user", "cli", "channel")  # channel: a person over Matrix, Telegram, e-mail


@prepared
def _human_after(read: bool | None, since: bool) -> Select[Note]:
    q = select(Note).where(Note.id > bindparam("after"), one_of(Note.source, HUMAN_SOURCES))
    if read is not None:
        q = q.where(Note.read.is_(read))
    if since:
        q = q.where(Note.created_at >= bindparam("since"))
    return q.order_by(Note.id).limit(bindparam("limit"))


LINE_COLUMNS = ("id", "text", "source", "created_at", "read", "thread_id")


@prepared
def _human_after_lines(read: bool | None, since: bool) -> Select[Unpack[tuple[Any, ...]]]:
    """Core: `_human_after` as plain rows of LINE_COLUMNS."""
    c = table_of(Note).c
    q = select(*(c[name] for name in LINE_COLUMNS)).where(c.id > bindparam("after"), one_of(c.source, HUMAN_SOURCES))
    if read is not None:
        q = q.where(c.read.is_(read))
    if since:
        q = q.where(c.created_at >= bindparam("since"))
    return q.order_by(c.id).limit(bindparam("limit"))


@prepared
def _unread_incoming(min_priority: bool) -> Select[Note]:
    q = select(Note).where(Note.read.is_(False), one_of(Note.source, INCOMING_SOURCES), Note.hidden.is_(False))
    if min_priority:
        q = q.where(Note.priority >= bindparam("min_priority"))
    return q.order_by(Note.priority.desc(), Note.id).limit(bindparam("limit"))


@prepared
def _latest_at(sources: tuple[str, ...]) -> Select[datetime | None]:
    return select(func.max(Note.created_at)).where(one_of(Note.source, sources))


class NoteRepo(Repo):
    def add(
        self,
        text: str,
        source: str = "user",
        *,
        priority: int = 0,
        tags: list[str] | None = None,
        thread_id: str | None = None,
        task_id: int | None = None,
        llm_id: str | None = None,
        hidden: bool = False,
        read: bool = False,
        created_at: datetime | None = None,
        author_id: int | None = None,
    ) -> Note:
        note = Note(
            created_at=created_at or utcnow(),
            text=text,
            source=source,
            priority=priority,
            tags=list(tags or []),
            thread_id=thread_id,
            task_id=task_id,
            llm_id=llm_id,
            hidden=hidden,
            read=read,
            author_id=author_id,
        )
        self.session.add(note)
        self.session.flush()
        return note

    def get(self, note_id: int) -> Note | None:
        return self.session.get(Note, note_id)

    def many(self, note_ids: Iterable[int]) -> list[Note]:
        """These notes in the order given (ids that no longer exist are left out), in one query."""
        ids = list(note_ids)
        found = {n.id: n for n in self.session.scalars(select(Note).where(Note.id.in_(ids))).all()} if ids else {}
        return [found[i] for i in ids if i in found]

    def by_author(self, person_id: int) -> list[int]:
        """The ids of every note a person wrote, oldest first."""
        return list(self.session.scalars(select(Note.id).where(Note.author_id == person_id).order_by(Note.id)).all())

    def purge(self, note_ids: Iterable[int]) -> int:
        """Delete these notes for good (a forgotten person's words); how many."""
        from sqlalchemy import delete

        ids = sorted({int(i) for i in note_ids})
        done = 0
        for start in range(0, len(ids), 500):
            done += matched(self.session.execute(delete(Note).where(Note.id.in_(ids[start:start + 500]))))
        return done

    def last_human_before(self, note_id: int) -> Note | None:
        """The human's newest note with an id below `note_id` (whether a reply answers a voice message)."""
        return self.session.scalars(select(Note).where(Note.source.in_(HUMAN_SOURCES), Note.id < note_id)
                                    .order_by(Note.id.desc()).limit(1)).first()

    def last_from(self, author_id: int, *, source: str, before_id: int | None = None) -> Note | None:
        """A person's newest note from one source (e.g. "channel"), below `before_id` when given."""
        query = select(Note).where(Note.author_id == author_id, Note.source == source)
        if before_id is not None:
            query = query.where(Note.id < before_id)
        return self.session.scalars(query.order_by(Note.id.desc()).limit(1)).first()

    def newest_id(self) -> int:
        return self.session.scalar(select(func.max(Note.id))) or 0

    def latest_human_at(self) -> datetime | None:
        """When the human last wrote (the drives' and dreams' idle time counts from it)."""
        return self.core(_latest_at(HUMAN_SOURCES)).scalar()  # Core: one value back, no objects

    def human_after(self, note_id: int, *, read: bool | None = None, since: datetime | None = None,
                    limit: int = 10) -> list[Note]:
        """The human's notes after `note_id` (written at `since` or later), oldest first."""
        return list(self.session.scalars(_human_after(read, since is not None),
                                   {"after": note_id, "since": since, "limit": limit}).all())

    def human_after_lines(self, note_id: int, *, read: bool | None = None, since: datetime | None = None,
                          limit: int = 10) -> list[Row[Unpack[tuple[Any, ...]]]]:
        """`human_after` as plain rows of LINE_COLUMNS (by the same names), for a reader of the tick's hot path."""
        return list(self.core(_human_after_lines(read, since is not None),
                              {"after": note_id, "since": since, "limit": limit}).all())

    def between(self, start: datetime, end: datetime | None = None) -> list[Note]:
        q = select(Note).where(Note.created_at >= start)
        if end is not None:
            q = q.where(Note.created_at <= end)
        return list(self.session.scalars(q.order_by(Note.id)).all())

    def latest_incoming_at(self) -> datetime | None:
        """When the last note for the persona (from the human, a task, the system) arrived."""
        return self.session.scalar(_latest_at(INCOMING_SOURCES))

    def unread_incoming(self, limit: int = 20, min_priority: int | None = None, tags: list[str] | None = None) -> list[Note]:
        """Unread notes for the persona, highest priority first, then oldest first."""
        rows = self.session.scalars(_unread_incoming(min_priority is not None),
                              {"min_priority": min_priority, "limit": limit if not tags else limit * 5}).all()
        if tags:
            wanted = set(tags)
            rows = [n for n in rows if wanted & set(n.tags or [])][:limit]
        return list(rows)

    def count_unread_by_priority(self) -> dict[int, int]:
        rows = self.session.execute(
            select(Note.priority, func.count(Note.id))
            .where(Note.read.is_(False), Note.source.in_(INCOMING_SOURCES))
            .group_by(Note.priority)
        ).all()
        return {int(p): int(c) for p, c in rows}

    def mark_read(self, ids: Iterable[int], read: bool = True) -> int:
        ids = list(ids)
        if not ids:
            return 0
        result = self.session.execute(
            update(Note).where(Note.id.in_(ids)).values(read=read, read_at=utcnow() if read else None)
        )
        return matched(result) or 0

    def set_tags(self, note_id: int, tags: list[str]) -> Note | None:
        note = self.session.get(Note, note_id)
        if note is not None:
            note.tags = list(tags)
        return note

    def update(self, note_id: int, *, text: str | None = None, tags: list[str] | None = None,
               priority: int | None = None) -> Note | None:
        note = self.session.get(Note, note_id)
        if note is None:
            return None
        if text is not None:
            note.text = text
        if tags is not None:
            note.tags = list(tags)
        if priority is not None:
            note.priority = priority
        self.session.flush()
        return note

    def archive(self, note_id: int) -> bool:
        """A soft delete: the note is hidden (out of lists and of the prompt), and restorable."""
        note = self.session.get(Note, note_id)
        if note is None or note.hidden:
            return False
        note.hidden, note.read = True, True
        self.session.flush()
        return True

    def restore(self, note_id: int) -> bool:
        note = self.session.get(Note, note_id)
        if note is None or not note.hidden:
            return False
        note.hidden = False
        self.session.flush()
        return True

    def list(
        self,
        *,
        source: str | None = None,
        unread_only: bool = False,
        limit: int = 20,
        after_id: int | None = None,
        include_hidden: bool = True,
    ) -> list[Note]:
        q = select(Note)
        if source == "incoming":
            q = q.where(Note.source.in_(INCOMING_SOURCES))
        elif source:
            q = q.where(Note.source == source)
        if unread_only:
            q = q.where(Note.read.is_(False))
        if after_id is not None:
            q = q.where(Note.id > after_id)
        if not include_hidden:
            q = q.where(Note.hidden.is_(False))
        if after_id is not None:
            return list(self.session.scalars(q.order_by(Note.id).limit(limit)).all())
        return list(reversed(self.session.scalars(q.order_by(Note.id.desc()).limit(limit)).all()))

    def count(self) -> int:
        return self.session.scalar(select(func.count(Note.id))) or 0
