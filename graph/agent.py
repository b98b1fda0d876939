"""The programmatic API: `build_agent(...)` → an `Agent` whose `tick()` runs one checkpointed tick.

    from graph import build_agent
    agent = build_agent("repl", data_dir="data")
    final_state = agent.tick()
    for mode, data in agent.stream(): ...   # ("updates", {node: update}) and ("custom", {"event": …})

    research = build_agent("deep_work", data_dir="data")
    research.run(inputs={"question": "…"}); research.outputs()   # {"answer": …, "findings": […]}

LangGraph's own API, without the Agent: `open_graph` gives the compiled graph and the run context its steps read
their services from, in one call (a compiled graph invoked without that context stops at its first step with
`MissingServices`):

    with open_graph("repl", data_dir="data") as (tick_graph, context):
        config = {"configurable": {"thread_id": "main"}}
        state = tick_graph.invoke({}, config, context=context)       # one tick on the thread "main"

One invoke per tick on a persistent thread id (one per run for one-shot playbooks).

Checkpoints. A loop tick is checkpointed once, when it ends (`durability="exit"`; a Ctrl-C drain also saves
where it stopped): a tick's steps are cheap, and checkpointing after each of them cost more than all of them
together. Nothing rests on the per-step checkpoint: after a kill the tick runs again from its start, and every
effect is keyed by thread:tick — the model's answer is kept with the tick and reused (never generated twice),
messages are upserted, commands run exactly once by cmd_id, a finished tick is never run again. One-shot
playbooks (deep_work, novel) run for minutes through many model calls: they are checkpointed after every step
(`durability="sync"`), so a killed run resumes at the step that was running.

A loop agent remembers the state its last tick left (the stream's last values) and the checkpoint that tick ended
on: while that is still the thread's newest checkpoint — one small query; a drain, a quarantine or another
process's tick makes a newer one — the next tick starts without loading the checkpoint to ask "resume or start?",
and `state()` answers from memory. A tick that did not run to its end here remembers nothing (nor does a new
process): the checkpoint is loaded as before.
"""

from __future__ import annotations

import gc
import logging
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.constants import END
from langgraph.errors import GraphBubbleUp
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import RunControl
from langgraph.types import StreamMode

from graph.checkpoint import (
    DEFAULT_KEEP,
    POSTGRES_PRUNE_EVERY,
    close_saver,
    latest_checkpoint_id,
    open_postgres_saver,
    open_sqlite_saver,
    prune,
    prune_due,
)
from graph.compiler import build_graph
from graph.playbook import Playbook, coerce_inputs, load_playbook, resolve_playbook_path
from graph.services import checkpoint_path, open_services
from managers.loop import PlaybookRun
from nodes import AnimaContext, Services
from nodes.quarantine import quarantine_tick
from nodes.state import STATE_FIELDS, STATE_REDUCERS, TickState, TickValues
from nodes.stelis.threads import StelisResult, recover_orphans
from persona.settings import Overrides

TickGraph = CompiledStateGraph[TickState, AnimaContext, Any, Any]  # a playbook compiled over a checkpointer

log = logging.getLogger(__name__)
RECURSION_LIMIT = 200


@dataclass
class TickFailure:
    """A loop tick a step failed in: closed as failed, its answer quarantined (nodes/quarantine.py)."""

    thread_id: str
    tick: int
    step: str | None
    error: str


