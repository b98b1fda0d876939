"""The memory write path shared by the tick, the command handlers and the benchmarks.

Each function writes a tier's row and its retrieval item in the caller's transaction; the caller syncs
the index (`MemoryIndex.sync`) after commit.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from memory.models import MemoryItem
from memory.repositories import Repos


def record_turn(
    repos: Repos,
    *,
    ref: str,
    text: str,
    author: str,
    episode: str,
    created_at: datetime | None = None,
    thread_id: str | None = None,
    tags: Iterable[str] = (),
    emotions: Iterable[str] = (),
    importance: float = 0.5,
    emotion_score: float = 0.0,
    novelty: float | None = None,
    meta: dict[str, Any] | None = None,
) -> MemoryItem:
    """A conversation turn (the human's or the persona's), placed in its episode after the previous turn."""
    return repos.items.put(
        "message",
        ref,
        text,
        author=author,
        episode=episode,
        created_at=created_at,
        thread_id=thread_id,
        tags=tags,
        emotions=emotions,
        importance=importance,
        emotion_score=emotion_score,
        novelty=novelty,
        meta=meta,
    )
