"""Abstracts (HMP "тематические конспекты"): digests of recent thoughts, diary entries and concepts.

Triggers: every N ticks, a goal or task closing, a change of context/memory mode, or the persona asking.
A trigger is recorded as a request in the `config` table in the transaction that caused it; the
manage_memory step builds the abstract after the tick, so a crash in between loses nothing.
Each abstract stores the ids of its sources (`message:12`, `diary:3`, `concept:5`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import i18n
from memory.models import Abstract
from memory.repositories import Repos
from memory.upkeep.prompts import ABSTRACT_PROMPT, ABSTRACT_SCHEMA

Generate = Callable[[str, dict[str, Any]], dict[str, Any]]  # (prompt, json schema) -> the model's JSON object
MAX_ITEM_CHARS = 600
THOUGHT_KINDS = ("response", "continuation", "step")  # the messages an abstract digests


def request_abstract(repos: Repos, thread_id: str, trigger: str, what: str = "") -> None:
    repos.config.set_abstract_request(thread_id, {"trigger": trigger, "what": what})


def pending_request(repos: Repos, thread_id: str) -> dict[str, Any] | None:
    return repos.config.abstract_request(thread_id)


def clear_request(repos: Repos, thread_id: str) -> None:
    repos.config.set_abstract_request(thread_id, None)


def _last_source_ids(repos: Repos, thread_id: str) -> dict[str, int]:
    """The newest source of each kind already covered by an abstract of this thread."""
    last: dict[str, int] = {"message": 0, "diary": 0, "concept": 0}
    for row in repos.abstracts.of_thread(thread_id, limit=20):
        for source in row.sources or []:
            kind, _, ident = str(source).partition(":")
            if kind in last and ident.isdigit():
                last[kind] = max(last[kind], int(ident))
    return last


def gather_sources(repos: Repos, thread_id: str, limit: int = 30) -> list[tuple[str, str]]:
    """(source id, text) of what happened since the last abstract: thoughts, diary entries, concepts."""
    last = _last_source_ids(repos, thread_id)
    found = [
        (f"message:{m.id}", m.content)
        for m in repos.messages.since(thread_id, last["message"], THOUGHT_KINDS, last=limit)
    ]
    found += [(f"diary:{d.id}", d.text) for d in repos.diary.newer_than(last["diary"], limit=10)]
    found += [
        (f"concept:{c.id}", f"{c.name}: {c.description}") for c in repos.concepts.newer_than(last["concept"], limit=10)
    ]
    return sorted(found, key=lambda x: (x[0].split(":")[0], int(x[0].split(":")[1])))


def build_abstract(
    repos: Repos,
    thread_id: str,
    trigger: str,
    generate: Generate,
    persona_name: str,
    min_sources: int = 2,
    language: str = "en",
) -> Abstract | None:
    """Digest what is new since the last abstract; None when there is too little to digest."""
    sources = gather_sources(repos, thread_id)
    if len(sources) < min_sources:
        return None
    items = "\n".join(f"- ({sid}) {text[:MAX_ITEM_CHARS]}" for sid, text in sources)
    data = generate(
        i18n.text(ABSTRACT_PROMPT, language).format(name=persona_name, count=len(sources), items=items), ABSTRACT_SCHEMA
    )
    summary = str(data.get("summary") or "").strip()
    if not summary:  # the model gave nothing usable: keep the sources' own words rather than nothing
        summary = " / ".join(text[:160] for _, text in sources[-5:])
    tags = [str(t).lower() for t in data.get("tags") or [] if str(t).strip()][:5]
    title = str(data.get("title") or "").strip() or f"{trigger} digest"
    return repos.abstracts.add(
        title[:300], summary, tags=tags, sources=[sid for sid, _ in sources], trigger=trigger, thread_id=thread_id
    )
