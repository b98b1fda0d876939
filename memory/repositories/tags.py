"""HMP `tags stats`: how often each tag is used across the diary, concepts, links, goals and tasks."""

from __future__ import annotations

from collections import Counter

from sqlalchemy import select

from memory.models import Concept, ConceptLink, DiaryEntry, Goal, Task
from memory.repositories.base import Repo

# source -> (its tags column, the condition that leaves its archived rows out)
TAGGED = {
    "diary": (DiaryEntry.tags, DiaryEntry.status == "active"),
    "concepts": (Concept.tags, Concept.status == "active"),
    "links": (ConceptLink.tags, ConceptLink.status == "active"),
    "goals": (Goal.tags, Goal.archived_at.is_(None)),
    "tasks": (Task.tags, Task.archived_at.is_(None)),
}


class TagRepo(Repo):
    def stats(self, source: str = "all", include_archived: bool = False) -> dict[str, int]:
        """Tag -> uses, most used first, over one source or all of them."""
        if source != "all" and source not in TAGGED:
            raise ValueError(f"source must be one of all, {', '.join(TAGGED)}; not {source!r}")
        counts: Counter[str] = Counter()
        for name, (tags_of, live) in TAGGED.items():
            if source in ("all", name):
                q = select(tags_of) if include_archived else select(tags_of).where(live)
                for tags in self.session.scalars(q).all():
                    counts.update(str(t) for t in tags or [])
        return dict(counts.most_common())