class Agent:
    """A compiled playbook bound to services, a checkpointer and a thread.

    Loop playbooks (repl, epos) run one tick per `tick()` on the checkpoint thread `thread_id`.
    One-shot playbooks (deep_work, novel) run once per `run(inputs)`, each run on its own checkpoint
    thread; a run left unfinished by a kill or Ctrl-C is resumed by the next `run` with the same inputs.
    Both write to the database thread `thread_id`.
    """

    def __init__(
        self,
        playbook: Playbook,
        services: Services,
        checkpointer: BaseCheckpointSaver[Any],
        thread_id: str = "main",
        keep_checkpoints: int = DEFAULT_KEEP,
        checkpoint_prefix: str = "",
        graph: TickGraph | None = None,
    ) -> None:
        self.playbook = playbook
        self.checkpoint_prefix = checkpoint_prefix  # a deployment's personas share one checkpoint table: "<name>/"
        self.services = services
        self.checkpointer = checkpointer
        self.thread_id = thread_id
        self.keep_checkpoints = keep_checkpoints
        self.prune_every = POSTGRES_PRUNE_EVERY  # a PostgreSQL thread's runs between prunes (graph/checkpoint.py)
        self._runs_since_prune = 0
        # `graph`: the playbook already compiled over this checkpointer (it holds nothing of a persona or a thread,
        # so a fleet worker compiles each playbook once for all its personas, and a sibling reuses its parent's)
        self.graph: TickGraph = graph if graph is not None else build_graph(playbook).compile(checkpointer=checkpointer)
        self.context = AnimaContext(services=services)
        self.run_id: str | None = None
        self.recovered: list[StelisResult] = []
        self.last_failure: TickFailure | None = None  # of the last tick run; None when it finished
        # a loop tick this agent ran to its end: the checkpoint it ended on and the state it left. While that is
        # still the thread's newest checkpoint (one small query), the next tick's "resume or start?", `state()` and
        # `interrupted` need not load it again; anything else that writes the thread makes a newer one
        self._finished: tuple[str, TickValues] | None = None
        self._started_from: dict[str, Any] | None = None  # the state a loop tick started from (not a resumed one)
        if not playbook.loop:
            self.run_id = self._pending_run()[0]

    @property
    def checkpoint_thread(self) -> str:
        if self.playbook.loop or self.run_id is None:
            return self.checkpoint_prefix + self.thread_id
        return f"{self.checkpoint_prefix}{self.thread_id}:{self.playbook.name}:{self.run_id}"

    def sibling(self, playbook: Playbook, thread_id: str) -> Agent:
        """Another playbook or thread of the same persona (a dream, a task sub-cycle): same services and saver."""
        return Agent(
            playbook,
            self.services,
            self.checkpointer,
            thread_id=thread_id,
            checkpoint_prefix=self.checkpoint_prefix,
            graph=self.graph if playbook is self.playbook else None,
        )

    @property
    def config(self) -> RunnableConfig:
        return {"configurable": {"thread_id": self.checkpoint_thread}, "recursion_limit": RECURSION_LIMIT}

    def state(self) -> TickValues:
        """The state the last tick or run left (its checkpoint's values; empty before the first)."""
        finished = self._still_finished()
        if finished is not None:
            return cast(TickValues, dict(finished))
        return cast(TickValues, dict(self.graph.get_state(self.config).values))

    def finished_state(self) -> TickValues:
        """`state()` right after `stream` ran a loop tick to its end here: the state it left, without asking again
        whether its checkpoint is the thread's newest (the stream's end just did, and nothing else runs this thread
        meanwhile: a fleet worker's job holds the persona's lock); otherwise `state()`."""
        if self._finished is not None:
            return cast(TickValues, dict(self._finished[1]))
        return self.state()

    @property
    def interrupted(self) -> bool:
        """True when the last tick or run stopped between steps (Ctrl-C or a kill) and will resume."""
        if not self.playbook.loop and self.run_id is None:
            return False
        if self._still_finished() is not None:
            return False
        return bool(self.graph.get_state(self.config).next)

    def _still_finished(self) -> TickValues | None:
        """The state this agent's last loop tick left when it ran to its end here and its checkpoint is still the
        thread's newest (no other process or agent wrote the thread since), else None."""
        if self._finished is None:
            return None
        checkpoint_id, values = self._finished
        return values if latest_checkpoint_id(self.checkpointer, self.checkpoint_thread) == checkpoint_id else None

    def _remember_finished(self, values: TickValues | None) -> None:
        self._finished = None
        if values is None or not self.playbook.loop:
            return
        try:
            checkpoint_id = latest_checkpoint_id(self.checkpointer, self.checkpoint_thread)
        except NotImplementedError:  # a saver we cannot ask cheaply: every read loads the checkpoint
            return
        if checkpoint_id is not None:
            self._finished = (checkpoint_id, values)

    def _pending_run(self) -> tuple[str | None, dict[str, Any] | None]:
        with self.services.managers.reading() as house:
            last = house.loop.playbook_run(self.thread_id, self.playbook.name)
        if last.run_id and last.status == "running":
            return last.run_id, last.inputs or {}
        return None, None

    def _start_payload(self, inputs: dict[str, Any] | None) -> dict[str, Any] | None:
        base = {"thread_id": self.thread_id, "root_thread": self.thread_id}
        self._started_from = None
        if self.playbook.loop:
            finished = self._still_finished()
            if finished is not None:  # the last tick ended here, and nothing wrote since: start one
                self._started_from = dict(finished)
                return {**base, "vars": coerce_inputs(self.playbook, inputs)} if inputs is not None else base
            snapshot = self.graph.get_state(self.config)  # resume, or first tick?
            if snapshot.next:
                return None
            self._started_from = dict(snapshot.values)
            if inputs is not None or not snapshot.values:
                return {**base, "vars": coerce_inputs(self.playbook, inputs or {})}
            return base
        pending, pending_inputs = self._pending_run()
        values = coerce_inputs(self.playbook, inputs or {}) if inputs is not None or not pending else pending_inputs
        if pending and pending_inputs == values:
            self.run_id = pending
            if self.interrupted:
                return None
        self.run_id = uuid.uuid4().hex[:12]
        with self.services.managers.unit() as house:
            house.loop.set_playbook_run(
                self.thread_id, self.playbook.name, PlaybookRun(run_id=self.run_id, status="running", inputs=values)
            )
        return {**base, "run_id": self.run_id, "vars": values}

    def stream(
        self, control: RunControl | None = None, inputs: dict[str, Any] | None = None, *, events: bool = True
    ) -> Iterator[tuple[str, Any]]:
        """Run one tick (loop playbooks) or one run (one-shot), or finish an interrupted one, yielding
        (mode, data) as steps complete. With `events`, also the steps' own events ("custom": tokens, Stelis
        threads, subplaybooks, dreams) as they happen; without (nobody listening), only the top-level steps'
        updates, and LangGraph runs each step inline rather than beside a stream waiter, which is cheaper."""
        payload = self._start_payload(inputs)
        self.last_failure = None
        self._finished = None
        # the state the tick leaves: the state it started from with each step's update applied, as LangGraph's
        # channels apply them (LangGraph's "values" mode would copy every field of the state after every step)
        left = _updated(self._started_from, payload) if payload is not None else None
        modes: list[StreamMode] = ["updates", "custom"] if events else ["updates"]
        # the run's consecutive units of work share one session and connection; each still commits what it wrote
        # when it ends (memory/db.py), so where a killed tick resumes from is unchanged
        chunks = self.services.db.sharing(
            self.graph.stream(
                payload,
                self.config,
                context=self.context,
                stream_mode=modes,
                subgraphs=events,
                durability="exit" if self.playbook.loop else "sync",
                control=control,
            )
        )
        opened: dict[str, Any] = {}  # the thread and tick the tick's first step opened
        try:
            for chunk in chunks:
                # (namespace, mode, data) with subgraphs, else (mode, data): LangGraph's v1 stream types neither
                namespace, mode, data = cast(tuple[tuple[str, ...], str, Any], chunk if events else ((), *chunk))
                if mode == "updates" and not namespace and left is not None:
                    left = _folded(left, data)
                if mode == "custom" and isinstance(data, dict) and namespace:
                    data = {**data, "namespace": list(namespace)}
                if mode == "updates" and namespace:
                    continue  # steps inside subgraphs report through their custom events
                if mode == "updates" and not opened:
                    opened = next((u for u in data.values() if isinstance(u, dict) and "tick" in u), {})
                yield mode, data
        except GraphBubbleUp:  # a drain (stop requested) or an interrupt: the run resumes where it stopped
            raise
        except Exception as exc:
            if not self.playbook.loop:
                raise  # a one-shot run resumes at its failed step when the user runs it again
            self.last_failure = self._quarantine(exc, opened)
            yield (
                "custom",
                {
                    "event": "tick_failed",
                    "tick": self.last_failure.tick,
                    "step": self.last_failure.step,
                    "error": self.last_failure.error,
                },
            )
            left = None
        if not self.playbook.loop:
            with self.services.managers.unit() as house:
                house.loop.set_playbook_run(
                    self.thread_id, self.playbook.name, PlaybookRun(run_id=self.run_id, status="done")
                )
        self._runs_since_prune += 1
        # a one-shot run's thread is its own: pruned at its end; a loop's, every `prune_every` ticks on PostgreSQL
        if not self.playbook.loop or prune_due(self.checkpointer, self._runs_since_prune, self.prune_every):
            prune(self.checkpointer, self.checkpoint_thread, self.keep_checkpoints)
            self._runs_since_prune = 0
        if left is not None and _anonymised(left):
            left = self._finish_anonymisation(left)
        self._remember_finished(cast(TickValues, left) if left is not None else None)

    def _finish_anonymisation(self, left: dict[str, Any]) -> dict[str, Any]:
        """The tick ran the approved `memory.anonymise` (or `users.delete`), which rewrote the database in its unit:
        now that the tick's last checkpoint is written, the checkpoints, the vectors and the files follow
        (graph/forgetting.py), and the state this agent keeps of the tick holds the placeholders too."""
        from graph.checkpoint import deep_replace
        from graph.forgetting import finish
        from managers.anonymise import AnonymisationError

        try:
            with self.services.db.unit() as repos:  # what the rest of the tick wrote after the command, too
                anonymise = self.services.managers.over(repos).anonymise
                change = anonymise.saved_replacer()
                anonymise.sweep(change)
        except AnonymisationError as exc:  # the key was moved away meanwhile: the owner's CLI finishes it
            log.warning("anonymisation: the checkpoints were not rewritten: %s", exc)
            return left
        finish(
            change,
            db=self.services.db,
            memory=self.services.memory,
            saver=self.checkpointer,
            thread_prefix=self.checkpoint_prefix,
            data_dir=self.services.settings.data_dir,
        )
        return cast(dict[str, Any], deep_replace(change, left))

    def _quarantine(self, exc: Exception, opened: dict[str, Any]) -> TickFailure:
        """A step raised: close the tick as failed with the reason, set its answer aside, and clear the checkpoint's
        pending steps so the next tick starts at the beginning instead of replaying the step that failed."""
        snapshot = self.graph.get_state(self.config)
        step = snapshot.next[0] if snapshot.next else None
        thread_id = opened.get("thread_id") or snapshot.values.get("thread_id") or self.thread_id
        tick = int(opened.get("tick") or snapshot.values.get("tick") or 0)
        error = f"{type(exc).__name__}: {exc}"[:2000]
        log.warning(
            "tick %s of %s failed%s: %s (quarantined; the next tick starts clean)",
            tick,
            thread_id,
            f" in {step}" if step else "",
            error,
        )
        if snapshot.next:
            self.graph.update_state(self.config, None, as_node=END)
        if tick:
            with self.services.managers.unit() as house:
                quarantine_tick(house, thread_id, tick, step=step, error=error, trace=traceback.format_exc())
        return TickFailure(thread_id, tick, step, error)

    def tick(self, control: RunControl | None = None, inputs: dict[str, Any] | None = None) -> TickValues:
        for _ in self.stream(control, inputs, events=False):
            pass
        return self.state()

    run = tick

    def outputs(self) -> dict[str, Any]:
        variables = self.state().get("vars") or {}
        return {name: variables.get(name) for name in self.playbook.outputs}

    def close(self) -> None:
        close_saver(self.checkpointer)
        if self.services.memory is not None:
            self.services.memory.close()
        self.services.db.close()


