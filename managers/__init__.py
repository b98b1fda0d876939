"""The managers: what every door does to a persona, in one place.

The doors — the persona's own commands (`nodes/commands/`), the command line (`cli/`), the web app and its API
(`web/`), the MCP server (`web/mcp.py`), the fleet worker (`graph/fleet/worker.py`), and the channels and mesh to come —
validate what they were given, call a manager, and report in their own medium. A manager holds the domain's rules
(what a change also changes, what is refused and why); it reaches the database only through the unit of work it is
given (`memory.Repos`: one transaction) and never knows which door called it.

`Managers(repos, deps, audience=…)` is one unit of work's managers, each built when first used. `ManagerDeps` carries
what some managers need beyond the transaction: the settings, the clock, the retrieval index, the model registry.
The audience (managers/audience.py) is whom the persona speaks to in this unit — the persona alone unless a door says
otherwise —, and what the managers read for it is what that audience may see. Managers may import the domains
(`persona/`, `memory/`, `llm/`, `reach/`) and each other, never a door or `nodes/`/`graph/`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from typing import TYPE_CHECKING

from managers.audience import ALONE, Audience

if TYPE_CHECKING:
    from llm import LLMRegistry
    from managers.abstracts import AbstractManager
    from managers.anonymise import AnonymisationManager
    from managers.budget import BudgetManager
    from managers.catalogues import CatalogueManager
    from managers.channels import ChannelManager
    from managers.concepts import ConceptManager
    from managers.consent import ConsentManager
    from managers.conversation import ConversationManager
    from managers.diary import DiaryManager
    from managers.exchange import ExchangeManager
    from managers.facts import FactManager
    from managers.goals import GoalManager, TaskManager
    from managers.identity import IdentityManager
    from managers.llm_memory import LLMMemoryManager
    from managers.loop import LoopManager
    from managers.mcp import McpManager
    from managers.memory import MemoryManager
    from managers.mesh import MeshManager
    from managers.models import ModelManager
    from managers.notes import NoteManager
    from managers.peers import PeerManager
    from managers.people import PeopleManager
    from managers.persona import PersonaManager
    from managers.processes import ProcessManager
    from managers.reputation import ReputationManager
    from managers.sessions import SessionManager
    from managers.spawn import SpawnManager
    from managers.speech import SpeechManager
    from managers.strategies import StrategyManager
    from managers.tags import TagManager
    from managers.thinking import ThinkingManager
    from managers.thoughts import ThoughtManager
    from managers.threads import ThreadManager
    from managers.tool_uses import ToolUseManager
    from managers.vault import VaultManager
    from managers.world import WorldManager
    from memory import Repos
    from memory.retrieval.recall_index import RecallIndex
    from persona.settings import Settings
    from reach.speech import SpeechEngines


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class ManagerDeps:
    """What a manager may need besides the transaction; a door passes what it has (None: that part is off)."""

    settings: Settings | None = None
    clock: Callable[[], datetime] = field(default=_utcnow)
    memory: RecallIndex | None = None
    llms: LLMRegistry | None = None
    speech: SpeechEngines | None = None  # loaded speech models a door keeps (web app, channel runner)

    def settings_for(self, what: str) -> Settings:
        """The settings, for a manager that cannot work without them (`what` names it in the error)."""
        if self.settings is None:
            raise RuntimeError(f"{what} need the settings (ManagerDeps.settings)")
        return self.settings


class Managers:
    """One unit of work's managers. `repos` is the transaction every manager of this unit writes in."""

    def __init__(self, repos: Repos, deps: ManagerDeps | None = None, *, audience: Audience = ALONE) -> None:
        self.repos = repos
        self.deps = deps or ManagerDeps()
        self.audience = audience

    # one cached property per resource; each imports its module when first used (a door pays only for what it calls)

    @cached_property
    def loop(self) -> LoopManager:
        """A thread's cycle settings: pause, idle, context mode, skills read (managers/loop.py)."""
        from managers.loop import LoopManager

        return LoopManager(self)

    @cached_property
    def thinking(self) -> ThinkingManager:
        """Whether a tick has anything to think about, without a model (managers/thinking.py)."""
        from managers.thinking import ThinkingManager

        return ThinkingManager(self)

    @cached_property
    def budget(self) -> BudgetManager:
        """What the persona spends on its models, and what its budget allows (managers/budget.py)."""
        from managers.budget import BudgetManager

        return BudgetManager(self)

    @cached_property
    def consent(self) -> ConsentManager:
        """Approvals, the audit log and the human's answer (managers/consent.py)."""
        from managers.consent import ConsentManager

        return ConsentManager(self)

    @cached_property
    def people(self) -> PeopleManager:
        """The persona's humans: owner, trusted, guests; identities per channel; contact requests (managers/people.py)."""
        from managers.people import PeopleManager

        return PeopleManager(self)

    @cached_property
    def conversation(self) -> ConversationManager:
        """A human's (or a peer's) words from every door, in one way; the conversations per person; whom a tick
        answers (managers/conversation.py)."""
        from managers.conversation import ConversationManager

        return ConversationManager(self)

    @cached_property
    def channels(self) -> ChannelManager:
        """The channels' inbox (dedup, limits, contact requests) and outbox (idempotent), cursors, state
        (managers/channels.py)."""
        from managers.channels import ChannelManager

        return ChannelManager(self)

    @cached_property
    def models(self) -> ModelManager:
        """The model registry's run-time choices: primary model, priorities, enabled, validators (managers/models.py)."""
        from managers.models import ModelManager

        return ModelManager(self)

    @cached_property
    def identity(self) -> IdentityManager:
        """Core memory and the notepad: read, append, rewrite, replace, clear (managers/identity.py)."""
        from managers.identity import IdentityManager

        return IdentityManager(self)

    @cached_property
    def persona(self) -> PersonaManager:
        """The persona's own settings (config.update), and its files as its human edits them (managers/persona.py)."""
        from managers.persona import PersonaManager

        return PersonaManager(self)

    @cached_property
    def speech(self) -> SpeechManager:
        """Voice messages heard as notes, replies spoken: transcribe, speak, speak_ogg (managers/speech.py)."""
        from managers.speech import SpeechManager

        return SpeechManager(self)

    @cached_property
    def sessions(self) -> SessionManager:
        """The sessions of the loops: open, checkpoint, close, export, revive (managers/sessions.py)."""
        from managers.sessions import SessionManager

        return SessionManager(self)

    @cached_property
    def spawn(self) -> SpawnManager:
        """Descendants: a child persona from this one (managers/spawn.py)."""
        from managers.spawn import SpawnManager

        return SpawnManager(self)

    @cached_property
    def vault(self) -> VaultManager:
        """A watched folder of Markdown notes (an Obsidian vault) kept in the knowledge base (managers/vault.py)."""
        from managers.vault import VaultManager

        return VaultManager(self)

    @cached_property
    def world(self) -> WorldManager:
        """Feeds and the world outside: subscriptions, fetches, the prompt's world line (managers/world.py)."""
        from managers.world import WorldManager

        return WorldManager(self)

    # the persona's catalogues, loop-breaking strategies, scripts and processes, MCP tools, Stelis threads
    @cached_property
    def catalogues(self) -> CatalogueManager:
        from managers.catalogues import CatalogueManager
        return CatalogueManager(self)

    @cached_property
    def strategies(self) -> StrategyManager:
        from managers.strategies import StrategyManager
        return StrategyManager(self)

    @cached_property
    def exchange(self) -> ExchangeManager:
        """What peers put to the persona beyond words, and what it puts to them: consensus cases as notes, goals
        (GMP), offered strategies, thinking methods and model addresses — each taken only with consent
        (managers/exchange.py)."""
        from managers.exchange import ExchangeManager
        return ExchangeManager(self)

    @cached_property
    def processes(self) -> ProcessManager:
        from managers.processes import ProcessManager
        return ProcessManager(self)

    @cached_property
    def mcp(self) -> McpManager:
        from managers.mcp import McpManager
        return McpManager(self)

    @cached_property
    def threads(self) -> ThreadManager:
        from managers.threads import ThreadManager
        return ThreadManager(self)

    # the memory tiers
    @cached_property
    def memory(self) -> MemoryManager:
        from managers.memory import MemoryManager

        return MemoryManager(self)

    @cached_property
    def goals(self) -> GoalManager:
        from managers.goals import GoalManager

        return GoalManager(self)

    @cached_property
    def tasks(self) -> TaskManager:
        from managers.goals import TaskManager

        return TaskManager(self)

    @cached_property
    def diary(self) -> DiaryManager:
        from managers.diary import DiaryManager

        return DiaryManager(self)

    @cached_property
    def llm_memory(self) -> LLMMemoryManager:
        from managers.llm_memory import LLMMemoryManager

        return LLMMemoryManager(self)

    @cached_property
    def concepts(self) -> ConceptManager:
        from managers.concepts import ConceptManager

        return ConceptManager(self)

    @cached_property
    def facts(self) -> FactManager:
        from managers.facts import FactManager

        return FactManager(self)

    @cached_property
    def thoughts(self) -> ThoughtManager:
        from managers.thoughts import ThoughtManager

        return ThoughtManager(self)

    @cached_property
    def notes(self) -> NoteManager:
        from managers.notes import NoteManager

        return NoteManager(self)

    @cached_property
    def peers(self) -> PeerManager:
        """The personas and A2A agents this one knows; messages to and from them over A2A (managers/peers.py)."""
        from managers.peers import PeerManager

        return PeerManager(self)

    @cached_property
    def tool_uses(self) -> ToolUseManager:
        """HMP's frequently used tools and links: use counts and the most used (managers/tool_uses.py)."""
        from managers.tool_uses import ToolUseManager

        return ToolUseManager(self)

    @cached_property
    def tags(self) -> TagManager:
        from managers.tags import TagManager

        return TagManager(self)

    @cached_property
    def anonymise(self) -> AnonymisationManager:
        """Names and places in memory → placeholders on the human's request; back only with the owner's key."""
        from managers.anonymise import AnonymisationManager

        return AnonymisationManager(self)

    @cached_property
    def abstracts(self) -> AbstractManager:
        from managers.abstracts import AbstractManager

        return AbstractManager(self)

    # the mesh (issue 30)
    @cached_property
    def mesh(self) -> MeshManager:
        """Identity, signed containers in and out, CogSync, consensus, sync (managers/mesh.py)."""
        from managers.mesh import MeshManager

        return MeshManager(self)

    @cached_property
    def reputation(self) -> ReputationManager:
        """Peers' trust from signed evaluations, decay, blocklist, validators' drift (managers/reputation.py)."""
        from managers.reputation import ReputationManager

        return ReputationManager(self)


__all__ = ["ManagerDeps", "Managers"]
