"""The world outside (HMP "Информационные потоки"): web search and RSS/Atom feeds.

`search.web` asks the search backend the operator configured (config.yaml `search`: an MCP tool, an HTTP endpoint
answering JSON, or an OpenAI-compatible model that searches); with none it is off, and the prompt's guide says so.
It leaves the process, so it is `external`. Its results go to process_log, and so reach the next prompt fenced as
data. Feeds: `feeds.subscribe` (external: from then on the loop fetches the feed between ticks), `feeds.fetch`
(external: now), `feeds.list`, `feeds.unsubscribe`. A fetched entry becomes a note with source `feed` and the tags
`feed`, `feed:<name>` and the feed's own: the persona reads them with `notes.list {"source": "feed"}`, and the
anti-stagnation "world check" brings the newest unread one into a stagnant thought. The feeds' rules are the world
manager's (managers/world.py); a handler here checks its arguments, calls it and reports.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from pydantic import Field, StringConstraints, field_validator

from managers.world import WorldError
from memory import provenance
from memory.models import Feed
from nodes.commands.args import Args, Label, Ref, SearchText, Words, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg
from reach import budget
from reach.mcp import McpError, call_tool
from reach.search import (
    SearchAnswer,
    SearchError,
    command_program,
    parse_results,
    search_command,
    search_http,
    search_openai,
)

FAMILY = Family(
    "world",
    "the world outside: web search and feeds",
    compact=True,
    abouts={
        "search": "web search through the backend my operator set",
        "feeds": "RSS/Atom feeds I read; their items are notes (source feed)",
    },
)
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
    config = settings.search
    if config.backend == "none":
        return "no search backend is configured (config.yaml search)"
    if config.backend == "command" and command_program(config.command) is None:  # Epos: no CLI, no search, quietly
        return f"the search program {config.command[0]!r} is not installed"
    return None


def run_search(settings: Any, query: str, k: int) -> SearchAnswer:
    """The configured backend's answer; SearchError (or McpError) names what failed."""
    config = settings.search
    k = min(k, config.max_results)
    if config.backend == "http":
        return search_http(
            config.url,
            query,
            query_param=config.query_param,
            params=config.params,
            api_key_env=config.api_key_env,
            max_results=k,
            timeout_s=config.timeout_s,
        )
    if config.backend == "command":
        return search_command(config.command, query, max_results=k, timeout_s=config.timeout_s)
    if config.backend == "openai":
        return search_openai(
            config.url,
            query,
            model=config.model,
            api_key_env=config.api_key_env,
            max_results=k,
            timeout_s=config.timeout_s,
        )
    from nodes.commands.mcp import server_spec

    outcome = call_tool(server_spec(settings, config.server), config.tool, {config.query_arg: query}, config.timeout_s)
    if outcome.is_error:
        raise SearchError(f"search tool {config.server}.{config.tool} failed: {outcome.text[:300]}")
    return parse_results(outcome.text, k)


@FAMILY.command(
    "search.web",
    '{"query": "…", "k": 5}  (searches the web; leaves the process: needs approval)',
    args=SearchWebArgs,
    effect="external",
    unavailable=search_off,
)
def search_web(cmd: Command, ctx: CommandContext) -> CommandResult:
    query = str(arg(cmd, "query"))
    try:
        answer = run_search(ctx.settings, query, arg(cmd, "k", default=5, kind=int))
        status, text = "ok", answer.render() or f"nothing found for {query!r}"
    except (SearchError, McpError) as exc:
        status, text = "error", str(exc)
    text = budget(text, ctx.settings.search.output_chars)
    ctx.managers.world.log(
        "search.web",
        f"{query!r} → {text}",
        ok=status == "ok",
        thread_id=ctx.thread_id,
        tags=["search"],
        llm_id=ctx.llm_id,
        task_id=ctx.task_id,
        sources=[provenance.source("search", f"search.web {query!r}", text)],
    )
    return CommandResult(text, status="executed" if status == "ok" else "failed")


# -- feeds ------------------------------------------------------------------------------------------------------


def _feed_line(feed: Feed) -> str:
    when = f"fetched {feed.last_fetched_at:%Y-%m-%d %H:%M}" if feed.last_fetched_at else "never fetched"
    error = f"; last error: {feed.last_error}" if feed.last_error else ""
    return (
        f"[feed {feed.id} {feed.name} ({feed.added_by}) {feed.status}] {feed.url} — {when}, "
        f"{feed.items_total} item(s){error}"
    )


@FAMILY.command("feeds.list", "{}  (the feeds I read, and how many items wait unread)", effect="read")
def list_feeds(cmd: Command, ctx: CommandContext) -> CommandResult:
    world = ctx.managers.world
    lines = [_feed_line(f) for f in world.feeds()] or ['no feeds (feeds.subscribe {"url": "…"})']
    lines.append(f'{world.unread_count()} unread feed item(s): notes.list {{"source": "feed", "unread": true}}')
    return CommandResult("\n".join(lines), show=True)


def _fetch_one(ctx: CommandContext, feed: Feed) -> str:
    outcome = ctx.managers.world.fetch_now(feed, now=ctx.now, thread_id=ctx.thread_id)
    if outcome.error is None:
        ctx.managers.world.log(
            "feeds.fetch",
            outcome.text,
            ok=True,
            thread_id=ctx.thread_id,
            tags=["feed"],
            sources=[provenance.source("feed", f"feed {feed.id} ({feed.name})", outcome.text)] if outcome.made else [],
        )
    return outcome.text


@FAMILY.command(
    "feeds.subscribe",
    '{"url": "https://…/rss.xml", "name": "tides", "tags": ["sea"]}  (reads it '
    "from now on; leaves the process: needs approval)",
    args=SubscribeArgs,
    effect="external",
)
def subscribe(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        feed = ctx.managers.world.subscribe(
            str(arg(cmd, "url")), str(arg(cmd, "name", default="")), arg(cmd, "tags", default=[], kind=list)
        )
    except WorldError as exc:
        raise CommandError(f"feeds.subscribe: {exc}") from None
    return CommandResult(f"subscribed to feed {feed.id}; " + _fetch_one(ctx, feed))


@FAMILY.command(
    "feeds.fetch",
    '{"feed": 3}  (fetch one feed now, or every feed; leaves the process: needs approval)',
    args=FetchArgs,
    effect="external",
)
def fetch_now(cmd: Command, ctx: CommandContext) -> CommandResult:
    ref = arg(cmd, "feed", default=None)
    world = ctx.managers.world
    feeds = [world.find(ref)] if ref is not None else world.feeds(sync=False)
    if not feeds:
        raise CommandError("feeds.fetch: I read no feeds (feeds.subscribe first)")
    return CommandResult("\n".join(_fetch_one(ctx, f) for f in feeds), show=True)


@FAMILY.command(
    "feeds.unsubscribe",
    '{"feed": 3}  (stop reading it; its items stay as notes)',
    args=FeedRefArgs,
    effect="write_self",
)
def unsubscribe(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        feed = ctx.managers.world.unsubscribe(arg(cmd, "feed"))
    except WorldError as exc:
        raise CommandError(f"feeds.unsubscribe: {exc}") from None
    return CommandResult(f"unsubscribed from feed {feed.id} ({feed.name})")