FORGETTING = ("memory.anonymise", "users.delete")  # commands that rewrite what the checkpoints hold


def _anonymised(values: dict[str, Any]) -> bool:
    """Whether the tick's commands include an executed `memory.anonymise` or `users.delete` (rows rewritten)."""
    return any(
        isinstance(e, dict) and e.get("type") in FORGETTING and e.get("status") == "executed"
        for e in values.get("executed") or []
    )


def _updated(values: dict[str, Any] | None, update: dict[str, Any]) -> dict[str, Any] | None:
    """`values` with one step's (or the input's) `update` applied as the state's channels apply it: a field with a
    reducer (`STATE_REDUCERS`, e.g. `vars`) merged by it, every other field replaced; None (not known) for anything
    else — a field the state does not have — or when `values` is not known."""
    if values is None or not STATE_FIELDS.issuperset(update):
        return None
    found = {**values, **update}
    for name, reducer in STATE_REDUCERS.items():
        if name in update:
            found[name] = reducer(values.get(name), update[name])
        elif found.get(name) is None:
            found[name] = reducer(None, None)
    return found


def _folded(values: dict[str, Any] | None, updates: Any) -> dict[str, Any] | None:
    """`values` after the steps of one "updates" chunk ({step: its update, or None}); None when a chunk is anything
    else (an interrupt): the next tick then loads the checkpoint."""
    if not isinstance(updates, dict):
        return None
    for step, update in updates.items():
        if update is None:
            continue
        if step.startswith("__") or not isinstance(update, dict):
            return None
        values = _updated(values, update)
    return values


