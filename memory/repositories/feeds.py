"""Feeds (RSS/Atom subscriptions) and the entries already taken from them; a fetched entry becomes a note with
source `feed` (not an incoming note: the persona reads them when it looks, and the world check brings one up)."""

from __future__ import annotations

import builtins
from datetime import datetime

from sqlalchemy import Select, func, select

from memory.models import Feed, FeedItem, Note
from memory.repositories.base import NotFound, Repo, prepared, table_of

FEED_SOURCE = "feed"


@prepared
def _unread_count() -> Select[int]:
    """Core: the unread feed notes, counted."""
    c = table_of(Note).c
    return select(func.count(c.id)).where(c.source == FEED_SOURCE, c.read.is_(False))


@prepared
def _feeds(active_only: bool) -> Select[Feed]:
    q = select(Feed)
    if active_only:
        q = q.where(Feed.status == "active")
    return q.order_by(Feed.id)


@prepared
def _active_count() -> Select[int]:
    """Core: the active feeds, counted."""
    c = table_of(Feed).c
    return select(func.count(c.id)).where(c.status == "active")


class FeedRepo(Repo):
    def subscribe(self, url: str, name: str, tags: list[str], added_by: str = "persona") -> tuple[Feed, bool]:
        """The feed for `url`, switched on (a feed the operator names is the operator's); (row, newly subscribed)."""
        row = self.session.scalars(select(Feed).where(Feed.url == url)).first()
        if row is not None:
            changed = row.status != "active"
            row.status, row.name, row.tags = "active", name or row.name, list(tags) or list(row.tags or [])
            if added_by == "operator":
                row.added_by = added_by
            self.session.flush()
            return row, changed
        row = Feed(url=url, name=name, tags=list(tags), added_by=added_by)
        self.session.add(row)
        self.session.flush()
        return row, True

    def get(self, feed_id: int) -> Feed:
        return self._get(Feed, feed_id)

    def by_url(self, url: str) -> Feed | None:
        return self.session.scalars(select(Feed).where(Feed.url == url)).first()

    def list(self, *, active_only: bool = True) -> list[Feed]:
        return list(self.session.scalars(_feeds(active_only)).all())

    def unsubscribe(self, feed_id: int) -> Feed:
        row = self.get(feed_id)
        row.status = "off"
        self.session.flush()
        return row

    def due(self, now: datetime, every_s: float) -> builtins.list[Feed]:
        """Active feeds never fetched, or last fetched `every_s` ago or more."""
        rows = self.list()
        return [
            f
            for f in rows
            if f.last_fetched_at is None or (now - _aware(f.last_fetched_at, now)).total_seconds() >= every_s
        ]

    def fetched(
        self, feed_id: int, now: datetime, *, etag: str | None, modified: str | None, error: str | None = None
    ) -> None:
        row = self.get(feed_id)
        row.last_fetched_at, row.last_error = now, error
        if error is None:
            row.etag, row.modified = etag, modified
        self.session.flush()

    def add_item(self, feed: Feed, guid: str, text: str, link: str, now: datetime) -> Note | None:
        """The entry as a note, unless it was taken before; None then."""
        if self.session.scalars(select(FeedItem.id).where(FeedItem.feed_id == feed.id, FeedItem.guid == guid)).first():
            return None
        note = Note(
            text=text,
            source=FEED_SOURCE,
            tags=["feed", f"feed:{feed.name}", *(feed.tags or [])],
            links=link[:1000],
            read=False,
            created_at=now,
        )
        self.session.add(note)
        self.session.flush()
        self.session.add(FeedItem(feed_id=feed.id, guid=guid, note_id=note.id, created_at=now))
        feed.items_total = int(feed.items_total or 0) + 1
        self.session.flush()
        return note

    def unread_items(self, limit: int = 5) -> builtins.list[Note]:
        """Feed notes not yet read, newest first."""
        return list(
            self.session.scalars(
                select(Note)
                .where(Note.source == FEED_SOURCE, Note.read.is_(False))
                .order_by(Note.id.desc())
                .limit(limit)
            ).all()
        )

    def active_count(self) -> int:
        """The active feeds (`list()`'s length), counted."""
        return self.core(_active_count()).scalar() or 0

    def unread_count(self) -> int:
        return self.core(_unread_count()).scalar() or 0

    def find(self, ref: str | int) -> Feed:
        """A feed by id, URL or name."""
        if str(ref).isdigit():
            return self.get(int(ref))
        row = self.session.scalars(select(Feed).where((Feed.url == str(ref)) | (Feed.name == str(ref)))).first()
        if row is None:
            raise NotFound(f"no feed {ref!r}")
        return row


def _aware(value: datetime, like: datetime) -> datetime:
    if value.tzinfo is None and like.tzinfo is not None:
        return value.replace(tzinfo=like.tzinfo)
    return value
