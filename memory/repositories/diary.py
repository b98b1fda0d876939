"""HMP `diary_entries`: the cognitive diary, written only by explicit commands; archived entries leave retrieval."""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import select

from memory.clock import utcnow
from memory.models import DiaryEntry
from memory.repositories.tiered import StatusTierRepo
from memory.text import emotion_score, emotion_strengths

DEBUG_TAG_PREFIX = "debug:"  # HMP's debug marks (`debug:stagnation_loop`): traces for whoever debugs the persona


def is_debug(entry: DiaryEntry) -> bool:
    return any(str(t).startswith(DEBUG_TAG_PREFIX) for t in (entry.tags or []))


def has_tag(entry: DiaryEntry, tag: str) -> bool:
    """`tag` exactly, or every tag it starts when it ends with `*` (`debug:*`)."""
    tags = [str(t) for t in (entry.tags or [])]
    return any(t.startswith(tag[:-1]) for t in tags) if tag.endswith("*") else tag in tags


class DiaryRepo(StatusTierRepo[DiaryEntry]):
    model, tier = DiaryEntry, "diary"

    def _index(self, entry: DiaryEntry) -> None:
        self._put_item(
            entry,
            entry.text,
            tags=entry.tags,
            emotions=[name for name, _ in emotion_strengths(entry.emotions)],
            emotion_score=emotion_score(entry.emotions),
            importance=min(1.0, 0.5 + 0.1 * entry.priority),
            pinned=entry.pinned,
            thread_id=entry.thread_id,
            created_at=entry.created_at,
        )

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
        entry = DiaryEntry(
            text=text, tags=list(tags), emotions=list(emotions), priority=priority, thread_id=thread_id, tick=tick
        )
        return self._insert(entry)

    def list(
        self,
        *,
        limit: int = 20,
        tag: str | None = None,
        include_archived: bool = False,
        pinned_only: bool = False,
        debug: bool | None = None,
    ) -> list[DiaryEntry]:
        """The newest `limit` entries, oldest first; `debug`: None all, False without `debug:*` tags, True only them."""
        q = select(DiaryEntry)
        if not include_archived:
            q = q.where(DiaryEntry.status == "active")
        if pinned_only:
            q = q.where(DiaryEntry.pinned.is_(True))
        filtered = bool(tag) or debug is not None
        rows = list(self.session.scalars(q.order_by(DiaryEntry.id.desc()).limit(limit * (5 if filtered else 1))).all())
        if tag:
            rows = [r for r in rows if has_tag(r, tag)]
        if debug is not None:
            rows = [r for r in rows if is_debug(r) == debug]
        return list(reversed(rows[:limit]))

    def between(self, start: datetime, end: datetime | None = None) -> builtins.list[DiaryEntry]:
        q = select(DiaryEntry).where(DiaryEntry.created_at >= start)
        if end is not None:
            q = q.where(DiaryEntry.created_at <= end)
        return list(self.session.scalars(q.order_by(DiaryEntry.id)).all())

    def newer_than(self, entry_id: int, limit: int) -> builtins.list[DiaryEntry]:
        """The newest `limit` entries after `entry_id`, archived ones too, newest first."""
        return list(
            self.session.scalars(
                select(DiaryEntry).where(DiaryEntry.id > entry_id).order_by(DiaryEntry.id.desc()).limit(limit)
            ).all()
        )

    def update(
        self,
        entry_id: int,
        *,
        text: str | None = None,
        tags: builtins.list[str] | None = None,
        priority: int | None = None,
    ) -> DiaryEntry:
        entry = self.get(entry_id)
        if text is not None:
            entry.text = text
        if tags is not None:
            entry.tags = list(tags)
        if priority is not None:
            entry.priority = priority
        entry.updated_at = utcnow()
        self._index(entry)
        return entry

    def set_pinned(self, entry_id: int, pinned: bool) -> DiaryEntry:
        entry = self.get(entry_id)
        entry.pinned = pinned
        self._index(entry)
        return entry
