"""HMP `tags stats`: how often each tag is used across the diary, concepts, links, goals and tasks."""

from __future__ import annotations

from collections import Counter

from sqlalchemy import select

from memory.models import Concept, ConceptLink, DiaryEntry, Goal, Task
from memory.repositories.base import Repo

# source -> (model, the condition that leaves its archived rows out)
TAGGED = {
    "diary": (DiaryEntry, DiaryEntry.status == "active"),
    "concepts": (Concept, Concept.status == "active"),
    "links": (ConceptLink, ConceptLink.status == "active"),
    "goals": (Goal, Goal.archived_at.is_(None)),
    "tasks": (Task, Task.archived_at.is_(None)),
}


class TagRepo(Repo):
    def stats(self, source: str = "all", include_archived: bool = False) -> dict[str, int]:
        """Tag -> uses, most used first, over one source or all of them."""
        if source != "all" and source not in TAGGED:
            raise ValueError(f"source must be one of all, {', '.join(TAGGED)}; not {source!r}")
        counts: Counter[str] = Counter()
        for name, (model, live) in TAGGED.items():
            if source in ("all", name):
                q = select(model.tags) if include_archived else select(model.tags).where(live)
                for tags in self.session.scalars(q).all():
                    counts.update(str(t) for t in tags or [])
        return dict(counts.most_common())
