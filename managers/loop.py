"""Loop control: start, pause and stop from outside the loop, and a thread's own cycle settings.

Start/pause/stop: the web app, the command line (or any process on the same database) writes the wanted state
(`request_state`); the loop reads it between ticks (`wanted`) and records its own state beside it (`record_status`),
for the Controls page.

A thread's cycle settings — the pause between ticks, how many recent responses it sees, the notes mode, idle
(sleeping without model calls until something wakes it), the context mode (standard, concentration, meditation) and
the manual skills read for the next prompts — live in the `config` table (`repos.config.cycle`), read and written
as one typed record (`ThreadCycle`, through `cycle` and `update_cycle`; a stored value it cannot take gives the
defaults and is logged: managers/records.py), in the caller's transaction (for a command: the same one as its
exactly-once record); the loop driver and prepare_context read them every tick. The persona changes them with its
`cycle.*` and `skills.read` commands; the loop driver wakes an idle thread (`wake_if_due`).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, ValidationError

from managers.records import Record, read, read_list
from memory.repositories.config import (
    CYCLE_PREFIX,
    LINEAGE_CHILDREN_KEY,
    LOOP_CONTROL_KEY,
    LOOP_STATUS_KEY,
    PLAYBOOK_RUN_PREFIX,
    WAKE_REQUEST_KEY,
)
from memory.upkeep.abstracts import request_abstract
from persona.settings import NotesFilter

if TYPE_CHECKING:
    from managers import Managers
    from memory.models import Thread
    from persona import Persona
    from persona.settings import Settings

ContextMode = Literal["standard", "concentration", "meditation"]
Wanted = Literal["running", "paused", "stopped"]


class LoopError(ValueError):
    """A loop setting refused (nothing would wake an idle thread, no such process)."""


class LoopControl(Record):
    """What the human asked of the loop (the `run/control` key); running unless asked otherwise."""

    want: Wanted = "running"
    by: str | None = None
    at: datetime | None = None


class LoopReport(Record):
    """What the loop last said it does (the `run/status` key): its state, thread and tick, and which process."""

    state: str = "unknown"  # running | paused | idle | stopped | dreaming …
    thread: str | None = None
    tick: int | None = None
    pid: int | None = None
    host: str | None = None
    at: datetime | None = None


class WakeRequest(Record):
    """The human's last "Wake up" to a dreaming persona (the `run/wake` key)."""

    by: str | None = None
    at: datetime | None = None


class PlaybookRun(Record):
    """A playbook's last run on a thread (the `run/<thread>/<playbook>` key): a one-shot run resumes a run that was
    cut while running, with its inputs."""

    run_id: str | None = None
    status: str | None = None  # running | done | woken
    inputs: dict[str, Any] | None = None


class LineageChild(Record):
    """A child persona spawned from this one (the `lineage/children` list): where it lives, and once it was met, its
    DID and the port it is served on (graph/loop/children.py starts it beside the loop)."""

    name: str
    mode: str | None = None  # clone | trained | newborn
    persona_dir: str | None = None
    database: str | None = None
    spawned_at: str | None = None
    did: str | None = None
    port: int | None = None
    data_dir: str | None = None
    db_name: str | None = None  # a PostgreSQL child's database (never its URL: that holds a password)


@dataclass(frozen=True)
class LoopState:
    """What is wanted of the loop, and what the loop last reported."""

    control: LoopControl
    loop: LoopReport


def loop_alive(loop: LoopReport) -> bool | None:
    """Whether the process that last reported is still there (None: it runs on another machine, or never ran)."""
    pid = loop.pid
    if not pid or loop.host != socket.gethostname():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class LoadedSkill(Record):
    """A manual skill read with skills.read: shown in the prompts up to its tick."""

    name: str
    until_tick: int = 0


class IdleState(Record):
    """A thread asleep without model calls (cycle.idle), and what wakes it."""

    since_tick: int = 0
    wake_on_note: bool = True
    note_filter: dict[str, Any] = Field(default_factory=dict)  # source, tags, contains, min_priority
    after_note: int = 0  # with a filter, only notes newer than this one wake it
    process: str | int | None = None  # a process log id or name
    task: int | None = None
    timeout_s: float | None = None
    since: datetime | None = None
    thread: str | None = None


