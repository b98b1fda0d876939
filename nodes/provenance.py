"""Where a piece of the prompt came from. The owner's own words (the web page, the terminal) and what the persona
wrote itself are trusted; text that arrived from outside is not: the knowledge base, feeds, web search, MCP tools
and MCP clients, scripts' output, another model's answer (and, with channels and the mesh, guests and peers).

`prepare_context` lists the untrusted sources of everything it put in the prompt (`TickState.untrusted`). A command
that writes to a tier shown in every prompt (`CommandSpec.prompt_tier`: core memory, the notepads, strategies,
thinking methods, scripts) from a tick whose prompt held any of them waits for the owner's approval, and the
approval shows those sources (nodes/commands/consent.py): text that arrived as data cannot plant itself in every
future prompt. The owner's own request in a tick with nothing untrusted ("remember that I like tea") runs at once.

A source is plain JSON (it is checkpointed with the tick and stored with a process row or an approval):
`{"origin": "kb", "ref": "doc 3 chunk 2", "excerpt": "…"}`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from typing_extensions import TypedDict

# origin -> how the owner reads it in an approval
UNTRUSTED: dict[str, str] = {
    "kb": "the knowledge base",
    "feed": "a feed",
    "search": "a web search",
    "tool": "an MCP tool",
    "mcp_client": "an MCP client",
    "script": "a script's output",
    "model": "another model's answer",
    "peer": "a peer (another agent, over A2A or the mesh)",
    "channel": "a message from someone other than my owner (Matrix, Telegram, e-mail)",
}
EXCERPT_CHARS = 160
MAX_SOURCES = 12  # kept per tick, per process row and per approval: enough to judge, never unbounded


class Source(TypedDict):
    origin: str  # a key of UNTRUSTED
    ref: str  # which one: "doc 3 chunk 2", "feed tides", "search.web 'tide tables'", "note 12"
    excerpt: str


def source(origin: str, ref: str, text: str = "") -> Source:
    if origin not in UNTRUSTED:
        raise ValueError(f"unknown untrusted origin {origin!r} (one of {', '.join(UNTRUSTED)})")
    flat = " ".join(str(text).split())
    excerpt = flat if len(flat) <= EXCERPT_CHARS else flat[:EXCERPT_CHARS - 1] + "…"
    return {"origin": origin, "ref": str(ref)[:200], "excerpt": excerpt}


def merged(*groups: Iterable[Source] | None) -> list[Source]:
    """The sources of several places, each once (origin + ref), at most MAX_SOURCES."""
    out: dict[tuple[str, str], Source] = {}
    for group in groups:
        for item in group or ():
            if isinstance(item, dict) and item.get("origin") in UNTRUSTED:
                out.setdefault((item["origin"], str(item.get("ref", ""))), item)
    return list(out.values())[:MAX_SOURCES]


def of_note(note: Any) -> Source | None:
    """A note's source, or None for the owner's own words and the persona's own notes."""
    tags = list(getattr(note, "tags", None) or [])
    text = getattr(note, "text", "")
    origin = {"feed": "feed", "llm_task": "model", "peer": "peer"}.get(getattr(note, "source", ""))
    if origin is None and "via:mcp" in tags:
        origin = "mcp_client"
    if origin is None and getattr(note, "source", "") == "channel" and "role:owner" not in tags:
        origin = "channel"
    if origin is None:
        return None
    feed = next((t.split(":", 1)[1] for t in tags if isinstance(t, str) and t.startswith("feed:")), "")
    if origin == "peer":
        return source(origin, f"note {note.id} (from {note_author(note) or 'an unknown peer'})", text)
    return source(origin, f"note {note.id}" + (f" (feed {feed})" if feed else ""), text)


def note_author(note: Any) -> str | None:
    """Who wrote a note that arrived from outside (`from:<name>` among its tags), or None."""
    return next((t.split(":", 1)[1] for t in (getattr(note, "tags", None) or [])
                 if isinstance(t, str) and t.startswith("from:")), None)


def of_notes(notes: Iterable[Any]) -> list[Source]:
    return merged([s for s in (of_note(n) for n in notes) if s is not None])


def of_item(item: Any) -> Source | None:
    """A recalled memory's source: knowledge-base chunks, and memories of what arrived from outside
    (`meta.origin`, set where they are written)."""
    if getattr(item, "tier", "") == "kb":
        return source("kb", f"{item.title or 'document'} ({item.ref})", item.text)
    origin = (getattr(item, "meta", None) or {}).get("origin")
    if origin in UNTRUSTED:
        return source(origin, f"{item.tier} {item.ref}", item.text)
    return None


def of_items(items: Iterable[Any]) -> list[Source]:
    return merged([s for s in (of_item(i) for i in items) if s is not None])


def of_process(row: Any) -> list[Source]:
    """What a process row (a command's result) says it holds."""
    return merged(getattr(row, "sources", None) or [])


def describe(sources: Iterable[Source]) -> str:
    """One line for the owner: which untrusted text the tick had read."""
    parts = [f"{UNTRUSTED.get(s['origin'], s['origin'])} — {s['ref']}" + (f": “{s['excerpt']}”" if s.get("excerpt") else "")
             for s in sources]
    return "; ".join(parts)