def settle_heap() -> None:
    """Once a long-running process has started (modules imported, models loaded, the agent compiled): collect, then
    freeze what survived. Those objects live as long as the process, and the collector no longer walks them on every
    full collection a tick's allocations trigger (the loop driver and the fleet worker call it when they start; once
    per process: a second call would only freeze what the first left to come and go)."""
    global _settled
    if _settled:
        return
    _settled = True
    gc.collect()
    gc.freeze()


_settled = False


class OpenGraph:
    """A playbook compiled over a checkpointer, and the run context that carries its services (`AnimaContext`):
    what `graph.invoke(input, config, context=context)` and `graph.stream(...)` need. Unpacks as
    `(graph, context)`; as a context manager it closes the services and the checkpointer at the end."""

    def __init__(self, agent: Agent, *, owns_services: bool = True) -> None:
        self._agent = agent
        self._owns_services = owns_services  # services the caller gave are the caller's to close
        self.graph: TickGraph = agent.graph
        self.context: AnimaContext = agent.context
        self.playbook: Playbook = agent.playbook

    def inputs(self, **given: Any) -> dict[str, Any]:
        """A run's input with the playbook's inputs checked and their defaults filled (`{"vars": {…}}`): what a
        one-shot playbook (deep_work, novel) starts from. InputError names a missing or unknown one."""
        return {"vars": coerce_inputs(self.playbook, given)}

    def __iter__(self) -> Iterator[Any]:
        return iter((self.graph, self.context))

    def __enter__(self) -> tuple[TickGraph, AnimaContext]:
        return self.graph, self.context

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_services:
            self._agent.close()
        else:
            close_saver(self._agent.checkpointer)