class ThreadCycle(Record):
    """A thread's own cycle settings (the `cycle/<thread>` key): what the persona's cycle.*, notes.*, skills.read and
    abstracts.mode commands chose for it, over config.yaml's `cycle` (None: the setting holds)."""

    pause_s: float | None = Field(None, ge=0)
    responses: int | None = Field(None, ge=0)
    notes_mode: Literal["auto", "manual"] | None = None
    notes_min_priority: int | None = None  # an older version's filter: only the minimum priority
    notes_filter: NotesFilter | None = None
    idle: IdleState | None = None
    context_mode: ContextMode | None = None
    focus_tags: list[str] = Field(default_factory=list)
    focus_emotions: list[str] = Field(default_factory=list)
    focus_logic: Literal["and", "or"] = "or"
    diversity_boost: float | None = None  # meditation's (from memory_manager.diversity_boost when not its own)
    abstracts_mode: Literal["auto", "manual"] | None = None
    skills_loaded: list[LoadedSkill] = Field(default_factory=list)


def context_mode(cycle: ThreadCycle) -> str:
    """The context mode a thread's cycle settings name (standard when none)."""
    return cycle.context_mode or "standard"


# a thread's cycle settings (the persona's cycle.pause, cycle.responses, notes.mode …) over config.yaml's `cycle`
CYCLE_OVERRIDES = {
    "pause_s": "cycle.pause_s",
    "responses": "cycle.responses",
    "notes_mode": "cycle.notes_mode",
    "notes_filter": "cycle.notes_filter",
}


@dataclass(frozen=True)
class OpenedTick:
    """A tick as its first step opened it: the thread it runs in, its number, its row's summary (its starts, an
    answer a killed run kept), the rows of its thread and its root as read now (later steps reuse them), and what
    became of the process log: how many results the model had seen were closed, which stale ones timed out."""

    thread_id: str
    tick: int
    summary: dict[str, Any]
    threads: tuple[Thread, ...]
    closed: int
    timed_out: tuple[int, ...]


