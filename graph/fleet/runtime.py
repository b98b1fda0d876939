"""A worker's side of a deployment: the personas it has open, and what each kind of job does with one.

A worker keeps the personas it served lately open (compiled playbook, settings, retrieval index, live journal) so the
next job of the same persona starts warm; they share the worker's connection pool, checkpointer and embedding model.
Nothing durable stays in the worker: the memory, the checkpoints and the live journal are in PostgreSQL, the vectors
on the Chroma server (written at the end of every job), so the persona's next job may run on any worker.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from graph.agent import Agent, TickGraph
from graph.checkpoint import open_postgres_saver
from graph.compiler import build_graph
from graph.fleet import files
from graph.fleet.jobs import Scheduler
from graph.loop.autonomy import FEEDS_CHECK_EVERY
from graph.loop.driver import MAX_DEGRADED_BACKOFF_S, idle_should_wake, quiet_tick
from graph.loop.journal import LiveJournal
from graph.loop.task_cycles import TaskCycles
from graph.playbook import Playbook, load_playbook, resolve_playbook_path
from graph.services import open_services
from graph.telemetry import tick_span
from llm import Provider
from managers import ManagerDeps, ManagerFactory, Managers
from managers.world import refresh_feeds
from memory.db import schema_lock
from memory.fleet import Fleet
from nodes.context import Services
from nodes.stelis.threads import recover_orphans
from persona.dreaming import dream_due
from persona.settings import Overrides, load_settings

log = logging.getLogger(__name__)
THREAD = "main"  # a deployed persona thinks on one root thread
CONTROL_POLL_S = 5.0  # a persona its human paused or stopped (the Controls page) looks again this often
IDLE_POLL_S = 10.0  # an idle persona checks its other wake conditions this often (a human's note wakes it at once)
DREAM_CHECK_EVERY = timedelta(minutes=1)
JOURNAL_FLUSH_S = 1.0  # a tick's live events in one transaction (graph/loop/journal.py), seen at most 1 s late
FOLLOW_UP_IN_TICK = 8  # new memories a tick's job follows up itself; more go to an indexing job


def worker_token() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class OpenPersona:
    """One persona open in this worker."""

    name: str
    digest: str
    agent: Agent
    journal: LiveJournal
    cycles: TaskCycles
    degraded_streak: int = 0
    dream_checked: datetime | None = None
    started: datetime | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def services(self) -> Services:
        return self.agent.services

    def close(self) -> None:
        self.journal.close()
        if self.services.memory is not None:
            self.services.memory.close()
        self.services.db.close()  # the fleet's pool stays open


class WorkerRuntime:
    """The personas a worker has open (least recently used closed past `keep_open`) and the jobs' bodies."""

    def __init__(
        self,
        fleet: Fleet,
        overrides: Overrides,
        *,
        scheduler: Scheduler | None,
        keep_open: int = 256,
        cache_dir: str | None = None,
        providers: dict[str, Provider] | None = None,
        entries: list[dict[str, Any]] | None = None,
    ) -> None:
        from memory.retrieval.embeddings import open_embedder

        self.fleet, self.overrides, self.scheduler = fleet, overrides, scheduler
        self.keep_open, self.cache_dir = keep_open, cache_dir
        self.providers, self.entries = providers, entries  # tests and benchmarks: in-process models
        with schema_lock(fleet.engine):  # workers starting together must not create LangGraph's tables twice
            self.saver = open_postgres_saver(fleet.libpq_url())
        located = load_settings(overrides=overrides.replace(persona_dir=None))  # the worker's own: no persona yet
        self.cache_dir = cache_dir or located.fleet_cache
        self.embedder = open_embedder(located.embed_url, located.embed_model, located.api_key_env, located.cache_dir)
        self._open: OrderedDict[str, OpenPersona] = OrderedDict()
        self._lock = threading.Lock()
        self._opening: dict[str, threading.Lock] = {}
        self._graphs: dict[str, tuple[Playbook, TickGraph]] = {}  # playbook -> (it, compiled): `_playbook`
        self.token = worker_token()

    def _scheduler(self) -> Scheduler:
        if self.scheduler is None:
            raise RuntimeError("the worker defers no job before its engine is open (graph/fleet/worker.py sets it)")
        return self.scheduler

    # ---- opening -------------------------------------------------------------------------------------------

    def persona(self, name: str, known: tuple[str, str, str] | None = None) -> OpenPersona:
        """The persona, open and current (reopened when its files changed in the registry). `known`: its registry
        row's (state, files digest, playbook) as the caller just read them (`_lookup`)."""
        with self._lock:
            gate = self._opening.setdefault(name, threading.Lock())
        with gate:
            if known is None:
                known = self._lookup(name)
            _, digest, playbook = known
            with self._lock:
                current = self._open.get(name)
                if current is not None and current.digest == digest:
                    self._open.move_to_end(name)
                    return current
            with self.fleet.registry() as registry:  # the files, only to open it (they are the biggest column)
                entry = registry.require(name)
                stored, digest, playbook = entry.files, entry.files_digest, entry.playbook
            if current is not None:
                self._close(name)
            opened = self._open_persona(name, playbook, stored, digest)
            with self._lock:
                self._open[name] = opened
                evicted = []
                while len(self._open) > self.keep_open:
                    old, persona = self._open.popitem(last=False)
                    evicted.append(persona)
            for persona in evicted:
                persona.close()
            return opened

    def _lookup(self, name: str) -> tuple[str, str, str]:
        """The persona's (state, files digest, playbook) in the registry: one small query per job."""
        with self.fleet.registry(each=True) as registry:
            found = registry.brief(name)
            if found is not None:
                return found
            entry = registry.require(name)  # NotFound, naming the personas there are
            return entry.state, entry.files_digest, entry.playbook

    def _playbook(self, playbook: str) -> tuple[Playbook, TickGraph]:
        """A playbook and its graph compiled over the worker's checkpointer: once per worker, for every persona
        (a compiled graph holds nothing of a persona; each agent streams it with its own context and thread)."""
        with self._lock:
            found = self._graphs.get(playbook)
        if found is None:
            loaded = load_playbook(resolve_playbook_path(playbook))
            found = (loaded, build_graph(loaded).compile(checkpointer=self.saver))
            with self._lock:
                found = self._graphs.setdefault(playbook, found)
        return found

    def _open_persona(self, name: str, playbook: str, stored: bytes | None, digest: str) -> OpenPersona:
        directory = files.materialize(name, stored or b"", digest, self.cache_dir)
        overrides = self.overrides.replace(
            persona_dir=str(directory),
            channel="web",
            data_dir=str(files.data_dir(name, self.cache_dir)),
            db_url=self.fleet.libpq_url(),
            vault="sealed",
        )
        services = open_services(
            overrides,
            db=self.fleet.database(name),
            providers=self.providers,
            entries=self.entries,
            embedder=self.embedder,
        )
        loaded, graph = self._playbook(playbook)
        agent = Agent(loaded, services, self.saver, thread_id=THREAD, checkpoint_prefix=f"{name}/", graph=graph)
        recover_orphans(services)  # Stelis threads a killed worker left open
        cycles = TaskCycles(agent)
        cycles.resume_interrupted()
        services.background().recover()  # its scripts and model questions a killed worker left: started, or offline
        return OpenPersona(
            name,
            digest,
            agent,
            LiveJournal(services.db, THREAD, flush_every_s=JOURNAL_FLUSH_S),
            cycles,
            started=services.clock(),
        )

    def _close(self, name: str) -> None:
        with self._lock:
            persona = self._open.pop(name, None)
        if persona is not None:
            persona.close()

    def close(self) -> None:
        for name in list(self._open):
            self._close(name)
        from graph.checkpoint import close_saver

        close_saver(self.saver)

    # ---- jobs ----------------------------------------------------------------------------------------------

    def tick(self, name: str) -> float | None:
        """One tick of the persona (or, paused or idle, a look at whether it should think); returns the seconds to
        its next tick, None when it should not tick again (paused or removed from the registry)."""
        known = self._lookup(name)
        if known[0] != "active":
            return None
        persona = self.persona(name, known)
        # the job's units of work take a few kept sessions in turn, as a tick's do in one process; each still
        # commits when it ends and leaves its connection outside any transaction (memory/db.py's module doc)
        with persona.services.db.kept_sessions():
            return self._tick(name, persona)

    def _tick(self, name: str, persona: OpenPersona) -> float | None:
        agent, services = persona.agent, persona.services
        try:
            with services.managers.unit() as house:  # what decides whether it thinks now, read in one statement
                loop = house.loop
                loop.preload_tick_decision(THREAD)
                want = loop.wanted()
                if persona.extra.get("reported") != (want, self.token):  # for the Controls page: who runs it
                    loop.record_status(want, now=services.clock(), thread=THREAD, pid=os.getpid())
                    persona.extra["reported"] = (want, self.token)
                feeds_asked = house.world.fetch_asked()
                idle = loop.cycle(THREAD).idle is not None
            if want != "running":
                return CONTROL_POLL_S
            self._maybe_dream(persona)
            self._maybe_fetch_feeds(persona, feeds_asked)
            # idle_should_wake is True at once when the persona is not idle: only an idle one is asked
            if idle and not agent.interrupted and not idle_should_wake(agent, services.clock()):
                self._defer_task_ticks(persona)
                return IDLE_POLL_S
            if not agent.interrupted:  # nothing to think about: no tick (no graph, no model), the next look later
                quiet = quiet_tick(agent, int(persona.extra.get("thought_ticks", 0)))
                if quiet is not None:
                    return quiet
                persona.extra["thought_ticks"] = int(persona.extra.get("thought_ticks", 0)) + 1
            with tick_span(THREAD, name):
                for mode, data in agent.stream(None, events=True):
                    persona.journal(mode, data)
            state = agent.finished_state()
            with services.managers.unit() as house:  # after the tick, in one transaction: the session and the cycles
                persona.extra["session_digest"] = house.sessions.checkpoint(  # goals, tasks: if changed
                    self._session(persona, house), persona.extra.get("session_digest")
                )
                cycling = house.tasks.cycles()
                reap = any(task.repl_status == "stopped" for task in cycling)
                cycles = [task.id for task in cycling if task.repl_status == "running"]
            if reap:
                persona.cycles._reap_stopped()
            for task_id in cycles:
                self._scheduler().task_tick(persona.name, task_id)
            if services.memory is not None and services.settings.memory.follow_up:
                self._follow_up(persona)  # its first read says whether there is anything to follow up
            with self.fleet.registry(each=True) as registry:
                registry.record_tick(name, at=services.clock(), worker=self.token)
            if state.get("degraded") or agent.last_failure is not None:
                persona.degraded_streak += 1
                return min(MAX_DEGRADED_BACKOFF_S, 2.0**persona.degraded_streak)
            persona.degraded_streak = 0
            return float(state.get("pause_s") or 0.0)
        finally:
            self._flush(persona)

    def _follow_up(self, persona: OpenPersona) -> None:
        """The tick's new memories followed up (memory/followup.py: event times, what they supersede) in its own job,
        before its vectors go to Chroma: an indexing job of their own would cost the worker more than the follow-up
        (the engine's fetch and finish, the fence, the registry, a second write to Chroma). Past
        `FOLLOW_UP_IN_TICK` memories (a command that wrote many) the rest is an indexing job's."""
        assert persona.services.memory is not None
        try:
            report = persona.services.memory.follow_up.run_pending(limit=FOLLOW_UP_IN_TICK)
        except Exception:  # noqa: BLE001 - its cursor did not move: the next tick's job tries again
            log.exception("persona %s: following up its new memories failed", persona.name)
            return
        if report.looked_at >= FOLLOW_UP_IN_TICK:
            self._scheduler().index(persona.name)

    def _session(self, persona: OpenPersona, house: Managers) -> int:
        """A deployed persona's session runs from its start (personas add/resume) to its pause or removal."""
        running = house.sessions.running_id(THREAD)
        if running is not None:
            return running
        services = persona.services
        session_id, _ = house.sessions.open(
            THREAD, playbook=persona.agent.playbook.name, persona=services.persona.name, now=services.clock()
        )
        return session_id

    def _maybe_fetch_feeds(self, persona: OpenPersona, asked: bool) -> None:
        """The persona's RSS/Atom feeds that are due (or that its world check asked for: `asked`), between its
        ticks."""
        services = persona.services
        now = services.clock()
        checked = persona.extra.get("feeds_checked")
        if checked is not None and now - checked < FEEDS_CHECK_EVERY and not asked:
            return
        persona.extra["feeds_checked"] = now
        try:
            refresh_feeds(services.db, services.settings, services.clock, thread_id=THREAD)
        except Exception:  # noqa: BLE001 - reading feeds must never stop the persona
            log.exception("persona %s: fetching feeds failed", persona.name)

    def _maybe_dream(self, persona: OpenPersona) -> None:
        services = persona.services
        now = services.clock()
        if persona.dream_checked is not None and now - persona.dream_checked < DREAM_CHECK_EVERY:
            return
        persona.dream_checked = now
        with services.db.unit() as repos:
            reason = dream_due(
                repos,
                now,
                services.settings.zone(),
                services.settings.dreaming,
                started=persona.started,
                talking_minutes=services.settings.conversation.active_minutes,
            )
        if reason is not None:
            self._scheduler().dream(persona.name)

    def _defer_task_ticks(self, persona: OpenPersona) -> None:
        persona.cycles._reap_stopped()
        for task_id, _ in persona.cycles.running():
            self._scheduler().task_tick(persona.name, task_id)

    def dream(self, name: str) -> dict[str, Any] | None:
        known = self._lookup(name)
        if known[0] != "active":
            return None
        persona = self.persona(name, known)
        services = persona.services
        with services.db.unit() as repos:
            reason = dream_due(
                repos,
                services.clock(),
                services.settings.zone(),
                services.settings.dreaming,
                started=persona.started,
                talking_minutes=services.settings.conversation.active_minutes,
            )
        if reason is None:
            return None
        dreamer = persona.extra.get("dreamer")
        if dreamer is None:
            loaded, graph = self._playbook("dream")
            dreamer = persona.extra["dreamer"] = Agent(
                loaded,
                services,
                self.saver,
                thread_id=THREAD,
                checkpoint_prefix=persona.agent.checkpoint_prefix,
                graph=graph,
            )
        try:
            for mode, data in dreamer.stream(None, inputs={"level": 0, "reason": reason}):
                if mode == "custom":
                    persona.journal(mode, data)
            return dreamer.outputs().get("dream")
        except Exception as exc:  # noqa: BLE001 - a failed dream must not stop the persona; dream_due waits a day
            log.exception("persona %s: dream failed", name)
            with services.managers.unit() as house:
                house.loop.log(
                    "dream",
                    f"dream failed ({type(exc).__name__}: {exc}); tried again tomorrow",
                    status="error",
                    thread_id=THREAD,
                )
            return {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        finally:
            self._flush(persona)

    def task_tick(self, name: str, task_id: int) -> dict[str, Any] | None:
        known = self._lookup(name)
        if known[0] != "active":
            return None
        persona = self.persona(name, known)
        with persona.services.managers.reading() as house:
            task = house.tasks.get(task_id)
            thread_id = task.repl_thread if task.repl_status == "running" else None
        if thread_id is None:
            return None
        try:
            outcome = persona.cycles.step_one(task_id, thread_id, None, persona.journal)
        finally:
            self._flush(persona)
        if outcome.get("status") not in ("running", "waiting") and outcome.get("reason"):
            persona.journal("custom", {"event": "task_cycle", **outcome})
        return outcome

    def index(self, name: str) -> int:
        """Embed and store what the knowledge base (or anything else) added to the persona's memory, then follow up
        its new memories (memory/followup.py: event times, knowledge updates, long texts' other vectors)."""
        services = self.persona(name).services
        memory = services.memory
        if memory is None:
            return 0
        changed = memory.sync(progress=True, flush=True)
        if services.settings.memory.follow_up:
            memory.follow_up.run_pending()
            memory.flush()
        return changed

    def export(self, name: str, session_id: int) -> str:
        """A session's export (JSON and Markdown), left in the persona's config for whoever asked for it."""
        persona = self.persona(name)
        with persona.services.managers.unit() as house:
            house.sessions.leave_export(session_id, persona.services.clock())
        return str(session_id)

    def _flush(self, persona: OpenPersona) -> None:
        """The vectors this job queued go to the Chroma server now: the persona's next job may run elsewhere."""
        if persona.services.memory is not None:
            try:
                persona.services.memory.flush()
            except Exception:  # the journal keeps them: the next sync anywhere writes them
                log.exception("persona %s: vectors not written yet", persona.name)


def stop_persona(fleet: Fleet, name: str, *, now: datetime, status: str = "stopped") -> None:
    """A paused or removed persona's session is saved and closed."""
    database = fleet.database(name)
    try:  # the sessions need no setting: the deployment's own (environment) are read only if one is asked for
        managers = ManagerFactory(database, lambda: ManagerDeps(settings=load_settings(overrides=Overrides())))
        with managers.unit() as house:
            house.sessions.close_running(now, status=status)
    finally:
        database.close()


def wait_for_jobs(scheduler: Scheduler, job_ids: list[int], timeout_s: float, poll_s: float = 0.2) -> dict[int, str]:
    """The final status of each job (`succeeded`, `failed`, …), waiting at most `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    statuses: dict[int, str] = {}
    while time.monotonic() < deadline:
        statuses = {job_id: scheduler.status(job_id) for job_id in job_ids}
        if all(s not in ("todo", "doing") for s in statuses.values()):
            return statuses
        time.sleep(poll_s)
    return statuses
