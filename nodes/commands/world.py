"""The world outside (HMP "Информационные потоки"): web search and RSS/Atom feeds.

`search.web` asks the search backend the operator configured (config.yaml `search`: an MCP tool, an HTTP endpoint
answering JSON, or an OpenAI-compatible model that searches); with none it is off, and the prompt's guide says so.
It leaves the process, so it is `external`. Its results go to process_log, and so reach the next prompt fenced as
data. Feeds: `feeds.subscribe` (external: from then on the loop fetches the feed between ticks), `feeds.fetch`
(external: now), `feeds.list`, `feeds.unsubscribe`. A fetched entry becomes a note with source `feed` and the tags
`feed`, `feed:<name>` and the feed's own: the persona reads them with `notes.list {"source": "feed"}`, and the
anti-stagnation "world check" brings the newest unread one into a stagnant thought.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Annotated, Any

from pydantic import Field, StringConstraints, field_validator

from memory import Repos
from nodes import provenance
from nodes.commands.args import Args, Label, Ref, SearchText, Words, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg
from reach import budget
from reach.feeds import FeedError, fetch
from reach.mcp import McpError, call_tool
from reach.search import SearchAnswer, SearchError, parse_results, search_http, search_openai

FAMILY = Family("world", "the world outside: web search and feeds",
                compact=True, abouts={"search": "web search through the backend my operator set", "feeds": "RSS/Atom feeds I read; their items are notes (source feed)"})
log = logging.getLogger(__name__)

Url = Annotated[str, StringConstraints(strip_whitespace=True, min_length=8, max_length=1000)]


class SearchWebArgs(Args):
    query: SearchText = Field(validation_alias=names("query", "q", "text"))
    k: int = Field(5, ge=1, le=20, validation_alias=names("k", "limit", "max_results"))


class SubscribeArgs(Args):
    url: Url
    name: Label = ""
    tags: Words = []

    @field_validator("url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not value.lower().startswith(("http://", "https://")):
            raise ValueError("a feed URL starts with http:// or https://")
        return value


class FeedRefArgs(Args):
    feed: Ref = Field(validation_alias=names("feed", "id", "url", "name"))


class FetchArgs(Args):
    feed: Ref | None = Field(None, validation_alias=names("feed", "id", "url", "name"))


def search_off(settings: Any) -> str | None:
    return None if settings.search.backend != "none" else "no search backend is configured (config.yaml search)"


def run_search(settings: Any, query: str, k: int) -> SearchAnswer:
    """The configured backend's answer; SearchError (or McpError) names what failed."""
    config = settings.search
    k = min(k, config.max_results)
    if config.backend == "http":
        return search_http(config.url, query, query_param=config.query_param, params=config.params,
                           api_key_env=config.api_key_env, max_results=k, timeout_s=config.timeout_s)
    if config.backend == "openai":
        return search_openai(config.url, query, model=config.model, api_key_env=config.api_key_env, max_results=k,
                             timeout_s=config.timeout_s)
    from nodes.commands.mcp import server_spec

    outcome = call_tool(server_spec(settings, config.server), config.tool, {config.query_arg: query}, config.timeout_s)
    if outcome.is_error:
        raise SearchError(f"search tool {config.server}.{config.tool} failed: {outcome.text[:300]}")
    return parse_results(outcome.text, k)


@FAMILY.command("search.web", '{"query": "…", "k": 5}  (searches the web; leaves the process: needs approval)',
                args=SearchWebArgs, effect="external", unavailable=search_off)
def search_web(cmd: Command, ctx: CommandContext) -> CommandResult:
    query = str(arg(cmd, "query"))
    try:
        answer = run_search(ctx.settings, query, arg(cmd, "k", default=5, kind=int))
        status, text = "ok", answer.render() or f"nothing found for {query!r}"
    except (SearchError, McpError) as exc:
        status, text = "error", str(exc)
    text = budget(text, ctx.settings.search.output_chars)
    ctx.repos.processes.add("search.web", f"{query!r} → {text}", status=status, thread_id=ctx.thread_id,
                            tags=["search"], llm_id=ctx.llm_id, task_id=ctx.task_id,
                            sources=[provenance.source("search", f"search.web {query!r}", text)])
    return CommandResult(text, status="executed" if status == "ok" else "failed")


