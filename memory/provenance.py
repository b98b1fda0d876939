"""Where a piece of the prompt came from. The owner's own words (the web page, the terminal, the owner's channels)
and what the persona wrote itself from them are trusted; text that arrived from outside is not: the knowledge base,
feeds, web search, MCP tools and MCP clients, scripts' output, another model's answer, guests and trusted people on
a channel, peers.

`prepare_context` lists the untrusted sources of everything it put in the prompt (`TickState.untrusted`). A command
that writes to a tier shown in every prompt (`CommandSpec.prompt_tier`: core memory, the notepads, strategies,
thinking methods, scripts, config, the people and agents trusted) from a tick whose prompt held any of them waits
for the owner's approval, and the approval shows those sources (managers/consent.py): text that arrived as
data cannot plant itself in every future prompt. The owner's own request in a tick with nothing untrusted
("remember that I like tea") runs at once.

**Provenance follows what it taints** (memory/taint.py). Every row a tick with untrusted sources writes — a goal, a
task, a note, a diary entry, a concept, an abstract, its thought — keeps those sources; a row derived from tainted
rows (an abstract, a day's summary) inherits them; a command's result that shows a tainted row carries them. Every
prompt that shows a tainted row shows it inside a data fence naming where it came from, and the tick is tainted by
it (`via` says through which row), so the write it leads to is gated as the first one was. Taint ends: the owner
trusts a row (an audited human action: page, API, CLI), owner-approved commands write clean rows, a goal or task
that is closed or archived leaves the every-prompt blocks, and a thought taints only while it is among the recent
thoughts — a thought's own taint comes from what its tick read, never from another thought, so a thought cannot
pass a taint on to the next one forever (docs/consent.md).

**Relays.** A message the persona sends as itself (`CommandSpec.relay`: messages.send — a channel, A2A —, mesh.send)
from a tick with untrusted sources goes at once only to someone who wrote in that tick or wrote the untrusted text
(a reply); to anyone else it waits for the owner, with the sources shown.

A source is plain JSON (it is checkpointed with the tick and stored with a process row, an approval or a taint):
`{"origin": "kb", "ref": "doc 3 chunk 2", "excerpt": "…"}`, and when known who wrote it (`person`: a person's id,
`peer`: a peer's name) and through which row it reached the prompt (`via`: "goal 5", "my thought 812").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NotRequired, cast

from typing_extensions import TypedDict

from memory.repositories import taints
from memory.taint import item_key

# origin -> how the owner reads it in an approval
UNTRUSTED: dict[str, str] = {
    "kb": "the knowledge base",
    "feed": "a feed",
    "search": "a web search",
    "web": "a web page (read in a browser)",
    "git": "a Git repository's content",
    "tool": "an MCP tool",
    "mcp_client": "an MCP client",
    "script": "a script's output",
    "model": "another model's answer",
    "peer": "a peer (another agent, over A2A or the mesh)",
    "channel": "a message from someone other than my owner (Matrix, Telegram, e-mail)",
}
EXCERPT_CHARS = 160
MAX_SOURCES = 12  # kept per tick, per process row and per approval: enough to judge, never unbounded


THOUGHT = taints.THOUGHT  # `via` of a source that reached the prompt through a thought ("my thought 812")
via_of = taints.via_of


class Source(TypedDict):
    origin: str  # a key of UNTRUSTED
    ref: str  # which one: "doc 3 chunk 2", "feed tides", "search.web 'tide tables'", "note 12"
    excerpt: str
    person: NotRequired[int]  # who wrote it: a person (people.id) on a channel
    role: NotRequired[str]  # and their role (owner | trusted | guest): what they may ask (managers/people.py RIGHTS)
    peer: NotRequired[str]  # or a peer (its name)
    via: NotRequired[str]  # the tainted row it reached this prompt through ("goal 5", "my thought 812")


def source(origin: str, ref: str, text: str = "") -> Source:
    if origin not in UNTRUSTED:
        raise ValueError(f"unknown untrusted origin {origin!r} (one of {', '.join(UNTRUSTED)})")
    flat = " ".join(str(text).split())
    excerpt = flat if len(flat) <= EXCERPT_CHARS else flat[: EXCERPT_CHARS - 1] + "…"
    return {"origin": origin, "ref": str(ref)[:200], "excerpt": excerpt}


def merged(*groups: Iterable[Source] | None) -> list[Source]:
    """The sources of several places, each once (origin + ref, and the row it came through: every way it reached
    the prompt is shown), at most MAX_SOURCES."""
    out: dict[tuple[str, str, str], Source] = {}
    for group in groups:
        for item in group or ():
            if isinstance(item, dict) and item.get("origin") in UNTRUSTED:
                out.setdefault((item["origin"], str(item.get("ref", "")), str(item.get("via", ""))), item)
    return list(out.values())[:MAX_SOURCES]


def of_note(note: Any, authors: dict[int, tuple[str, str]] | None = None) -> Source | None:
    """A note's source, or None for the owner's own words and the persona's own notes. `authors`: person id →
    (name, role), to name who wrote a channel's note."""
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
        peer = note_author(note)
        found = source(origin, f"note {note.id} (from {peer or 'an unknown peer'})", text)
        if peer:
            found["peer"] = peer
        return found
    author = getattr(note, "author_id", None)
    known = (authors or {}).get(author) if origin == "channel" and author is not None else None
    via = next((t[4:] for t in tags if isinstance(t, str) and t.startswith("via:")), "")
    who = f" (from {known[0]}, {known[1]}" + (f", via {via})" if via else ")") if known else ""
    found = source(origin, f"note {note.id}" + (f" (feed {feed})" if feed else "") + who, text)
    if origin == "channel" and author is not None:
        found["person"] = int(author)
    role = known[1] if known else next((t[5:] for t in tags if isinstance(t, str) and t.startswith("role:")), "")
    if origin == "channel" and role:
        found["role"] = role
    return found


