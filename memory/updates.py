"""Knowledge updates: a memory that updates or contradicts an older one about the same subject marks the older as
superseded — kept (status `superseded`: still searchable, ranked below what replaced it, restorable), linked both
ways in the items' `meta` (`superseded_by` on the older, `replaces` on the newer), so recall prefers the newest
and can say what it replaced.

Detection runs offline, without a model: the same author, the same subject (at least two shared content words,
a shared name and word, or one shared frame word — live, work, favourite, … — with a marker), and a word overlap of at
least `min_overlap` of the smaller statement), a different value (each
side holds a name, number or content word the other lacks), and either an update marker in the newer statement
("now", "moved", "no longer", "switched", "instead", "anymore", "quit", "changed", "new") or a near-identical
frame (overlap ≥ `frame_overlap`: "my favourite colour is blue" → "… is green"). bench/updates.py measures it.
Event time (when it happened, `meta.event_at` when the text names a date) is kept apart from record time
(`created_at`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from memory.clock import utcnow
from memory.retrieval.entities import extract

if TYPE_CHECKING:
    from memory.db import Database
    from memory.repositories import Repos
    from memory.retrieval.ranker import Hit, Query

QUERY_CHARS = 4000  # of a new memory's text, what searches for the older ones it may update (supersede_older)
UPDATE_MARKERS = re.compile(
    r"\b(now|nowadays|moved|move|moving|no longer|anymore|any more|switched|switch|instead|quit|changed|change|"
    r"new|left|stopped|started|these days|currently|not .{0,20} any ?more|actually)\b",
    re.IGNORECASE,
)
FRAME_WORDS = frozenset(
    {
        "w:favourit",
        "w:favorit",
        "w:live",
        "w:work",
        "w:job",
        "w:name",
        "w:call",
        "w:own",
        "w:drive",
        "w:car",
        "w:pet",
        "w:dog",
        "w:cat",
        "w:home",
        "w:citi",
        "w:studi",
        "w:team",
        "w:phone",
        "w:address",
        "w:age",
        "w:prefer",
        "w:hobbi",
        "w:partner",
        "w:girlfriend",
        "w:boyfriend",
        "w:friend",
        "w:best",
        "w:wife",
        "w:husband",
        "w:school",
        "w:compani",
        "w:employ",
        "w:plan",
    }
)


SMALL_TALK = frozenset(
    """hey thank thanks great sound sounds kind lot wow awesome glad yeah happi happy make made
realli really good amaz amazing love cool nice talk talked chat chatting anyth anything someth something much
appreci appreciate mean means look take thing way time feel""".split()
)


class SearchedIndex(Protocol):
    """What the supersession check uses of its memory index (memory/retrieval/index.py `MemoryIndex`)."""

    db: Database

    def sync(self, progress: bool = False, flush: bool = False) -> int: ...

    def search(self, query: Query) -> list[Hit]: ...


@dataclass(frozen=True)
class Statement:
    item_id: int
    author: str
    text: str
    created_at: datetime | None = None


@dataclass(frozen=True)
class Supersession:
    older: int
    newer: int
    subject: list[str]  # the shared words that make it the same subject
    reason: str  # "marker" | "frame"


_VOCATIVE = re.compile(
    r"(?:^|[.!?]\s+)(?:(?i:hey|hi|hello|thanks|thank you|wow|oh|yeah|yes|awesome|great|congrats|"
    r"sorry|aww|haha|ha|agreed|sounds great|same here)[,!.]?\s+)?[A-Z][a-z]+[!,.]\s*|,\s*[A-Z][a-z]+(?=[!?.]|$)"
)


def _content(text: str) -> set[str]:
    """The statement's entities, less the name of whoever it is said to ("Thanks, Mel!", "Hey Caroline,")."""
    return {
        e
        for e in extract(_VOCATIVE.sub(" ", text))
        if (not e.startswith("n:") or e.count(" ") < 3) and e[2:] not in SMALL_TALK
    }


