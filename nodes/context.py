"""What a step receives through LangGraph's Runtime: `runtime.context.services`.

`AnimaContext` is the graph's `context_schema`: it carries the opened dependencies — database, LLM registry,
persona, the run's settings, clock, memory index — injected by whoever compiles the graph (graph.build_agent,
the Studio factory, tests). A client can set nothing in it: no path, database or model URL comes from a run's
input. Nothing here is opened at import time.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from llm import LLMRegistry
from managers import ManagerDeps, ManagerFactory
from memory import Database, Repos
from memory.clock import utcnow
from nodes.ports import BackgroundJobs, RecallIndex
from persona import Persona, refresh_persona
from persona.settings import Overrides, Settings, SettingsError, load_settings

if TYPE_CHECKING:  # only the steps' signatures name it: a command's clock (utcnow) does not load LangGraph
    from langgraph.runtime import Runtime

log = logging.getLogger(__name__)


T = TypeVar("T")
TICK_SUMMARY = "tick_summary"  # TickReads: the tick row's summary as the tick's first step left it
CYCLE = "cycle"  # TickReads: the thread's cycle settings as prepare_context read them (nodes/commands/cycle.py)
UNREAD = "unread"  # TickReads: (limit, min_priority) -> the unread incoming notes as update_drives read them


class TickReads:
    """Rows several steps of one tick read and nothing in the tick changes in between (the thread's row, its
    recent outputs): read once, then reused as detached rows. Keyed by thread and tick, so a Stelis child's tick
    or a task cycle never sees another tick's rows; the tick's first step (`start`) drops what an earlier run of
    the same tick left, and only the last few ticks are kept."""

    KEEP = 8

    def __init__(self) -> None:
        self._ticks: OrderedDict[tuple[str, int], dict[Hashable, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def start(self, thread_id: str, tick: int) -> None:
        with self._lock:
            self._ticks.pop((thread_id, tick), None)

    def _memo(self, thread_id: str, tick: int) -> dict[Hashable, Any]:
        key = (thread_id, tick)
        memo = self._ticks.get(key)
        if memo is None:
            memo = self._ticks[key] = {}
            while len(self._ticks) > self.KEEP:
                self._ticks.popitem(last=False)
        return memo

    def put(self, thread_id: str, tick: int, what: Hashable, value: Any) -> None:
        with self._lock:
            self._memo(thread_id, tick)[what] = value

    def peek(self, thread_id: str, tick: int, what: Hashable, default: Any = None) -> Any:
        """The value if this tick has read it, else `default` (nothing is read)."""
        with self._lock:
            return self._ticks.get((thread_id, tick), {}).get(what, default)

    def first_run(self, thread_id: str, tick: int) -> bool:
        """True when this process started the tick and no earlier run of it ever started: nothing of the tick is
        stored yet, so a step need not look for what a killed run left (s01 keeps the tick row's summary)."""
        summary = self.peek(thread_id, tick, TICK_SUMMARY)
        return summary is not None and int(summary.get("attempts") or 0) == 1

    def get(self, thread_id: str, tick: int, what: Hashable, read: Callable[[], T]) -> T:
        """The value read once this tick, or `read()` now (remembered)."""
        with self._lock:
            memo = self._memo(thread_id, tick)
            if what in memo:
                return cast(T, memo[what])
        value = read()
        with self._lock:
            memo[what] = value
        return value


@dataclass
class Services:
    db: Database
    llms: LLMRegistry
    persona: Persona
    settings: Settings
    clock: Callable[[], datetime] = utcnow
    memory: RecallIndex | None = None  # hybrid retrieval over every tier (MemoryIndex; None: recall is off)
    reads: TickReads = field(default_factory=TickReads, repr=False)  # what a tick's steps read once and share
    _changes: dict[str, Any] = field(default_factory=dict, repr=False)
    _llm_choices: tuple[dict[str, Any], Any, dict[str, Any]] | None = field(default=None, repr=False)
    jobs: BackgroundJobs | None = field(default=None, repr=False)  # nodes.background.Background (graph/services.py)
    # the id of the prompt's data fences: one per session, so consecutive prompts share their opening (what a fence
    # holds cannot close it whatever the id: nodes/steps/s04_prepare_context/untrusted.py defuses every marker)
    fence: str = field(default_factory=lambda: secrets.token_hex(3), repr=False)

    _managers: ManagerFactory | None = field(default=None, init=False, repr=False)

    @property
    def managers(self) -> ManagerFactory:
        """The run's managers, built once: each unit of work gets them with the settings as they are then (a reload
        changes them), this run's clock, retrieval index and model registry."""
        if self._managers is None:
            self._managers = ManagerFactory(self.db, self.manager_deps)
        return self._managers

    def manager_deps(self) -> ManagerDeps:
        return ManagerDeps(settings=self.settings, clock=self.clock, memory=self.memory, llms=self.llms)

    @property
    def overrides(self) -> Overrides:
        """The caller's layer (command line, test, fleet worker) the settings are resolved with again on a reload."""
        return self.settings.overrides

    def background(self) -> BackgroundJobs:
        """The jobs that outlive a tick (scripts, questions to other models): nodes/background.py."""
        if self.jobs is None:
            raise RuntimeError("this run has no background jobs (open its services with graph.services.open_services)")
        return self.jobs

    def refresh(self, repos: Repos) -> None:
        """Take in edited persona files and the persona's own setting changes: the next prompt uses them.
        A broken edit is logged and the last good persona and settings stay in use. The model choices made at run time
        (by the persona, the operator's CLI or the web app, in any process) are applied too."""
        house = self.managers.over(repos)
        house.persona.preload_run_choices()
        self.refresh_llms(repos)
        try:
            persona = refresh_persona(self._adopted(house.persona.recorded_directory()) or self.persona)
        except Exception as exc:  # PersonaError or an unreadable file
            log.error("persona files not reloaded (the last good version stays in use): %s", exc)
            persona = self.persona
        changes = house.persona.self_changes()
        if persona is self.persona and changes == self._changes:
            return
        try:
            self.settings = load_settings(
                self_changes=changes, overrides=self.overrides, recorded_persona_dir=str(persona.directory)
            )
        except SettingsError as exc:
            log.error("settings not reloaded (the last good ones stay in use): %s", exc)
            house.loop.log("settings", f"not reloaded: {exc}"[:2000], status="error")
        self.persona, self._changes = persona, changes

    def refresh_llms(self, repos: Repos) -> None:
        choices = self.managers.over(repos).models.run_choices()
        added = choices[2]
        if choices == self._llm_choices:
            return
        try:
            self.llms.adopt(added)
            self.llms.apply(choices[0], choices[1])
        except ValueError as exc:
            log.error("model choices not applied: %s", exc)
        self._llm_choices = choices

    def _adopted(self, recorded: str | None) -> Persona | None:
        """The data dir took its own copy of the persona (the web app does on the first edit of the shipped one):
        the loop moves to it, unless this run names its persona."""
        if self.settings.persona_named:
            return None
        if not recorded or Path(recorded).resolve() == self.persona.directory or not Path(recorded).is_dir():
            return None
        from persona import load_persona

        return load_persona(recorded)

    def sync_memory(self) -> None:
        """Index what the last transaction wrote; a failure is logged and repaired by the next sync."""
        if self.memory is not None:
            try:
                self.memory.sync()
            except Exception:
                log.exception("memory index sync failed; it is retried on the next sync")

    def own_turn(self, text: str) -> list[tuple[str, str, list[str]]]:
        """The memory the persona's thought `text` becomes when it is stored (write_memory keeps each thought as the
        persona's conversation turn), as the index embeds it: a step that embeds the thought anyway embeds this in
        the same call (`MemoryIndex.embed_texts(documents=…)`)."""
        if self.memory is None:
            return []
        return [self.memory.record_texts(text, author=self.persona.display_name)]

    def window_tokens(self, thread_ratio: float = 1.0) -> int:
        """The thread's share of the model window: window × run ratio × Π window_ratio of its Stelis lineage."""
        return self.settings.window_tokens(self.llms.primary().context_window, thread_ratio)


@dataclass
class AnimaContext:
    services: Services | None = field(default=None, repr=False, compare=False)


class MissingServices(RuntimeError):
    pass


class ContextBudgetError(RuntimeError):
    """The parts of a prompt that cannot be dropped do not fit the thread's window."""


def checkpoint_thread_of(runtime: Runtime[AnimaContext]) -> str | None:
    """The checkpoint thread the graph runs on (None outside a run)."""
    info = runtime.execution_info
    return info.thread_id if info is not None else None


def services_of(runtime: Runtime[AnimaContext]) -> Services:
    services = getattr(runtime.context, "services", None)
    if services is None:
        raise MissingServices(
            "no services in the run context: invoke the graph with context=AnimaContext(services=...) — "
            "graph.open_graph(playbook, data_dir=...) gives a compiled graph and that context in one call, "
            "graph.build_agent(...) an Agent — or serve it with `langgraph dev` (graph/studio.py opens them)"
        )
    return cast(Services, services)
