"""Feeds and world input: the RSS/Atom feeds a persona reads, what they brought, and the line its prompt has of the
world outside.

A fetched entry becomes a note with source `feed` and the tags `feed`, `feed:<name>` and the feed's own. The
operator's subscriptions (config.yaml `feeds.subscriptions`) are kept as feeds (`sync_subscriptions`); the persona
subscribes, fetches and unsubscribes with its `feeds.*` commands; between ticks the loop and the fleet fetch what is
due (`refresh_feeds`), at once when the anti-stagnation world check asked (`ask_fetch`). A fetch leaves the process:
`refresh_feeds` fetches outside any transaction, each feed's result stored in a unit of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict
from urllib.parse import urlsplit

from memory.models import Feed, Note
from reach.feeds import FeedError, Fetched, fetch

if TYPE_CHECKING:
    from managers import Managers
    from memory import Database
    from persona.settings import Settings


class WorldError(ValueError):
    """A feed change refused (too many feeds, the operator's feed)."""


class RefreshCounts(TypedDict):
    feeds: int
    items: int
    errors: int


@dataclass
class FeedFetch:
    """One feed fetched: the notes it made, or the error."""

    feed: Feed
    made: list[int] = field(default_factory=list)
    titles: list[str] = field(default_factory=list)  # the first lines of the newest (at most 5) new items
    error: str | None = None

    @property
    def text(self) -> str:
        if self.error is not None:
            return f"feed {self.feed.id} ({self.feed.name}): {self.error}"
        text = f"feed {self.feed.id} ({self.feed.name}): {len(self.made)} new item(s)"
        return text + (" — " + "; ".join(self.titles) if self.titles else "")


def name_of(url: str) -> str:
    """A feed's default name: its host."""
    parts = urlsplit(url)
    return (parts.hostname or "feed").removeprefix("www.")[:100]


def fetch_feed(
    settings: Settings, url: str, etag: str | None, modified: str | None
) -> tuple[Fetched | None, str | None]:
    """(what the feed answered, None) or (None, why it failed): network, outside any transaction."""
    config = settings.feeds
    try:
        return fetch(
            url,
            etag=etag,
            modified=modified,
            timeout_s=config.timeout_s,
            max_bytes=config.max_bytes,
            max_items=config.max_items,
        ), None
    except FeedError as exc:
        return None, str(exc)


class WorldManager:
    """A persona's feeds and its view of the world outside, in one unit of work."""

    def __init__(self, house: Managers) -> None:
        self.repos = house.repos
        self.settings: Settings = house.deps.settings

    def _settings(self) -> Settings:
        return self.settings

    # -- the feeds ---------------------------------------------------------------------------------------------------

    def sync_subscriptions(self) -> None:
        """The operator's subscriptions (config.yaml feeds.subscriptions) as feeds."""
        repos = self.repos
        for sub in self._settings().feeds.subscriptions:
            row = repos.feeds.by_url(sub.url)
            if row is None or row.status != "active" or row.added_by != "operator":
                repos.feeds.subscribe(sub.url, sub.name or name_of(sub.url), list(sub.tags), added_by="operator")

    def feeds(self, *, sync: bool = True) -> list[Feed]:
        """The feeds read (the operator's synced first, unless `sync` is False)."""
        if sync:
            self.sync_subscriptions()
        return self.repos.feeds.list()

    def unread_count(self) -> int:
        return self.repos.feeds.unread_count()

    def find(self, ref: str | int) -> Feed:
        return self.repos.feeds.find(ref)

    def subscribe(self, url: str, name: str, tags: Sequence[str]) -> Feed:
        """Read the feed at `url` from now on (WorldError when the persona reads as many as it may)."""
        repos, limit = self.repos, self._settings().feeds.max_feeds
        if repos.feeds.by_url(url) is None and len(repos.feeds.list()) >= limit:
            raise WorldError(f"I read {limit} feeds already; unsubscribe one first")
        feed, _ = repos.feeds.subscribe(url, name or name_of(url), list(tags))
        return feed

    def unsubscribe(self, ref: str | int) -> Feed:
        """Stop reading a feed (its items stay as notes); WorldError for one of the operator's."""
        feed = self.repos.feeds.find(ref)
        if feed.added_by == "operator":
            raise WorldError(f"feed {feed.id} is my operator's (config.yaml feeds.subscriptions)")
        self.repos.feeds.unsubscribe(feed.id)
        return feed

    def store_fetch(self, feed_id: int, fetched: Fetched | None, now: datetime, error: str | None) -> list[int]:
        """Record a fetch of a feed: its new entries as notes; the ids of the notes made."""
        repos = self.repos
        feed = repos.feeds.get(feed_id)
        if error is not None or fetched is None:
            repos.feeds.fetched(feed_id, now, etag=None, modified=None, error=error)
            return []
        repos.feeds.fetched(feed_id, now, etag=fetched.etag, modified=fetched.modified)
        made = []
        for item in reversed(fetched.items):  # oldest first, so the newest gets the highest id
            note = repos.feeds.add_item(feed, item.guid, item.text(fetched.title or feed.name), item.link, now)
            if note is not None:
                made.append(note.id)
        return made

    def fetch_now(self, feed: Feed, *, now: datetime, thread_id: str | None) -> FeedFetch:
        """Fetch one feed inside this unit (the persona's feeds.fetch / subscribe) and store what is new; a failure
        goes to the process log."""
        fetched, error = fetch_feed(self._settings(), feed.url, feed.etag, feed.modified)
        made = self.store_fetch(feed.id, fetched, now, error)
        outcome = FeedFetch(
            feed, made=made, error=error, titles=[n.text.splitlines()[0] for n in self.repos.notes.many(made[-5:])]
        )
        if error:
            self.repos.processes.add("feeds.fetch", error, status="error", thread_id=thread_id, tags=["feed"])
        return outcome

    def log(
        self,
        name: str,
        text: str,
        *,
        ok: bool,
        thread_id: str | None,
        tags: Sequence[str],
        sources: Sequence[Any] = (),
        llm_id: str | None = None,
        task_id: int | None = None,
    ) -> None:
        """What the world brought, in the process log (and so in the next prompt, fenced as data with its
        `sources`)."""
        self.repos.processes.add(
            name,
            text,
            status="ok" if ok else "error",
            thread_id=thread_id,
            tags=list(tags),
            llm_id=llm_id,
            task_id=task_id,
            sources=list(sources),
        )

    # -- fetch now (the world check) -----------------------------------------------------------------------------------

    def read_newest_unread(self) -> Note | None:
        """The newest feed item not yet read, now marked read (None: none waits)."""
        items = self.repos.feeds.unread_items(1)
        if not items:
            return None
        self.repos.notes.mark_read([items[0].id])
        return items[0]

    def ask_fetch(self) -> None:
        """Ask the loop to fetch every feed at once (the anti-stagnation world check)."""
        self.repos.config.fetch_now = True

    def fetch_asked(self) -> bool:
        return self.repos.config.fetch_now

    def take_fetch_request(self) -> bool:
        """Whether a fetch of every feed was asked for; the request is taken (cleared)."""
        asked = self.fetch_asked()
        if asked:
            self.repos.config.fetch_now = None
        return asked

    # -- the prompt --------------------------------------------------------------------------------------------------

    def line(self) -> str:
        """What the prompt says of the world outside: whether web search is on, the feeds and their unread items."""
        repos = self.repos
        feeds = repos.feeds.active_count()
        unread = repos.feeds.unread_count() if feeds else 0
        reading = f"{feeds} feed(s), {unread} unread item(s)" if feeds else "no feeds"
        return f"world: web search {self._settings().search.describe()}; {reading}"


def refresh_feeds(
    db: Database,
    settings: Settings,
    clock: Callable[[], datetime],
    *,
    only_due: bool = True,
    thread_id: str | None = None,
) -> RefreshCounts:
    """Fetch the feeds that are due (or all, or all when a fetch was asked), each outside any transaction, and store
    what is new; between ticks (graph/loop/autonomy.py, the fleet). Returns counts."""
    from managers import ManagerDeps, Managers

    deps = ManagerDeps(settings=settings, clock=clock)
    with db.unit() as repos:
        world = Managers(repos, deps).world
        world.sync_subscriptions()
        now = clock()
        asked = world.take_fetch_request()
        feeds = (
            repos.feeds.due(now, settings.feeds.every_minutes * 60) if only_due and not asked else repos.feeds.list()
        )
        todo = [(f.id, f.url, f.etag, f.modified) for f in feeds]
    counts = RefreshCounts(feeds=0, items=0, errors=0)
    for feed_id, url, etag, modified in todo:
        fetched, error = fetch_feed(settings, url, etag, modified)
        with db.unit() as repos:
            made = Managers(repos, deps).world.store_fetch(feed_id, fetched, clock(), error)
            if error:
                repos.processes.add("feeds.fetch", error, status="error", thread_id=thread_id, tags=["feed"])
        counts["feeds"] += 1
        counts["items"] += len(made)
        counts["errors"] += bool(error)
    return counts