def supersedes(
    newer: Statement, older: Statement, *, min_overlap: float = 0.3, frame_overlap: float = 0.5
) -> Supersession | None:
    """Whether `newer` updates or contradicts `older` (module doc), and why."""
    if newer.author.strip().lower() != older.author.strip().lower() or newer.item_id == older.item_id:
        return None
    a, b = _content(older.text), _content(newer.text)
    shared = a & b
    words = {e for e in shared if e.startswith("w:")}
    names = {e for e in shared if e.startswith("n:")}
    marker = bool(UPDATE_MARKERS.search(newer.text))
    if len(words) < 2 and not (names and words) and not (marker and words & FRAME_WORDS):
        return None
    smaller = max(1, min(len(a), len(b)))
    overlap = len(shared) / smaller
    if overlap < min_overlap and not (marker and words & FRAME_WORDS):
        return None
    only_old, only_new = a - b, b - a
    if not only_old or not only_new:
        return None  # a repetition, not a change
    if not (shared & FRAME_WORDS or names):
        return None  # no subject a fact is about
    if marker:
        return Supersession(older.item_id, newer.item_id, sorted(shared), "marker")
    if overlap >= frame_overlap:
        return Supersession(older.item_id, newer.item_id, sorted(shared), "frame")
    return None


def find_superseded(newer: Statement, older: Iterable[Statement]) -> list[Supersession]:
    """Every older statement the newer one replaces (the newest first)."""
    found = [s for o in sorted(older, key=lambda s: s.item_id, reverse=True) if (s := supersedes(newer, o))]
    return found


def mark(repos: Repos, found: Sequence[Supersession], now: datetime | None = None) -> int:
    """Record the chain on the items (`meta`) and set the older ones' status to `superseded`; returns how many."""
    when = (now or utcnow()).isoformat()
    changed = 0
    for s in found:
        rows = repos.items.many([s.older, s.newer])
        old, new = rows.get(s.older), rows.get(s.newer)
        if old is None or new is None or old.status == "deleted":
            continue
        old.meta = {
            **(old.meta or {}),
            "superseded_by": s.newer,
            "superseded_at": when,
            "superseded_subject": s.subject[:8],
            "status_before": old.status,
        }
        new.meta = {**(new.meta or {}), "replaces": sorted({*(new.meta or {}).get("replaces", []), s.older})}
        changed += repos.items.set_status([s.older], "superseded")
    return changed


def restore(repos: Repos, item_id: int) -> bool:
    """Undo a supersession: the older item is active again and the newer no longer lists it."""
    row = repos.items.many([item_id]).get(item_id)
    if row is None or row.status != "superseded":
        return False
    meta = dict(row.meta or {})
    newer = meta.pop("superseded_by", None)
    meta.pop("superseded_at", None)
    meta.pop("superseded_subject", None)
    status = meta.pop("status_before", "active")
    row.meta = {**meta, "restored_from": newer}
    if newer is not None and (new := repos.items.many([newer]).get(newer)) is not None:
        new.meta = {**(new.meta or {}), "replaces": [i for i in (new.meta or {}).get("replaces", []) if i != item_id]}
    return repos.items.set_status([item_id], status) > 0


def chain(repos: Repos, item_id: int) -> list[int]:
    """The item's line of versions, oldest first (following `replaces` back and `superseded_by` forward)."""
    seen: list[int] = [item_id]
    current = item_id
    while True:
        row = repos.items.many([current]).get(current)
        back = (row.meta or {}).get("replaces", []) if row is not None else []
        older = [i for i in back if i not in seen]
        if not older:
            break
        current = max(older)
        seen.insert(0, current)
    current = item_id
    while True:
        row = repos.items.many([current]).get(current)
        forward = (row.meta or {}).get("superseded_by") if row is not None else None
        if forward is None or forward in seen:
            break
        seen.append(forward)
        current = forward
    return seen


