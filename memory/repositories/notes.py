"""Notes (HMP `notes`): messages between the human, the persona, tasks and the system."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Unpack

from sqlalchemy import Row, Select, String, and_, bindparam, case, cast, func, or_, select, update

from memory.clock import utcnow
from memory.models import Note, Person
from memory.note_kinds import HUMAN_SOURCES, INCOMING_SOURCES, OWNER_SOURCES, NoteSource
from memory.repositories.base import Repo, matched, one_of, prepared, table_of

OUTGOING = "outgoing"  # the tag of a message the persona sent (source NoteSource.PERSONA)


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


@prepared
def _unread_human_ids() -> Select[tuple[int]]:
    """Core: the ids of the human's unread notes, oldest first (what waits for an answer)."""
    c = table_of(Note).c
    return (
        select(c.id)
        .where(c.read.is_(False), one_of(c.source, HUMAN_SOURCES), c.hidden.is_(False))
        .order_by(c.id)
        .limit(bindparam("limit"))
    )


def _to_the_owner(note: Note) -> bool:
    """A message of the persona's that names no person: sent to the owner (`to:user`, or no `to:` at all)."""
    tags = [t for t in note.tags or [] if isinstance(t, str)]
    to = [t for t in tags if t.startswith("to:")]
    return OUTGOING in tags and (not to or to == ["to:user"])


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
        person_id: int | None = None,
        door: str | None = None,
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
            person_id=person_id if person_id is not None else author_id,  # a human's note is in their conversation
            door=door,
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
            done += matched(self.session.execute(delete(Note).where(Note.id.in_(ids[start : start + 500]))))
        return done

    def last_human_before(self, note_id: int) -> Note | None:
        """The human's newest note with an id below `note_id` (whether a reply answers a voice message)."""
        return self.session.scalars(
            select(Note).where(Note.source.in_(HUMAN_SOURCES), Note.id < note_id).order_by(Note.id.desc()).limit(1)
        ).first()

    def last_from(self, author_id: int, *, source: str, before_id: int | None = None) -> Note | None:
        """A person's newest note from one source (e.g. "channel"), below `before_id` when given."""
        query = select(Note).where(Note.author_id == author_id, Note.source == source)
        if before_id is not None:
            query = query.where(Note.id < before_id)
        return self.session.scalars(query.order_by(Note.id.desc()).limit(1)).first()

    def conversation(
        self,
        person_id: int,
        *,
        limit: int = 20,
        before_id: int | None = None,
        after_id: int | None = None,
        unaddressed: bool = False,
    ) -> list[Note]:
        """A person's conversation — their words and the messages the persona sent them, by every door — oldest
        first: the newest `limit` (below `before_id`), or the first `limit` after `after_id`. `unaddressed`: the
        owner's, with the persona's messages that name nobody (written before messages kept their person, or by a
        tool: `to:user` or no `to:` at all)."""
        mine = Note.person_id == person_id
        if unaddressed:
            mine = mine | (Note.person_id.is_(None) & (Note.source == NoteSource.PERSONA))
        q = select(Note).where(mine, Note.hidden.is_(False), Note.source.in_([*HUMAN_SOURCES, NoteSource.PERSONA]))
        if before_id is not None:
            q = q.where(Note.id < before_id)

        def wanted(note: Note) -> bool:
            return not unaddressed or note.person_id is not None or _to_the_owner(note)

        if after_id is not None:
            rows = self.session.scalars(q.where(Note.id > after_id).order_by(Note.id).limit(limit * 2)).all()
            return [n for n in rows if wanted(n)][:limit]
        rows = self.session.scalars(q.order_by(Note.id.desc()).limit(limit * 2 if unaddressed else limit)).all()
        return list(reversed([n for n in rows if wanted(n)][:limit]))

    def peer_conversation(
        self, peer: str, *, limit: int = 20, before_id: int | None = None, scan: int = 500
    ) -> list[Note]:
        """A peer's messages and the persona's to it, oldest first (among the newest `scan` peer and outgoing notes:
        a peer is named by a tag, not a column)."""
        q = select(Note).where(
            Note.hidden.is_(False), Note.person_id.is_(None), Note.source.in_([NoteSource.PEER, NoteSource.PERSONA])
        )
        if before_id is not None:
            q = q.where(Note.id < before_id)
        mine, theirs = f"to:{peer}", f"from:{peer}"
        rows = [
            n
            for n in self.session.scalars(q.order_by(Note.id.desc()).limit(scan)).all()
            if theirs in (n.tags or []) or (OUTGOING in (n.tags or []) and mine in (n.tags or []))
        ]
        return list(reversed(rows[:limit]))

    def conversations(self) -> list[tuple[int, int, int, int]]:
        """Every person's conversation: (person id, its newest note id, its notes, the person's unread ones), the most
        recent first."""
        unread = func.sum(case((Note.read.is_(False) & Note.source.in_(HUMAN_SOURCES), 1), else_=0))
        rows = self.session.execute(
            select(Note.person_id, func.max(Note.id), func.count(Note.id), unread)
            .where(
                Note.person_id.is_not(None),
                Note.hidden.is_(False),
                Note.source.in_([*HUMAN_SOURCES, NoteSource.PERSONA]),
            )
            .group_by(Note.person_id)
            .order_by(func.max(Note.id).desc())
        ).all()
        return [(int(p), int(newest), int(n), int(u or 0)) for p, newest, n, u in rows]

    def unread_human_ids(self, limit: int = 20) -> list[int]:
        """The ids of the human's unread notes, oldest first: one indexed query (what a waiting human is)."""
        return [int(i) for i in self.core(_unread_human_ids(), {"limit": limit}).scalars().all()]

    def newest_of(self, source: str) -> int:
        """The id of the newest note from `source` (0: none)."""
        return int(self.session.scalar(select(func.max(Note.id)).where(Note.source == source)) or 0)

    def answer_waits(self) -> list[float]:
        """For each human's note answered, the seconds until the persona's first message to that person after it."""
        asked, answer = table_of(Note).alias("asked"), table_of(Note).alias("answer")
        first = (
            select(func.min(answer.c.created_at))
            .where(answer.c.source == "llm", answer.c.person_id == asked.c.person_id, answer.c.id > asked.c.id)
            .scalar_subquery()
        )
        rows = self.session.execute(
            select(asked.c.created_at, first).where(
                one_of(asked.c.source, HUMAN_SOURCES), asked.c.person_id.is_not(None)
            )
        ).all()
        return [max(0.0, (_aware(done) - _aware(at)).total_seconds()) for at, done in rows if done is not None]

    def newest_id(self) -> int:
        return self.session.scalar(select(func.max(Note.id))) or 0

    def latest_human_at(self) -> datetime | None:
        """When the human last wrote (the drives' and dreams' idle time counts from it)."""
        return self.core(_latest_at(HUMAN_SOURCES)).scalar()  # Core: one value back, no objects

    def human_after(
        self, note_id: int, *, read: bool | None = None, since: datetime | None = None, limit: int = 10
    ) -> list[Note]:
        """The human's notes after `note_id` (written at `since` or later), oldest first."""
        return list(
            self.session.scalars(
                _human_after(read, since is not None), {"after": note_id, "since": since, "limit": limit}
            ).all()
        )

    def human_after_lines(
        self, note_id: int, *, read: bool | None = None, since: datetime | None = None, limit: int = 10
    ) -> list[Row[Unpack[tuple[Any, ...]]]]:
        """`human_after` as plain rows of LINE_COLUMNS (by the same names), for a reader of the tick's hot path."""
        return list(
            self.core(
                _human_after_lines(read, since is not None), {"after": note_id, "since": since, "limit": limit}
            ).all()
        )

    def between(self, start: datetime, end: datetime | None = None) -> list[Note]:
        q = select(Note).where(Note.created_at >= start)
        if end is not None:
            q = q.where(Note.created_at <= end)
        return list(self.session.scalars(q.order_by(Note.id)).all())

    def latest_incoming_at(self) -> datetime | None:
        """When the last note for the persona (from the human, a task, the system) arrived."""
        return self.session.scalar(_latest_at(INCOMING_SOURCES))

    def unread_incoming(
        self, limit: int = 20, min_priority: int | None = None, tags: list[str] | None = None
    ) -> list[Note]:
        """Unread notes for the persona, highest priority first, then oldest first."""
        rows = self.session.scalars(
            _unread_incoming(min_priority is not None),
            {"min_priority": min_priority, "limit": limit if not tags else limit * 5},
        ).all()
        if tags:
            wanted = set(tags)
            rows = [n for n in rows if wanted & set(n.tags or [])][:limit]
        return list(rows)

    def unread_filtered(
        self,
        *,
        limit: int,
        min_priority: int | None = None,
        tags: Sequence[str] = (),
        sources: Sequence[str] = (),
        mentions: Sequence[str] = (),
        since: datetime | None = None,
    ) -> tuple[list[Note], int]:
        """Unread notes for the persona that meet every condition given (a list: any of its values), highest priority
        first, then oldest first — the owner's notes (their own doors, or a channel note of a person whose role is
        owner) whatever the conditions — and how many unread notes there are in all. A mention is `@name` in the
        text or a tag `@name` (a peer's note carries its mentions as tags), found case-insensitively: the caller
        checks that the name ends there (`@ann` is in `@anna`)."""
        conditions = []
        if min_priority is not None:
            conditions.append(Note.priority >= min_priority)
        if sources:
            conditions.append(Note.source.in_(list(sources)))
        if since is not None:
            conditions.append(Note.created_at >= since)
        if tags:  # the JSON list as stored (json.dumps, on SQLite and PostgreSQL alike): each tag a quoted string
            conditions.append(or_(*(cast(Note.tags, String).contains(json.dumps(t), autoescape=True) for t in tags)))
        if mentions:
            conditions.append(
                or_(
                    *(func.lower(Note.text).contains("@" + m.lower(), autoescape=True) for m in mentions),
                    *(
                        func.lower(cast(Note.tags, String)).contains(json.dumps("@" + m.lower()), autoescape=True)
                        for m in mentions
                    ),
                )
            )
        unread = (Note.read.is_(False), Note.source.in_(INCOMING_SOURCES), Note.hidden.is_(False))
        owners = select(Person.id).where(Person.role == "owner")
        owner = or_(Note.source.in_(OWNER_SOURCES), (Note.source == "channel") & Note.author_id.in_(owners))
        query = select(Note).where(*unread)
        if conditions:
            query = query.where(or_(owner, and_(*conditions)))
        notes = list(self.session.scalars(query.order_by(Note.priority.desc(), Note.id).limit(limit)).all())
        total = self.session.scalar(select(func.count(Note.id)).where(*unread)) or 0
        return notes, int(total)

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

    def update(
        self, note_id: int, *, text: str | None = None, tags: list[str] | None = None, priority: int | None = None
    ) -> Note | None:
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

    def hide_read_before(self, before: datetime, *, limit: int) -> list[int]:
        """Hide (restorable) the read, visible notes written (and read) before `before`, oldest first, at most
        `limit` — but never a human's words or a message the persona sent (tagged `outgoing`): a conversation is kept
        whole. Their ids."""
        ids = [
            int(i)
            for i in self.session.scalars(
                select(Note.id)
                .where(
                    Note.read.is_(True),
                    Note.hidden.is_(False),
                    Note.created_at < before,
                    or_(Note.read_at.is_(None), Note.read_at < before),
                    Note.source.not_in(HUMAN_SOURCES),
                    ~cast(Note.tags, String).contains(json.dumps("outgoing"), autoescape=True),
                )
                .order_by(Note.id)
                .limit(limit)
            ).all()
        ]
        if ids:
            self.session.execute(update(Note).where(Note.id.in_(ids)).values(hidden=True))
        return ids

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
        if source == "incoming":  # what reaches the persona (INCOMING_SOURCES)
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


def _aware(value: datetime) -> datetime:

    return value if value.tzinfo else value.replace(tzinfo=UTC)
