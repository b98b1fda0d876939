"""Repositories: the only place that runs SQL, one module per domain. `Database.unit()` gives a `Repos`, the unit
of work: every repository bound to one session, so what a step writes commits or rolls back together.

Soft deletes: what the persona deletes is archived (out of lists and retrieval, restorable); `purge` deletes
for good and is for a human's delete only. `Repos.archive` / `Repos.restore` are the one entry point the
memory.archive and memory.restore commands and the memory manager use.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Protocol

from sqlalchemy.orm import Session

from memory.clock import as_utc
from memory.repositories.abstracts import AbstractRepo
from memory.repositories.base import NotFound
from memory.repositories.blocks import BLOCK_LIMITS, BlockRepo, MemoryLimitError
from memory.repositories.catalogues import AgentTableRepo, RecordRepo
from memory.repositories.commands import CommandRepo
from memory.repositories.concepts import ConceptRepo, LinkRepo
from memory.repositories.config import ConfigRepo
from memory.repositories.consent import ApprovalRepo, AuditRepo
from memory.repositories.diary import DiaryRepo
from memory.repositories.emotions import EmotionLogRepo
from memory.repositories.entities import EntityRepo
from memory.repositories.episodes import EpisodeRepo
from memory.repositories.facts import UnverifiedFactRepo
from memory.repositories.feeds import FeedRepo
from memory.repositories.goals import GoalRepo, TaskRepo
from memory.repositories.history import HistoryRepo
from memory.repositories.insights import InsightRepo
from memory.repositories.items import MemoryItemRepo
from memory.repositories.kb import KnowledgeBaseRepo
from memory.repositories.live import LiveEventRepo
from memory.repositories.llm import LLMCallRepo, LLMRegistryRepo
from memory.repositories.llm_memory import LLMMemoryRepo
from memory.repositories.mesh import MeshRepo, TrustRepo
from memory.repositories.messages import TIMELINE_KINDS, MessageRepo, anchor_key
from memory.repositories.notes import NoteRepo
from memory.repositories.peers import PeerRepo
from memory.repositories.people import ChannelRepo, PeopleRepo
from memory.repositories.processes import ProcessLogRepo
from memory.repositories.questions import QuestionRepo
from memory.repositories.scripts import ProcessRunRepo, ScriptRepo
from memory.repositories.scrub import ScrubRepo
from memory.repositories.secrets import SealedSecretRepo
from memory.repositories.sessions import SessionRepo
from memory.repositories.stagnation import AntiStagnationRepo
from memory.repositories.strategies import StrategyRepo, ThinkingMethodRepo
from memory.repositories.tags import TagRepo
from memory.repositories.taints import TaintRepo
from memory.repositories.threads import ThreadRepo
from memory.repositories.ticks import TickRepo
from memory.repositories.tool_uses import ToolUseRepo

# what the layers above import from here besides Repos
__all__ = ["TIMELINE_KINDS", "ArchivedRow", "MemoryLimitError", "NotFound", "Repos", "anchor_key"]


class _ArchivedByStatus(Protocol):
    """A repository whose rows are archived (restorably) and restored by id, by their status."""

    def archive(self, row_id: int, /) -> bool: ...

    def restore(self, row_id: int, /) -> bool: ...


@dataclass(frozen=True)
class ArchivedRow:
    """One archived thing, whatever its tier, for listing."""

    tier: str
    ref: str
    title: str
    text: str
    archived_at: datetime


class Repos:
    """Every repository bound to one session (one transaction)."""

    def __init__(self, session: Session):
        self.session = session

    # each repository is built when first used: a unit of work touches a few of them, not all thirty
    @cached_property
    def threads(self) -> ThreadRepo:
        return ThreadRepo(self.session)

    @cached_property
    def messages(self) -> MessageRepo:
        return MessageRepo(self.session)

    @cached_property
    def notes(self) -> NoteRepo:
        return NoteRepo(self.session)

    @cached_property
    def processes(self) -> ProcessLogRepo:
        return ProcessLogRepo(self.session)

    @cached_property
    def ticks(self) -> TickRepo:
        return TickRepo(self.session)

    @cached_property
    def config(self) -> ConfigRepo:
        return ConfigRepo(self.session)

    @cached_property
    def llm_registry(self) -> LLMRegistryRepo:
        return LLMRegistryRepo(self.session)

    @cached_property
    def commands(self) -> CommandRepo:
        return CommandRepo(self.session)

    @cached_property
    def llm_calls(self) -> LLMCallRepo:
        return LLMCallRepo(self.session)

    @cached_property
    def sessions(self) -> SessionRepo:
        return SessionRepo(self.session)

    @cached_property
    def stagnation(self) -> AntiStagnationRepo:
        return AntiStagnationRepo(self.session)

    @cached_property
    def items(self) -> MemoryItemRepo:
        return MemoryItemRepo(self.session)

    @cached_property
    def blocks(self) -> BlockRepo:
        return BlockRepo(self.session)

    @cached_property
    def llm_memory(self) -> LLMMemoryRepo:
        return LLMMemoryRepo(self.session, self.items)

    @cached_property
    def diary(self) -> DiaryRepo:
        return DiaryRepo(self.session, self.items)

    @cached_property
    def concepts(self) -> ConceptRepo:
        return ConceptRepo(self.session, self.items)

    @cached_property
    def links(self) -> LinkRepo:
        return LinkRepo(self.session)

    @cached_property
    def abstracts(self) -> AbstractRepo:
        return AbstractRepo(self.session, self.items)

    @cached_property
    def taints(self) -> TaintRepo:
        return TaintRepo(self.session)

    @cached_property
    def goals(self) -> GoalRepo:
        return GoalRepo(self.session)

    @cached_property
    def tasks(self) -> TaskRepo:
        return TaskRepo(self.session)

    @cached_property
    def episodes(self) -> EpisodeRepo:
        return EpisodeRepo(self.session, self.items)

    @cached_property
    def entities(self) -> EntityRepo:
        return EntityRepo(self.session, self.items)

    @cached_property
    def insights(self) -> InsightRepo:
        return InsightRepo(self.session, self.items)

    @cached_property
    def questions(self) -> QuestionRepo:
        return QuestionRepo(self.session)

    @cached_property
    def facts(self) -> UnverifiedFactRepo:
        return UnverifiedFactRepo(self.session)

    @cached_property
    def emotion_log(self) -> EmotionLogRepo:
        return EmotionLogRepo(self.session)

    @cached_property
    def kb(self) -> KnowledgeBaseRepo:
        return KnowledgeBaseRepo(self.session, self.items)

    @cached_property
    def tags(self) -> TagRepo:
        return TagRepo(self.session)

    @cached_property
    def approvals(self) -> ApprovalRepo:
        return ApprovalRepo(self.session)

    @cached_property
    def live_events(self) -> LiveEventRepo:
        return LiveEventRepo(self.session)

    @cached_property
    def audit(self) -> AuditRepo:
        return AuditRepo(self.session)

    @cached_property
    def history(self) -> HistoryRepo:
        return HistoryRepo(self.session)

    @cached_property
    def scrub(self) -> ScrubRepo:
        return ScrubRepo(self.session)

    @cached_property
    def mesh(self) -> MeshRepo:
        return MeshRepo(self.session)

    @cached_property
    def trust(self) -> TrustRepo:
        return TrustRepo(self.session)

    @cached_property
    def secrets(self) -> SealedSecretRepo:
        return SealedSecretRepo(self.session)

    @cached_property
    def feeds(self) -> FeedRepo:
        return FeedRepo(self.session)

    @cached_property
    def peers(self) -> PeerRepo:
        return PeerRepo(self.session)

    @cached_property
    def tool_uses(self) -> ToolUseRepo:
        return ToolUseRepo(self.session)

    @cached_property
    def people(self) -> PeopleRepo:
        return PeopleRepo(self.session)

    @cached_property
    def channels(self) -> ChannelRepo:
        return ChannelRepo(self.session)

    @cached_property
    def scripts(self) -> ScriptRepo:
        return ScriptRepo(self.session)

    @cached_property
    def runs(self) -> ProcessRunRepo:
        return ProcessRunRepo(self.session)

    @cached_property
    def strategies(self) -> StrategyRepo:
        return StrategyRepo(self.session)

    @cached_property
    def methods(self) -> ThinkingMethodRepo:
        return ThinkingMethodRepo(self.session)

    @cached_property
    def tables(self) -> AgentTableRepo:
        return AgentTableRepo(self.session)

    @cached_property
    def records(self) -> RecordRepo:
        return RecordRepo(self.session)

    def _row_repo(self, tier: str) -> _ArchivedByStatus | GoalRepo | TaskRepo | None:
        """The repository of a tier whose rows are archived themselves; None for catalogue-only tiers."""
        repos: dict[str, _ArchivedByStatus | GoalRepo | TaskRepo] = {
            "diary": self.diary,
            "concept": self.concepts,
            "link": self.links,
            "llm_memory": self.llm_memory,
            "goal": self.goals,
            "task": self.tasks,
            "script": self.scripts,
            "strategy": self.strategies,
            "thinking_method": self.methods,
            "note": self.notes,
            "table": self.tables,
            "rating": self.records,
            "external_service": self.records,
            "external_account": self.records,
        }
        return repos.get(tier)

    def archive(self, tier: str, ref: str | int, now: datetime) -> bool:
        """Set one thing aside (diary, concept with its links, link, llm_memory, goal, task); any other tier of the
        retrieval catalogue (a conversation turn, say) archives its item. True when something changed."""
        repo = self._row_repo(tier)
        if repo is None:
            return self.items.set_status_of(tier, ref, "archived")
        if not str(ref).isdigit():
            return False
        if isinstance(repo, (GoalRepo, TaskRepo)):  # archived with a time; the other row tiers by their status
            return repo.archive(int(ref), now)
        return repo.archive(int(ref))

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
        rows += [
            ArchivedRow("goal", str(g.id), g.title, g.description, g.archived_at) for g in self.goals.archived(limit)
        ]
        rows += [
            ArchivedRow("task", str(t.id), t.title, t.description, t.archived_at) for t in self.tasks.archived(limit)
        ]
        links = self.links.archived(limit)
        names = self.concepts.names({link.source_id for link in links} | {link.target_id for link in links})
        rows += [
            ArchivedRow(
                "link",
                str(link.id),
                f"{names.get(link.source_id)} —{link.relation}→ {names.get(link.target_id)}",
                "",
                link.updated_at,
            )
            for link in links
        ]
        rows += [
            ArchivedRow(v.name, str(v.id), "replaced version", v.content, v.replaced_at)
            for v in self.blocks.versions(limit=limit)
        ]
        return sorted(rows, key=lambda row: as_utc(row.archived_at), reverse=True)[:limit]