def may_supersede(text: str) -> bool:
    """Whether a statement could replace any other at all: `supersedes` needs a name or a frame word the two share,
    so one the newer statement holds itself ("entry 5", "a quiet evening" replace nothing, and are not searched for)."""
    content = _content(text)
    return bool(content & FRAME_WORDS) or any(e.startswith("n:") for e in content)


# `index`: a SearchedIndex; Any while the managers hold it as a RecallIndex, which does not declare `db`
def supersede_older(index: Any, item_id: int, *, candidates: int = 10) -> list[Supersession]:
    """The write-time check (a background job's, never the tick's): the item's closest memories by the hybrid
    search, the older ones by the same author, and those it updates marked superseded (`mark`), in one unit."""
    with index.db.unit() as repos:
        row = repos.items.many([item_id]).get(item_id)
        if row is None or row.status != "active":
            return []
        newer = Statement(row.id, row.author, row.text, row.created_at)
        tier = row.tier
    found = supersede(index, newer, tier, candidates=candidates)
    if found:
        index.sync()
    return found


def supersede(index: SearchedIndex, newer: Statement, tier: str, *, candidates: int = 10) -> list[Supersession]:
    """`supersede_older` for an active item its caller has just read (the follow-up reads a page of them at once),
    marked but not synced (the caller syncs once for all it followed up). No search for a statement that could
    replace nothing (`may_supersede`)."""
    from memory.retrieval.ranker import Query

    if not may_supersede(newer.text):
        return []
    # a long text's opening finds its closest memories: a 300,000-character paste as the query held the index's
    # lock — and a tick's recall — for 5.7 s under load (embedding and BM25-scoring all of it)
    hits = index.search(
        Query(
            text=newer.text[:QUERY_CHARS],
            k=candidates,
            tiers=[tier],
            exclude={newer.item_id},
            mmr_lambda=1.0,
            distinct=False,
        )
    )
    older = [
        Statement(h.item.id, h.item.author, h.item.text, h.item.created_at)
        for h in hits
        if h.item.id < newer.item_id and h.item.status == "active"
    ]
    found = find_superseded(newer, older)
    if found:
        with index.db.unit() as repos:
            mark(repos, found)
    return found


def versions_of(repos: Repos, items: Iterable[Any]) -> dict[int, str]:
    """The texts of the memories these items replaced or were replaced by (one step of their chains), by id."""
    ids = {
        i
        for item in items
        for i in [*(item.meta or {}).get("replaces", []), (item.meta or {}).get("superseded_by")]
        if isinstance(i, int)
    }
    return {i: row.text for i, row in repos.items.many(ids).items()} if ids else {}


def version_note(item: Any, texts: dict[int, str], width: int = 160) -> str:
    """What a recalled memory says of its versions: " (updates: …)" when it replaced older ones, " (superseded by:
    …)" when a newer one replaced it; "" otherwise (recall's lines, the persona's search results)."""
    meta = item.meta or {}

    def short(text: str) -> str:
        return text if len(text) <= width else text[: width - 1] + "…"

    older = [short(texts[i]) for i in reversed(meta.get("replaces", [])) if i in texts]
    newer = meta.get("superseded_by")
    if newer in texts:
        return f" (superseded by: {short(texts[newer])})"
    return f" (updates: {' | '.join(older)})" if older else ""


def when_label(item: Any) -> str:
    """A memory's record date, and its event date when it has one that differs: "2023-05-11, happened 2023-05-09"."""
    recorded = f"{item.created_at:%Y-%m-%d}" if item.created_at is not None else "?"
    happened = getattr(item, "event_at", None)
    if happened is None or f"{happened:%Y-%m-%d}" == recorded:
        return recorded
    precision = ((item.meta or {}).get("event") or {}).get("precision")
    shown = (
        f"{happened:%Y-%m}"
        if precision == "month"
        else f"{happened:%Y}"
        if precision == "year"
        else f"{happened:%Y-%m-%d}"
    )
    return f"{recorded}, happened {shown}"