# -- feeds ------------------------------------------------------------------------------------------------------


def sync_subscriptions(repos: Repos, settings: Any) -> None:
    """The operator's subscriptions (config.yaml feeds.subscriptions) as feeds."""
    for sub in settings.feeds.subscriptions:
        row = repos.feeds.by_url(sub.url)
        if row is None or row.status != "active" or row.added_by != "operator":
            repos.feeds.subscribe(sub.url, sub.name or _name_of(sub.url), list(sub.tags), added_by="operator")


def _name_of(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return (parts.hostname or "feed").removeprefix("www.")[:100]


def store_fetch(repos: Repos, feed_id: int, fetched: Any, now: datetime, error: str | None) -> list[int]:
    """Record a fetch of a feed: its new entries as notes; the ids of the notes made."""
    feed = repos.feeds.get(feed_id)
    if error is not None:
        repos.feeds.fetched(feed_id, now, etag=None, modified=None, error=error)
        return []
    repos.feeds.fetched(feed_id, now, etag=fetched.etag, modified=fetched.modified)
    made = []
    for item in reversed(fetched.items):  # oldest first, so the newest gets the highest id
        note = repos.feeds.add_item(feed, item.guid, item.text(fetched.title or feed.name), item.link, now)
        if note is not None:
            made.append(note.id)
    return made


def fetch_feed(settings: Any, url: str, etag: str | None, modified: str | None) -> tuple[Any, str | None]:
    config = settings.feeds
    try:
        return fetch(url, etag=etag, modified=modified, timeout_s=config.timeout_s, max_bytes=config.max_bytes,
                     max_items=config.max_items), None
    except FeedError as exc:
        return None, str(exc)


def refresh_feeds(db: Any, settings: Any, clock, *, only_due: bool = True, thread_id: str | None = None) -> dict[str, int]:
    """Fetch the feeds that are due (or all), each outside any transaction, and store what is new; between ticks
    (graph/loop/autonomy.py). Returns counts."""
    with db.unit() as repos:
        sync_subscriptions(repos, settings)
        now = clock()
        asked = repos.config.fetch_now
        if asked:
            repos.config.fetch_now = False
        feeds = repos.feeds.due(now, settings.feeds.every_minutes * 60) if only_due and not asked else repos.feeds.list()
        todo = [(f.id, f.url, f.etag, f.modified) for f in feeds]
    counts = {"feeds": 0, "items": 0, "errors": 0}
    for feed_id, url, etag, modified in todo:
        fetched, error = fetch_feed(settings, url, etag, modified)
        with db.unit() as repos:
            made = store_fetch(repos, feed_id, fetched, clock(), error)
            if error:
                repos.processes.add("feeds.fetch", error, status="error", thread_id=thread_id, tags=["feed"])
        counts["feeds"] += 1
        counts["items"] += len(made)
        counts["errors"] += bool(error)
    return counts


def _feed_line(feed) -> str:
    when = f"fetched {feed.last_fetched_at:%Y-%m-%d %H:%M}" if feed.last_fetched_at else "never fetched"
    error = f"; last error: {feed.last_error}" if feed.last_error else ""
    return (f"[feed {feed.id} {feed.name} ({feed.added_by}) {feed.status}] {feed.url} — {when}, "
            f"{feed.items_total} item(s){error}")


@FAMILY.command("feeds.list", "{}  (the feeds I read, and how many items wait unread)", effect="read")
def list_feeds(cmd: Command, ctx: CommandContext) -> CommandResult:
    sync_subscriptions(ctx.repos, ctx.settings)
    feeds = ctx.repos.feeds.list()
    lines = [_feed_line(f) for f in feeds] or ["no feeds (feeds.subscribe {\"url\": \"…\"})"]
    lines.append(f"{ctx.repos.feeds.unread_count()} unread feed item(s): notes.list {{\"source\": \"feed\", \"unread\": true}}")
    return CommandResult("\n".join(lines), show=True)


def _fetch_one(ctx: CommandContext, feed) -> str:
    fetched, error = fetch_feed(ctx.settings, feed.url, feed.etag, feed.modified)
    made = store_fetch(ctx.repos, feed.id, fetched, ctx.now, error)
    if error:
        ctx.repos.processes.add("feeds.fetch", error, status="error", thread_id=ctx.thread_id, tags=["feed"])
        return f"feed {feed.id} ({feed.name}): {error}"
    text = f"feed {feed.id} ({feed.name}): {len(made)} new item(s)"
    if made:
        titles = [ctx.repos.notes.get(i).text.splitlines()[0] for i in made[-5:]]
        text += " — " + "; ".join(titles)
    ctx.repos.processes.add("feeds.fetch", text, status="ok", thread_id=ctx.thread_id, tags=["feed"],
                            sources=[provenance.source("feed", f"feed {feed.id} ({feed.name})", text)] if made else [])
    return text


@FAMILY.command("feeds.subscribe", '{"url": "https://…/rss.xml", "name": "tides", "tags": ["sea"]}  (reads it '
                'from now on; leaves the process: needs approval)', args=SubscribeArgs, effect="external")
def subscribe(cmd: Command, ctx: CommandContext) -> CommandResult:
    url = str(arg(cmd, "url"))
    if ctx.repos.feeds.by_url(url) is None and len(ctx.repos.feeds.list()) >= ctx.settings.feeds.max_feeds:
        raise CommandError(f"feeds.subscribe: I read {ctx.settings.feeds.max_feeds} feeds already; unsubscribe one first")
    feed, _ = ctx.repos.feeds.subscribe(url, str(arg(cmd, "name", default="")) or _name_of(url),
                                        arg(cmd, "tags", default=[], kind=list))
    return CommandResult(f"subscribed to feed {feed.id}; " + _fetch_one(ctx, feed))


@FAMILY.command("feeds.fetch", '{"feed": 3}  (fetch one feed now, or every feed; leaves the process: needs approval)',
                args=FetchArgs, effect="external")
def fetch_now(cmd: Command, ctx: CommandContext) -> CommandResult:
    ref = arg(cmd, "feed", default=None)
    feeds = [ctx.repos.feeds.find(ref)] if ref is not None else ctx.repos.feeds.list()
    if not feeds:
        raise CommandError("feeds.fetch: I read no feeds (feeds.subscribe first)")
    return CommandResult("\n".join(_fetch_one(ctx, f) for f in feeds), show=True)


@FAMILY.command("feeds.unsubscribe", '{"feed": 3}  (stop reading it; its items stay as notes)', args=FeedRefArgs,
                effect="write_self")
def unsubscribe(cmd: Command, ctx: CommandContext) -> CommandResult:
    feed = ctx.repos.feeds.find(arg(cmd, "feed"))
    if feed.added_by == "operator":
        raise CommandError(f"feeds.unsubscribe: feed {feed.id} is my operator's (config.yaml feeds.subscriptions)")
    ctx.repos.feeds.unsubscribe(feed.id)
    return CommandResult(f"unsubscribed from feed {feed.id} ({feed.name})")


def world_line(repos: Repos, settings: Any) -> str:
    """What the prompt says of the world outside: whether web search is on, the feeds and their unread items."""
    feeds = repos.feeds.list()
    unread = repos.feeds.unread_count() if feeds else 0
    reading = f"{len(feeds)} feed(s), {unread} unread item(s)" if feeds else "no feeds"
    return f"world: web search {settings.search.describe()}; {reading}"