class LoopManager:
    """A thread's cycle settings, in one unit of work."""

    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos
        self.settings: Settings = house.deps.settings

    # -- start, pause, stop ------------------------------------------------------------------------------------------

    # -- what a run keeps between its ticks ----------------------------------------------------------------------------

    def preload_tick_decision(self, thread_id: str) -> None:
        """What decides whether a deployed persona thinks now, read in one statement (the unit's config cache)."""
        self.repos.config.preload_tick_decision(thread_id)

    def preload_tick(self, root: str) -> None:
        """What the tick's steps read of the config table, in one statement for the whole tick (what was set before
        it; its own writes are read again)."""
        self.repos.config.preload_tick(root)

    def open_tick(
        self,
        root: str,
        wanted: str,
        *,
        after: int,
        mode: str,
        label: str,
        playbook: str,
        persona: str,
        seen: Iterable[int],
        now: datetime,
        max_starts: int,
    ) -> OpenedTick:
        """Open the next tick: the root thread made when first used; the tick runs in `wanted` when that is a
        playbook's region or a task's sub-cycle, else in the thread the root's ticks run in (a Stelis child the
        persona entered); its number is the first after `after` not yet finished, and its row counts its starts —
        a tick started over `max_starts` times (the process died each time) is quarantined and the next one taken.
        The process results the model has `seen` are closed, and the thread's stale ones time out
        (`cycle.process_timeout_s`)."""
        repos = self.repos
        repos.threads.ensure(root, label=label, playbook=playbook, persona=persona, origin="root")
        current = repos.threads.get(wanted)
        if current is not None and current.origin in ("playbook", "task"):
            thread_id = current.id  # a playbook's Stelis region, or a task's sub-cycle, stays in its own thread
        else:  # the persona may have entered a Stelis thread itself (stelis.start): its ticks run there
            thread_id = self.house.threads.active(root)
        tick = repos.ticks.next_unfinished(thread_id, after + 1)
        started = repos.ticks.start(thread_id, tick, mode)
        while (started.summary or {}).get("attempts", 1) > max_starts:
            self.quarantine(
                thread_id,
                tick,
                step=None,
                error=f"started {max_starts} times without finishing: the process died each time",
            )
            tick += 1
            started = repos.ticks.start(thread_id, tick, mode)
        repos.threads.set_tick(thread_id, tick)
        rows = tuple(row for row in (repos.threads.get(thread_id), repos.threads.get(root)) if row is not None)
        closed = repos.processes.close(seen)
        timed_out = repos.processes.time_out_stale(
            thread_id, timedelta(seconds=self.settings.cycle.process_timeout_s), now
        )
        return OpenedTick(thread_id, tick, dict(started.summary or {}), rows, closed, tuple(p.id for p in timed_out))

    def playbook_run(self, thread_id: str, playbook: str) -> PlaybookRun:
        """The playbook's last run on the thread (none: an empty record; what cannot be read: the same, logged)."""
        stored = self.repos.config.playbook_run(thread_id, playbook)
        return read(PlaybookRun, stored, f"{PLAYBOOK_RUN_PREFIX}{thread_id}/{playbook}")

    def set_playbook_run(self, thread_id: str, playbook: str, run: PlaybookRun) -> None:
        self.repos.config.set_playbook_run(thread_id, playbook, run.stored())

    def log(self, name: str, text: str, *, status: str, thread_id: str | None = None) -> None:
        """A line in the process log the next prompt shows (a dream that failed or ended, a child that started)."""
        self.repos.processes.add(name, text, status=status, thread_id=thread_id)

    def quarantine(self, thread_id: str, tick: int, *, step: str | None, error: str, trace: str = "") -> None:
        """A tick closed as failed (its answer set aside, never replayed), and the next prompt told why."""
        self.repos.ticks.fail(thread_id, tick, step=step, error=error[:2000], trace=trace)
        where = f" in step {step}" if step else ""
        self.repos.processes.add(
            "tick.failed",
            f"tick {tick} failed{where}: {error[:600]}. My answer of that tick was "
            "set aside and will not be run again; this tick starts clean.",
            status="error",
            thread_id=thread_id,
        )

    def kept_answer(self, thread_id: str, tick: int) -> dict[str, Any] | None:
        """The model's answer a tick kept before it was killed (never generated twice), or None."""
        return self.repos.ticks.kept_answer(thread_id, tick)

    def keep_answer(
        self, thread_id: str, tick: int, answer: dict[str, Any], *, summary: dict[str, Any] | None = None
    ) -> None:
        """The model's answer, kept with the tick's row until it finishes (`summary`: the row's as the tick read it)."""
        self.repos.ticks.keep_answer(thread_id, tick, answer, summary=summary)

    def close_tick(self, thread_id: str, tick: int, *, status: str, summary: dict[str, Any], feedback: str) -> None:
        """A tick ends: what did not run and why goes to the next prompt (`feedback`, the process log's one entry of
        the kind), and its row keeps the summary and what its model calls cost."""
        if feedback:
            self.repos.processes.note("tick.feedback", feedback, status="error", thread_id=thread_id)
        totals = self.repos.llm_calls.totals(thread_id, tick)
        self.repos.ticks.finish(
            thread_id,
            tick,
            status=status,
            summary=summary,
            llm_calls=int(totals["calls"]),
            prompt_tokens=int(totals["prompt_tokens"]),
            completion_tokens=int(totals["completion_tokens"]),
            llm_ms=totals["latency_ms"],
        )

    def is_child_thread(self, thread_id: str) -> bool:
        thread = self.repos.threads.get(thread_id)
        return thread is not None and thread.parent_id is not None

    def dream_reason(self, now: datetime, settings: Settings, *, started: datetime | None) -> str | None:
        """Why the persona dreams now (persona/dreaming.py: never while a conversation goes on), or None."""
        from persona.dreaming import dream_due

        return dream_due(
            self.repos,
            now,
            settings.zone(),
            settings.dreaming,
            started=started,
            talking_minutes=settings.conversation.active_minutes,
        )

    def lineage_children(self) -> list[LineageChild]:
        """The children this persona spawned (managers/spawn.py), as their entries were kept (one that cannot be read
        is left out, logged)."""
        return read_list(LineageChild, self.repos.config.lineage_children, LINEAGE_CHILDREN_KEY)

    def control(self) -> LoopControl:
        """What the human asked of the loop (what cannot be read: running, logged)."""
        return read(LoopControl, self.repos.config.loop_control, LOOP_CONTROL_KEY)

    def wanted(self) -> Wanted:
        """What the human wants of the loop (running unless asked otherwise)."""
        return self.control().want

    def request_state(self, want: Wanted, *, by: str, now: datetime) -> LoopControl:
        """Ask the loop to run, pause or stop (it obeys between ticks)."""
        control = LoopControl(want=want, by=by, at=now)
        self.repos.config.loop_control = control.stored()
        return control

    def report(self) -> LoopReport:
        """What the loop last reported (nothing yet, or what cannot be read: unknown, logged)."""
        return read(LoopReport, self.repos.config.loop_status, LOOP_STATUS_KEY)

    def record_status(
        self, state: str, *, now: datetime, thread: str, tick: int | None = None, pid: int | None = None
    ) -> None:
        """What the loop does now (the loop itself reports it)."""
        report = LoopReport(state=state, thread=thread, tick=tick, pid=pid, host=socket.gethostname(), at=now)
        self.repos.config.loop_status = report.stored()

    def wake_request(self) -> WakeRequest:
        """The human's last "Wake up" (`at` None: never, or what cannot be read, logged)."""
        return read(WakeRequest, self.repos.config.wake_request, WAKE_REQUEST_KEY)

    def request_wake(self, *, by: str, now: datetime) -> WakeRequest:
        """Ask a dreaming persona to wake up (the loop ends the dream at its next model call)."""
        asked = WakeRequest(by=by, at=now)
        self.repos.config.wake_request = asked.stored()
        return asked

    def woken_since(self, since: datetime, notes_after: int) -> str | None:
        """Why a dream begun at `since` should end now: the human's "Wake up", or a note newer than `notes_after`."""
        asked = self.wake_request()
        if asked.at is not None and asked.at >= since:
            return f"woken up by {asked.by or 'the human'}"
        if self.repos.notes.human_after(notes_after, limit=1):
            return "woken up by a note from the human"
        return None

    def status(self) -> LoopState:
        """What is wanted of the loop, and what the loop last reported."""
        return LoopState(self.control(), self.report())

    def running_thread(self) -> str:
        """The thread the loop last reported running ("main" when none did)."""
        return self.report().thread or "main"

    # -- a thread's cycle settings -----------------------------------------------------------------------------------

    def cycle(self, thread_id: str) -> ThreadCycle:
        """The thread's cycle settings as stored (what cannot be read: the defaults, logged; change them with
        `update_cycle`)."""
        return read(ThreadCycle, self.repos.config.cycle(thread_id), CYCLE_PREFIX + thread_id)

    def update_cycle(self, thread_id: str, **changes: Any) -> ThreadCycle:
        """Store `changes` over the thread's cycle settings; the settings now. LoopError when the record cannot take
        them (nothing is stored)."""
        try:
            cycle = self.cycle(thread_id).changed(**changes)
        except ValidationError as exc:
            raise LoopError(f"cycle settings refused: {exc}") from None
        self.repos.config.set_cycle(thread_id, cycle.stored())
        return cycle

    def cycle_overrides(self, thread_id: str) -> list[tuple[str, Any]]:
        """The settings the thread's own cycle settings override (the persona's cycle.* commands, stored per thread):
        (setting name, the thread's value), for `run.py config show`."""
        cycle = self.cycle(thread_id).stored()
        return [(setting, cycle[key]) for key, setting in CYCLE_OVERRIDES.items() if cycle.get(key) is not None]

    def context_cycle(self, thread_id: str, settings: Settings | None = None) -> ThreadCycle:
        """The thread's cycle settings for its prompt. Without a context mode of its own (cycle.concentration /
        cycle.meditation), a `memory_manager.mode` of concentration or meditation sets it; `diversity_boost` shapes
        meditation."""
        settings = settings if settings is not None else self.settings
        cycle = self.cycle(thread_id)
        manager_mode = settings.memory_manager.mode
        changes: dict[str, Any] = {}
        if not cycle.context_mode and manager_mode in ("concentration", "meditation"):
            changes["context_mode"] = manager_mode
        if cycle.diversity_boost is None:
            changes["diversity_boost"] = settings.memory_manager.diversity_boost
        return cycle.model_copy(update=changes) if changes else cycle

    # -- what the persona sets (cycle.*) -------------------------------------------------------------------------

    def set_pause(self, thread_id: str, seconds: float) -> None:
        self.update_cycle(thread_id, pause_s=seconds)

    def set_responses(self, thread_id: str, responses: int) -> None:
        self.update_cycle(thread_id, responses=responses)

    def set_notes_mode(
        self, thread_id: str, mode: str, min_priority: int | None, note_filter: Mapping[str, Any] | None = None
    ) -> None:
        """The notes mode, and for auto mode the filter (persona/settings.py NotesFilter; managers/notes.py applies
        it): given, it replaces the thread's (an empty one lifts it); `min_priority` alone sets only that condition of
        the thread's filter; a mode given alone keeps the filter."""
        changes: dict[str, Any] = {"notes_mode": mode, "notes_min_priority": min_priority}
        stored = self.cycle(thread_id).notes_filter
        if note_filter is not None:
            wanted = {k: v for k, v in note_filter.items() if v not in (None, [], "")}
            if min_priority is not None:
                wanted.setdefault("min_priority", min_priority)
            changes["notes_filter"] = wanted
        elif min_priority is not None and stored is not None:
            changes["notes_filter"] = {**stored.model_dump(mode="json"), "min_priority": min_priority}
        self.update_cycle(thread_id, **changes)

    def idle_off(self, thread_id: str) -> None:
        self.update_cycle(thread_id, idle=None)

    def idle_on(
        self,
        thread_id: str,
        *,
        tick: int,
        now: datetime,
        timeout_s: float | None,
        wake_on_note: bool,
        note_filter: Mapping[str, Any],
        process: str | int | None,
        task: int | None,
    ) -> list[str]:
        """Put the thread to sleep until one of the wakes it names (returned, for the report); LoopError when
        nothing could wake it or the process does not exist."""
        repos = self.repos
        if process is not None and str(process).isdigit() and repos.processes.get(int(process)) is None:
            raise LoopError(f"no process {process}")
        if task is not None:
            repos.tasks.get(task)
        jobs = [r for r in repos.runs.with_status("pending", "running") if r.thread_id == thread_id]
        if timeout_s is None and not wake_on_note and process is None and task is None and not jobs:
            raise LoopError("nothing would wake me; give a timeout, a note filter, a process or a task")
        self.update_cycle(
            thread_id,
            idle={
                "since_tick": tick,
                "wake_on_note": wake_on_note,
                "note_filter": dict(note_filter),
                "after_note": repos.notes.newest_id(),
                "process": process,
                "task": task,
                "timeout_s": timeout_s,
                "since": now.isoformat(),
                "thread": thread_id,
            },
        )
        return [
            w
            for w in (
                "a matching note" if note_filter else "a note" if wake_on_note else "",
                f"process {process} finishing" if process is not None else "",
                f"task {task}'s sub-cycle ending" if task is not None else "",
                f"{len(jobs)} background process(es) finishing" if jobs else "",
                f"{timeout_s:g}s" if timeout_s else "",
            )
            if w
        ]

    def set_context_mode(
        self,
        thread_id: str,
        mode: ContextMode,
        *,
        root_thread: str | None = None,
        focus_tags: list[str] | None = None,
        focus_emotions: list[str] | None = None,
        focus_logic: str | None = None,
    ) -> None:
        """Change the thread's context mode (with the focus of a concentration); a change is an abstract trigger."""
        old = self.cycle(thread_id).context_mode or "standard"
        focus: dict[str, Any] = {}
        if mode == "concentration":
            focus = {
                "focus_tags": focus_tags or [],
                "focus_emotions": focus_emotions or [],
                "focus_logic": focus_logic or "or",
            }
        self.update_cycle(thread_id, context_mode=mode, **focus)
        if old != mode:  # HMP: a change of context mode is an abstract trigger
            request_abstract(self.repos, root_thread or thread_id, "mode_change", f"{old} -> {mode}")

    def load_skill(self, thread_id: str, name: str, *, tick: int, ticks: int) -> None:
        """Show the manual skill `name` in the thread's next `ticks` prompts (skills.read)."""
        loaded = [
            entry.stored()
            for entry in self.cycle(thread_id).skills_loaded
            if entry.name != name and entry.until_tick > tick
        ]
        loaded.append({"name": name, "until_tick": tick + ticks})
        self.update_cycle(thread_id, skills_loaded=loaded)

    # -- what the loop asks ----------------------------------------------------------------------------------------

    def wake_reason(self, idle: IdleState, now: datetime) -> str | None:
        """Why an idle thread wakes now (a matching note, a process or task cycle finished, a background job of the
        thread ended, an approval answered, the timeout), or None."""
        repos = self.repos
        if idle.wake_on_note:
            wanted = idle.note_filter
            for note in repos.notes.unread_incoming(limit=50, min_priority=wanted.get("min_priority")):
                if note.id <= idle.after_note and wanted:
                    continue
                if wanted.get("source") and note.source != wanted["source"]:
                    continue
                if wanted.get("tags") and not set(wanted["tags"]) & set(note.tags or []):
                    continue
                if wanted.get("contains") and str(wanted["contains"]).lower() not in note.text.lower():
                    continue
                return f"note {note.id} from {note.source}"
        process = idle.process
        if process is not None:
            row = (
                repos.processes.get(int(process))
                if str(process).isdigit()
                else repos.processes.latest_named(str(process))
            )
            if row is not None and row.status not in ("in_progress", "pending"):
                return f"process {row.id} {row.name} finished ({row.status})"
        since = idle.since
        if idle.thread and since:  # a script or a question to another model came back
            done = repos.processes.finished_since(idle.thread, since)
            if done:
                return f"process {done[0].id} {done[0].name} finished ({done[0].status})"
        if idle.task is not None:
            task = repos.tasks.get(idle.task)
            if task.repl_status != "running":
                return f"task {task.id}'s sub-cycle ended ({task.repl_status or 'not started'})"
        answered = repos.approvals.decided_since(since) if since else []
        if answered:
            return f"my human answered approval {answered[0].id} ({answered[0].status})"
        if idle.timeout_s and since and (now - since).total_seconds() >= idle.timeout_s:
            return f"timeout of {idle.timeout_s:g}s"
        return None

    def wake_if_due(self, thread_id: str, now: datetime) -> bool:
        """Whether the thread runs its next tick: not idle, or idle and woken now (the wake is recorded)."""
        idle = self.cycle(thread_id).idle
        if idle is None:
            return True
        reason = self.wake_reason(idle, now)
        if reason:
            self.idle_off(thread_id)
            self.repos.processes.add("cycle.idle", f"woke from idle: {reason}", status="ok", thread_id=thread_id)
        return reason is not None


def loaded_skills(cycle: ThreadCycle, persona: Persona, tick: int, limit: int) -> list[str]:
    """The bodies of the manual skills read for this tick (`LoopManager.load_skill`), each cut to `limit`
    characters."""
    by_name = {s.name: s for s in persona.skills}
    out = []
    for entry in cycle.skills_loaded:
        skill = by_name.get(entry.name)
        if skill is None or entry.until_tick < tick:
            continue
        body = skill.body.strip()
        if len(body) > limit:
            body = (
                body[:limit].rsplit("\n", 1)[0]
                + f"\n… (the rest of {skill.name} is cut: {len(body) - limit:,} characters)"
            )
        out.append(f"### Skill: {skill.name} (read on request)\n{skill.description}\n\n{body}")
    return out
