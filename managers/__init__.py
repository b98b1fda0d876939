"""The managers: what every door does to a persona, in one place.

The doors — the persona's own commands (`nodes/commands/`), the command line (`cli/`), the web app and its API
(`web/`), the MCP server (`web/mcp.py`), the fleet worker (`graph/fleet/worker.py`), the loop (`graph/`), the channels
and the mesh — validate what they were given, call a manager, and report in their own medium. A manager holds the
domain's rules (what a change also changes, what is refused and why); it reaches the database only through the unit
of work it is given (`memory.Repos`: one transaction) and never knows which door called it.

A door builds its `ManagerFactory` once (per process, per worker job) from the database and its dependencies
(`ManagerDeps`: the settings and the clock always; the retrieval index, the model registry and the speech engines
where the door has them), and each unit of work gets its managers from it: `with factory.unit(actor) as house:`.
`Managers(repos, deps, actor=…)` is one unit of work's managers, each built when first used. The actor
(managers/audience.py) is whom the unit acts for — the owner at their own doors, a person or a peer, the persona
alone —, and what the managers read for it is what that actor may see. What a manager hands a door is a frozen view
(a frozen dataclass or a pydantic model), not a live row. Managers may import the domains (`persona/`, `memory/`,
`llm/`, `reach/`) and each other, never a door or `nodes/`/`graph/`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Generic, TypeVar

from managers.audience import ALONE, Audience, Role
from memory.clock import utcnow

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
    from managers.dreams import DreamManager
    from managers.exchange import ExchangeManager
    from managers.facts import FactManager
    from managers.goals import GoalManager, TaskManager
    from managers.identity import IdentityManager
    from managers.inner_life import InnerLifeManager
    from managers.journal import JournalManager
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
    from managers.prompt import PromptManager
    from managers.reports import ReportManager
    from managers.reputation import ReputationManager
    from managers.sessions import SessionManager
    from managers.spawn import SpawnManager
    from managers.speech import SpeechManager
    from managers.strategies import StrategyManager
    from managers.tags import TagManager
    from managers.task_cycles import TaskCycleManager
    from managers.thinking import ThinkingManager
    from managers.thoughts import ThoughtManager
    from managers.threads import ThreadManager
    from managers.tool_uses import ToolUseManager
    from managers.vault import VaultManager
    from managers.world import WorldManager
    from memory import Database, Repos
    from memory.retrieval.recall_index import RecallIndex
    from persona.settings import Settings
    from reach.speech import SpeechEngines


T = TypeVar("T")
Clock = Callable[[], datetime]


class Lazy(Generic[T]):
    """What a door opens only when a manager first needs it (the web app's retrieval index loads Chroma)."""

    def __init__(self, opener: Callable[[], T]) -> None:
        self._opener = opener

    def get(self) -> T:
        return self._opener()


class MissingDependency(RuntimeError):
    """A manager was asked for something its door did not give it (a search without a retrieval index)."""


@dataclass(frozen=True)
class ManagerDeps:
    """What the managers need besides the transaction. The settings are always there (a manager never guesses a
    setting), and the clock (UTC now unless a door runs on its own); the retrieval index, the model registry and the
    speech engines only at the doors that have
    them — a manager that needs one asks with `need_…`, which names what is missing."""

    settings: Settings
    clock: Clock = utcnow
    memory: RecallIndex | Lazy[RecallIndex] | None = None
    llms: LLMRegistry | None = None
    speech: SpeechEngines | Lazy[SpeechEngines] | None = None  # loaded speech models a door keeps

    def need_memory(self, what: str) -> RecallIndex:
        memory = self.memory.get() if isinstance(self.memory, Lazy) else self.memory
        if memory is None:
            raise MissingDependency(f"{what} needs the retrieval index, which this door did not open")
        return memory

    def recall(self) -> RecallIndex | None:
        """The retrieval index when the door has one (None: a write is indexed by the next sync)."""
        return self.memory.get() if isinstance(self.memory, Lazy) else self.memory

    def need_llms(self, what: str) -> LLMRegistry:
        if self.llms is None:
            raise MissingDependency(f"{what} needs the model registry, which this door did not open")
        return self.llms

    def need_speech(self) -> SpeechEngines | None:
        """The speech engines the door keeps (None: the speech manager loads its own)."""
        return self.speech.get() if isinstance(self.speech, Lazy) else self.speech


class ManagerFactory:
    """A door's managers, built once (per process, per worker job): its database and how to get its dependencies
    (`deps`: a callable when they follow the settings as they change — the web app reads them again on each request,
    the loop after a reload). Each unit of work gets its managers from here."""

    def __init__(self, db: Database, deps: ManagerDeps | Callable[[], ManagerDeps]) -> None:
        self.db = db
        self._deps = deps

    def deps(self) -> ManagerDeps:
        return self._deps if isinstance(self._deps, ManagerDeps) else self._deps()

    @contextmanager
    def unit(self, actor: Audience = ALONE, *, history: str | None = None) -> Iterator[Managers]:
        """One transaction's managers, acting for `actor`: committed when the block ends, rolled back if it raises.
        What the owner changes, the memory history names as the human's doing; what a peer changes, the peer's
        (`history`: another name, a door's own — the mesh)."""
        with self.db.unit(actor=history or _history_actor(actor)) as repos:
            yield Managers(repos, self._deps, actor=actor)

    @contextmanager
    def reading(self, actor: Audience = ALONE) -> Iterator[Managers]:
        """Managers over a read-only transaction (nothing is written; cheaper)."""
        with self.db.reading() as repos:
            yield Managers(repos, self._deps, actor=actor)

    def over(self, repos: Repos, actor: Audience = ALONE) -> Managers:
        """The managers of a transaction the door holds already (a command shares its tick's unit of work)."""
        return Managers(repos, self._deps, actor=actor)


def _history_actor(actor: Audience) -> str | None:
    """Who the memory history names for what this unit changes: the human (the owner), a peer, or the persona."""
    return {Role.OWNER: "human", Role.PEER: "peer"}.get(actor.role)


class Managers:
    """One unit of work's managers. `repos` is the transaction every manager of this unit writes in."""

    def __init__(self, repos: Repos, deps: ManagerDeps | Callable[[], ManagerDeps], *, actor: Audience = ALONE) -> None:
        self.repos = repos
        self._deps = deps
        self.actor = actor  # whom this unit acts for: what its reads may show (managers/audience.py)

    def acting_for(self, actor: Audience) -> Managers:
        """This unit's managers acting for another actor (what their reads may show), in the same transaction."""
        return Managers(self.repos, self._deps, actor=actor)

    def with_deps(self, deps: ManagerDeps, *, actor: Audience) -> Managers:
        """Managers in the same transaction with other dependencies (a command's clock and the tick's settings)."""
        return Managers(self.repos, deps, actor=actor)

    @cached_property
    def deps(self) -> ManagerDeps:
        """The door's dependencies, asked for when a manager first needs them (the web app reads its settings
        again only then)."""
        return self._deps if isinstance(self._deps, ManagerDeps) else self._deps()

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
        """The persona's humans: owner, trusted, guests; identities per channel; contact requests
        (managers/people.py)."""
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
        """The model registry's run-time choices: primary model, priorities, enabled, validators
        (managers/models.py)."""
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

    @cached_property
    def prompt(self) -> PromptManager:
        """What a tick's prompt shows of the persona's memory (managers/prompt.py)."""
        from managers.prompt import PromptManager

        return PromptManager(self)

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

    # the mesh
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

    @cached_property
    def dreams(self) -> DreamManager:
        """What a dream gathers and how its output is written, once per run (managers/dreams.py)."""
        from managers.dreams import DreamManager

        return DreamManager(self)

    @cached_property
    def task_cycles(self) -> TaskCycleManager:
        """A task's sub-cycle: when it waits, when it is over, its retries and restarts (managers/task_cycles.py)."""
        from managers.task_cycles import TaskCycleManager

        return TaskCycleManager(self)

    @cached_property
    def journal(self) -> JournalManager:
        """What the loop did: ticks, what happened at them, threads, live events (managers/journal.py)."""
        from managers.journal import JournalManager

        return JournalManager(self)

    @cached_property
    def inner_life(self) -> InnerLifeManager:
        """Drives and open questions as the owner sees and touches them (managers/inner_life.py)."""
        from managers.inner_life import InnerLifeManager

        return InnerLifeManager(self)

    @cached_property
    def reports(self) -> ReportManager:
        """What the persona did and is, as plain data, for inspect and the pages (managers/reports.py)."""
        from managers.reports import ReportManager

        return ReportManager(self)


__all__ = ["Lazy", "ManagerDeps", "ManagerFactory", "Managers", "MissingDependency"]
