"""RSS and Atom feeds: fetched with httpx (a timeout, a size limit, conditional requests with the last ETag and
Last-Modified) and parsed by feedparser. An entry becomes a `FeedItem` with a stable id (its guid, else its link,
else a hash of its title) and its summary as plain text."""

from __future__ import annotations

import hashlib
import html
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

USER_AGENT = "anima-feeds/1 (+a persona reading what it subscribed to)"
_TAG = re.compile(r"<[^>]+>")


class FeedError(RuntimeError):
    pass


@dataclass
class FeedItem:
    guid: str
    title: str
    link: str
    summary: str
    published: str | None = None

    def text(self, feed_title: str, limit: int = 2000) -> str:
        body = self.summary if len(self.summary) <= limit else self.summary[:limit] + "…"
        return "\n".join(part for part in (f"{self.title} ({feed_title})", body, self.link) if part)


@dataclass
class Fetched:
    title: str
    items: list[FeedItem] = field(default_factory=list)
    etag: str | None = None
    modified: str | None = None
    not_modified: bool = False


def plain(text: str) -> str:
    return " ".join(html.unescape(_TAG.sub(" ", text or "")).split())


def _guid(entry: Mapping[str, Any]) -> str:  # a feedparser entry
    raw: str = entry.get("id") or entry.get("link") or entry.get("title") or ""
    return raw if 0 < len(raw) <= 500 else hashlib.sha256(raw.encode()).hexdigest()


def parse(body: bytes, *, max_items: int = 20) -> Fetched:
    import feedparser

    parsed = feedparser.parse(body)
    if parsed.bozo and not parsed.entries:
        raise FeedError(f"not an RSS or Atom feed ({type(parsed.get('bozo_exception')).__name__})")
    items = [
        FeedItem(
            guid=_guid(e),
            title=plain(e.get("title", "")) or "(untitled)",
            link=e.get("link", ""),
            summary=plain(e.get("summary", "") or e.get("description", "")),
            published=e.get("published") or e.get("updated"),
        )
        for e in parsed.entries[:max_items]
    ]
    return Fetched(title=plain(parsed.feed.get("title", "")) or "a feed", items=items)


def fetch(
    url: str,
    *,
    etag: str | None = None,
    modified: str | None = None,
    timeout_s: float = 20,
    max_bytes: int = 2_000_000,
    max_items: int = 20,
) -> Fetched:
    headers = {
        "User-Agent": USER_AGENT,
        **({"If-None-Match": etag} if etag else {}),
        **({"If-Modified-Since": modified} if modified else {}),
    }
    try:
        with (
            httpx.Client(timeout=timeout_s, follow_redirects=True) as client,
            client.stream("GET", url, headers=headers) as response,
        ):
            if response.status_code == 304:
                return Fetched(title="", not_modified=True, etag=etag, modified=modified)
            response.raise_for_status()
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > max_bytes:
                    raise FeedError(f"{url}: the feed is larger than {max_bytes:,} bytes")
            fetched = parse(bytes(body), max_items=max_items)
            fetched.etag, fetched.modified = response.headers.get("etag"), response.headers.get("last-modified")
            return fetched
    except FeedError:
        raise
    except httpx.TimeoutException:
        raise FeedError(f"{url}: no answer within {timeout_s:g} s") from None
    except httpx.HTTPStatusError as exc:
        raise FeedError(f"{url}: HTTP {exc.response.status_code}") from None
    except Exception as exc:  # noqa: BLE001 - one readable error
        raise FeedError(f"{url}: {type(exc).__name__}: {exc}"[:500]) from None
