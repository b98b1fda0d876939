"""Repositories: the only place that runs SQL, one module per domain. `Database.unit()` gives a `Repos`, the unit
of work: every repository bound to one session, so what a step writes commits or rolls back together.

Soft deletes: what the persona deletes is archived (out of lists and retrieval, restorable); `purge` deletes
for good and is for a human's delete only. `Repos.archive` / `Repos.restore` are the one entry point the
memory.archive and memory.restore commands and the memory manager use.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy.orm import Session

from memory.repositories.abstracts import AbstractRepo
from memory.repositories.base import NotFound
from memory.repositories.blocks import BLOCK_LIMITS, BlockRepo, MemoryLimitError
from memory.repositories.commands import CommandRepo
from memory.repositories.concepts import ConceptRepo, LinkRepo
from memory.repositories.config import ConfigRepo
from memory.repositories.consent import ApprovalRepo, AuditRepo
from memory.repositories.diary import DiaryRepo
from memory.repositories.emotions import EmotionLogRepo
from memory.repositories.entities import EntityRepo
from memory.repositories.episodes import EpisodeRepo
from memory.repositories.facts import UnverifiedFactRepo
from memory.repositories.goals import GoalRepo, TaskRepo
from memory.repositories.insights import InsightRepo
from memory.repositories.items import MemoryItemRepo
from memory.repositories.kb import KnowledgeBaseRepo
from memory.repositories.llm import LLMCallRepo, LLMRegistryRepo
from memory.repositories.llm_memory import LLMMemoryRepo
from memory.repositories.messages import TIMELINE_KINDS, MessageRepo, anchor_key
from memory.repositories.notes import NoteRepo
from memory.repositories.processes import ProcessLogRepo
from memory.repositories.questions import QuestionRepo
from memory.repositories.sessions import SessionRepo
from memory.repositories.stagnation import AntiStagnationRepo
from memory.repositories.tags import TagRepo
from memory.repositories.threads import ThreadRepo
from memory.repositories.ticks import TickRepo

# what the layers above import from here besides Repos
__all__ = ["TIMELINE_KINDS", "ArchivedRow", "MemoryLimitError", "NotFound", "Repos", "anchor_key"]

ARCHIVED_AT_TIERS = ("goal", "task")  # archived with a time; the other row tiers by their status


@dataclass(frozen=True)
class ArchivedRow:
    """One archived thing, whatever its tier, for listing."""

    tier: str
    ref: str
    title: str
    text: str
    archived_at: datetime


def _utc(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; every time stored here is UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


class Repos:
    """Every repository bound to one session (one transaction)."""

    def __init__(self, session: Session):
        self.session = session
        self.threads = ThreadRepo(session)
        self.messages = MessageRepo(session)
        self.notes = NoteRepo(session)
        self.processes = ProcessLogRepo(session)
        self.ticks = TickRepo(session)
        self.config = ConfigRepo(session)
        self.llm_registry = LLMRegistryRepo(session)
        self.commands = CommandRepo(session)
        self.llm_calls = LLMCallRepo(session)
        self.sessions = SessionRepo(session)
        self.stagnation = AntiStagnationRepo(session)
        self.items = MemoryItemRepo(session)
        self.blocks = BlockRepo(session)
        self.llm_memory = LLMMemoryRepo(session, self.items)
        self.diary = DiaryRepo(session, self.items)
        self.concepts = ConceptRepo(session, self.items)
        self.links = LinkRepo(session)
        self.abstracts = AbstractRepo(session, self.items)
        self.goals = GoalRepo(session)
        self.tasks = TaskRepo(session)
        self.episodes = EpisodeRepo(session, self.items)
        self.entities = EntityRepo(session, self.items)
        self.insights = InsightRepo(session, self.items)
        self.questions = QuestionRepo(session)
        self.facts = UnverifiedFactRepo(session)
        self.emotion_log = EmotionLogRepo(session)
        self.kb = KnowledgeBaseRepo(session, self.items)
        self.tags = TagRepo(session)
        self.approvals = ApprovalRepo(session)
        self.audit = AuditRepo(session)

    def _row_repo(self, tier: str):
        """The repository of a tier whose rows are archived themselves; None for catalogue-only tiers."""
        return {"diary": self.diary, "concept": self.concepts, "link": self.links, "llm_memory": self.llm_memory,
                "goal": self.goals, "task": self.tasks}.get(tier)

    def archive(self, tier: str, ref: str | int, now: datetime) -> bool:
        """Set one thing aside (diary, concept with its links, link, llm_memory, goal, task); any other tier of the
        retrieval catalogue (a conversation turn, say) archives its item. True when something changed."""
        repo = self._row_repo(tier)
        if repo is None:
            return self.items.set_status_of(tier, ref, "archived")
        if not str(ref).isdigit():
            return False
        return repo.archive(int(ref), now) if tier in ARCHIVED_AT_TIERS else repo.archive(int(ref))

    def restore(self, tier: str, ref: str | int) -> bool:
        """Bring an archived thing back as it was (for core memory and the notepad: a replaced version); True when
        something changed."""
        if tier in BLOCK_LIMITS:
            return str(ref).isdigit() and self.blocks.restore_version(tier, int(ref))
        repo = self._row_repo(tier)
        if repo is None:
            return self.items.set_status_of(tier, ref, "active")
        return str(ref).isdigit() and repo.restore(int(ref))

    def archived(self, limit: int = 10) -> list[ArchivedRow]:
        """What is archived, of every tier, most recently archived first."""
        rows = [ArchivedRow(i.tier, i.ref, i.title, i.text, i.updated_at) for i in self.items.archived(limit)]
        rows += [ArchivedRow("goal", str(g.id), g.title, g.description, g.archived_at) for g in self.goals.archived(limit)]
        rows += [ArchivedRow("task", str(t.id), t.title, t.description, t.archived_at) for t in self.tasks.archived(limit)]
        links = self.links.archived(limit)
        names = self.concepts.names({link.source_id for link in links} | {link.target_id for link in links})
        rows += [ArchivedRow("link", str(link.id), f"{names.get(link.source_id)} —{link.relation}→ "
                             f"{names.get(link.target_id)}", "", link.updated_at) for link in links]
        rows += [ArchivedRow(v.name, str(v.id), "replaced version", v.content, v.replaced_at)
                 for v in self.blocks.versions(limit=limit)]
        return sorted(rows, key=lambda row: _utc(row.archived_at), reverse=True)[:limit]