def open_graph(
    playbook: str | Path = "repl",
    *,
    checkpointer: str | BaseCheckpointSaver[Any] = "sqlite",
    services: Services | None = None,
    overrides: Overrides | None = None,
    **given: Any,
) -> OpenGraph:
    """The playbook (a shipped name or a path) compiled over `checkpointer` (as `build_agent`'s), with its services
    opened from `overrides` and `given` (Settings fields: data_dir, persona_dir, llm_url, …) unless `services` are
    given (then they stay open when it closes), ready for LangGraph's invoke and stream. The thread a run works on
    is the one its config names (`{"configurable": {"thread_id": …}}`); a loop tick's input is `{}`, a one-shot
    run's `OpenGraph.inputs(question=…)`."""
    return OpenGraph(
        build_agent(playbook, checkpointer=checkpointer, services=services, overrides=overrides, **given),
        owns_services=services is None,
    )


def build_agent(
    playbook: str | Path = "repl",
    *,
    thread_id: str = "main",
    checkpointer: str | BaseCheckpointSaver[Any] = "sqlite",
    services: Services | None = None,
    on_recover: Callable[[str], None] | None = None,
    checkpoint_prefix: str = "",
    overrides: Overrides | None = None,
    **given: Any,
) -> Agent:
    """Open services from `overrides` and `given` (persona.settings.Settings fields: data_dir, db_url, persona_dir,
    llm_url, …; graph/services.open_services) unless `services` are given, compile the playbook, and abort Stelis
    threads a dead process left running (each gets a chronicle and stays anchored). `checkpointer`: "sqlite" (the
    default: durable, beside the memory — PostgresSaver
    when the database is Postgres, SqliteSaver in the data dir otherwise), "memory", or a saver."""
    services = services or open_services(overrides, **given)
    if checkpointer == "sqlite" and services.db.is_postgres:  # the state goes where the memory goes
        saver: BaseCheckpointSaver[Any] = open_postgres_saver(services.db.libpq_url())
    elif checkpointer == "sqlite":
        saver = open_sqlite_saver(checkpoint_path(services.settings.data_dir))
    elif checkpointer == "memory":
        saver = InMemorySaver()
    elif isinstance(checkpointer, str):
        raise ValueError(f"unknown checkpointer {checkpointer!r}: sqlite, memory, or a saver")
    else:
        saver = checkpointer
    agent = Agent(
        load_playbook(resolve_playbook_path(playbook)),
        services,
        saver,
        thread_id=thread_id,
        checkpoint_prefix=checkpoint_prefix,
    )
    agent.recovered = recover_orphans(services, notify=on_recover)
    return agent