def note_author(note: Any) -> str | None:
    """Who wrote a note that arrived from outside (`from:<name>` among its tags), or None."""
    return next(
        (
            t.split(":", 1)[1]
            for t in (getattr(note, "tags", None) or [])
            if isinstance(t, str) and t.startswith("from:")
        ),
        None,
    )


def of_notes(notes: Iterable[Any], authors: dict[int, tuple[str, str]] | None = None) -> list[Source]:
    return merged([s for s in (of_note(n, authors) for n in notes) if s is not None])


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


def of_tainted_items(lookup: Any, items: Iterable[Any]) -> dict[int, list[Source]]:
    """Of recalled or found memories (retrieval items), those that are rows written from untrusted text: their
    sources through them, by item id (`lookup`: (tier, ref) keys → their sources, `ConsentManager.taints_of`)."""
    keys = {item.id: key for item in items if (key := item_key(item.tier, item.ref)) is not None}
    found = lookup(keys.values()) if keys else {}
    return {item_id: through(found[key], via_of(*key)) for item_id, key in keys.items() if key in found}


def of_process(row: Any) -> list[Source]:
    """What a process row (a command's result) says it holds."""
    return merged(getattr(row, "sources", None) or [])


def describe(sources: Iterable[Source]) -> str:
    """One line for the owner: which untrusted text the tick had read (and through which row)."""
    parts = [
        f"{UNTRUSTED.get(s['origin'], s['origin'])} — {s['ref']}"
        + (f", via {s['via']}" if s.get("via") else "")
        + (f": “{s['excerpt']}”" if s.get("excerpt") else "")
        for s in sources
    ]
    return "; ".join(parts)


def origins(sources: Iterable[Source]) -> str:
    """Where the text came from, without its words (a fence's label: the words are inside it)."""
    return "; ".join(dict.fromkeys(f"{UNTRUSTED.get(s['origin'], s['origin'])} — {s['ref']}" for s in sources))


def through(sources: Iterable[Any], via: str) -> list[Source]:
    """Stored sources (a taint's) as they reach this prompt through one row."""
    return [cast(Source, {**s, "via": via}) for s in sources if isinstance(s, dict) and s.get("origin") in UNTRUSTED]


def of_row(found: dict[str, list[Any]], ref: Any, via: str) -> list[Source]:
    """A row's sources from a taint look-up (`repos.taints.of`), through it; [] when the row is clean."""
    return through(found.get(str(ref)) or [], via)


def own(sources: Iterable[Source]) -> list[Source]:
    """What taints a thought written from these sources: all but what reached its prompt only through an earlier
    thought (the chain of thoughts ends where what it read ends)."""
    return [s for s in sources if not str(s.get("via", "")).startswith(THOUGHT)]


def authors(sources: Iterable[Source]) -> tuple[set[int], set[str]]:
    """Who wrote the untrusted text: (person ids, peer names)."""
    people: set[int] = set()
    peers: set[str] = set()
    for s in sources:
        if isinstance(s.get("person"), int):
            people.add(int(s["person"]))
        if s.get("peer"):
            peers.add(str(s["peer"]).lower())
    return people, peers
