"""HMP `tags stats`: how often each tag is used across the diary, concepts, links, goals and tasks."""

from __future__ import annotations

from collections import Counter
from typing import Any, Unpack

from sqlalchemy import CompoundSelect, literal, select, union_all

from memory.models import Concept, ConceptLink, DiaryEntry, Goal, Task
from memory.repositories.base import Repo, prepared

# source -> (its tags column, the condition that leaves its archived rows out)
TAGGED = {
    "diary": (DiaryEntry.tags, DiaryEntry.status == "active"),
    "concepts": (Concept.tags, Concept.status == "active"),
    "links": (ConceptLink.tags, ConceptLink.status == "active"),
    "goals": (Goal.tags, Goal.archived_at.is_(None)),
    "tasks": (Task.tags, Task.archived_at.is_(None)),
}


@prepared
def _tags(sources: tuple[str, ...], include_archived: bool) -> CompoundSelect[Unpack[tuple[Any, ...]]]:
    """Every source's tags in one statement (Core), each row with its source's place in `sources`."""
    parts = []
    for place, name in enumerate(sources):
        tags_of, live = TAGGED[name]
        part = select(literal(place).label("place"), tags_of.expression.label("tags"))
        parts.append(part if include_archived else part.where(live))
    return union_all(*parts)


class TagRepo(Repo):
    def stats(self, source: str = "all", include_archived: bool = False) -> dict[str, int]:
        """Tag -> uses, most used first, over one source or all of them."""
        if source != "all" and source not in TAGGED:
            raise ValueError(f"source must be one of all, {', '.join(TAGGED)}; not {source!r}")
        counts: Counter[str] = Counter()
        sources = tuple(name for name in TAGGED if source in ("all", name))
        rows = sorted(self.core(_tags(sources, include_archived)).all(), key=lambda row: row[0])  # source by source,
        for _, tags in rows:  # each in its own order (a stable sort), so ties rank as they always did
            counts.update(str(t) for t in tags or [])
        return dict(counts.most_common())
