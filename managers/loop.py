"""Loop control: start, pause and stop from outside the loop, and a thread's own cycle settings.

Start/pause/stop: the web app, the command line (or any process on the same database) writes the wanted state
(`request_state`); the loop reads it between ticks (`wanted`) and records its own state beside it (`record_status`),
for the Controls page.

A thread's cycle settings — the pause between ticks, how many recent responses it sees, the notes mode, idle
(sleeping without model calls until something wakes it), the context mode (standard, concentration, meditation) and
the manual skills read for the next prompts — live in the `config` table (`repos.config.cycle`), written in the
caller's transaction (for a command: the same one as its exactly-once record); the loop driver and prepare_context
read them every tick. The persona changes them with its `cycle.*` and `skills.read` commands; the loop driver wakes
an idle thread (`wake_if_due`).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, cast

from memory.upkeep.abstracts import request_abstract

if TYPE_CHECKING:
    from managers import Managers
    from memory.models import Thread
    from persona import Persona
    from persona.settings import Settings

ContextMode = Literal["standard", "concentration", "meditation"]
Wanted = Literal["running", "paused", "stopped"]
SKILLS_LOADED_KEY = "skills_loaded"  # in the thread's cycle settings: [{name, until_tick}]


class LoopError(ValueError):
    """A loop setting refused (nothing would wake an idle thread, no such process)."""


def loop_alive(loop: Mapping[str, Any]) -> bool | None:
    """Whether the process that last reported is still there (None: it runs on another machine, or never ran)."""
    pid = loop.get("pid")
    if not pid or loop.get("host") != socket.gethostname():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def context_mode(cycle: Mapping[str, Any]) -> str:
    """The context mode a thread's cycle settings name (standard when none)."""
    return str(cycle.get("context_mode") or "standard")


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

    def playbook_run(self, thread_id: str, playbook: str) -> dict[str, Any]:
        """The playbook's last run on the thread (run_id, status, inputs), or {}."""
        return dict(self.repos.config.playbook_run(thread_id, playbook) or {})

    def set_playbook_run(self, thread_id: str, playbook: str, run: dict[str, Any]) -> None:
        self.repos.config.set_playbook_run(thread_id, playbook, run)

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

    def lineage_children(self) -> list[dict[str, Any]]:
        """The children this persona spawned (managers/spawn.py), as their entries were kept."""
        return list(self.repos.config.lineage_children)

    def wanted(self) -> Wanted:
        """What the human wants of the loop (running unless asked otherwise)."""
        return cast(Wanted, (self.repos.config.loop_control or {}).get("want", "running"))

    def request_state(self, want: Wanted, *, by: str, now: datetime) -> dict[str, Any]:
        """Ask the loop to run, pause or stop (it obeys between ticks)."""
        value = {"want": want, "by": by, "at": now.isoformat()}
        self.repos.config.loop_control = value
        return value

    def record_status(
        self, state: str, *, now: datetime, thread: str, tick: int | None = None, pid: int | None = None
    ) -> None:
        """What the loop does now (the loop itself reports it)."""
        self.repos.config.loop_status = {
            "state": state,
            "thread": thread,
            "tick": tick,
            "pid": pid,
            "host": socket.gethostname(),
            "at": now.isoformat(),
        }

    def request_wake(self, *, by: str, now: datetime) -> dict[str, Any]:
        """Ask a dreaming persona to wake up (the loop ends the dream at its next model call)."""
        value = {"by": by, "at": now.isoformat()}
        self.repos.config.wake_request = value
        return value

    def woken_since(self, since: datetime, notes_after: int) -> str | None:
        """Why a dream begun at `since` should end now: the human's "Wake up", or a note newer than `notes_after`."""
        asked = self.repos.config.wake_request
        if asked and datetime.fromisoformat(asked["at"]) >= since:
            return f"woken up by {asked.get('by') or 'the human'}"
        if self.repos.notes.human_after(notes_after, limit=1):
            return "woken up by a note from the human"
        return None

    def status(self) -> dict[str, Any]:
        """{"control": what is wanted, "loop": what the loop last reported}."""
        return {
            "control": self.repos.config.loop_control or {"want": "running"},
            "loop": self.repos.config.loop_status or {},
        }

    def running_thread(self) -> str:
        """The thread the loop last reported running ("main" when none did)."""
        return str((self.status()["loop"] or {}).get("thread") or "main")

    # -- a thread's cycle settings -----------------------------------------------------------------------------------

    def cycle(self, thread_id: str) -> dict[str, Any]:
        """The thread's cycle settings as stored (a copy: change them with `update_cycle`)."""
        return self.repos.config.cycle(thread_id)

    def update_cycle(self, thread_id: str, **changes: Any) -> dict[str, Any]:
        """Store `changes` over the thread's cycle settings; the settings now."""
        cycle = self.cycle(thread_id)
        cycle.update(changes)
        self.repos.config.set_cycle(thread_id, cycle)
        return cycle

    def cycle_overrides(self, thread_id: str) -> list[tuple[str, Any]]:
        """The settings the thread's own cycle settings override (the persona's cycle.* commands, stored per thread):
        (setting name, the thread's value), for `run.py config show`."""
        cycle = self.cycle(thread_id)
        return [(setting, cycle[key]) for key, setting in CYCLE_OVERRIDES.items() if cycle.get(key) is not None]

    def context_cycle(self, thread_id: str, settings: Settings | None = None) -> dict[str, Any]:
        """The thread's cycle settings for its prompt. Without a context mode of its own (cycle.concentration /
        cycle.meditation), a `memory_manager.mode` of concentration or meditation sets it; `diversity_boost` shapes
        meditation."""
        settings = settings if settings is not None else self.settings
        cycle = self.cycle(thread_id)
        manager_mode = settings.memory_manager.mode
        if not cycle.get("context_mode") and manager_mode in ("concentration", "meditation"):
            cycle["context_mode"] = manager_mode
        cycle.setdefault("diversity_boost", settings.memory_manager.diversity_boost)
        return cycle

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
        stored = self.cycle(thread_id).get("notes_filter")
        if note_filter is not None:
            wanted = {k: v for k, v in note_filter.items() if v not in (None, [], "")}
            if min_priority is not None:
                wanted.setdefault("min_priority", min_priority)
            changes["notes_filter"] = wanted
        elif min_priority is not None and isinstance(stored, Mapping):
            changes["notes_filter"] = {**stored, "min_priority": min_priority}
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
        old = self.cycle(thread_id).get("context_mode") or "standard"
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
            entry
            for entry in self.cycle(thread_id).get(SKILLS_LOADED_KEY) or []
            if entry.get("name") != name and int(entry.get("until_tick", 0)) > tick
        ]
        loaded.append({"name": name, "until_tick": tick + ticks})
        self.update_cycle(thread_id, **{SKILLS_LOADED_KEY: loaded})

    # -- what the loop asks ----------------------------------------------------------------------------------------

    def wake_reason(self, idle: Mapping[str, Any], now: datetime) -> str | None:
        """Why an idle thread wakes now (a matching note, a process or task cycle finished, a background job of the
        thread ended, an approval answered, the timeout), or None."""
        repos = self.repos
        if idle.get("wake_on_note", True):
            wanted = idle.get("note_filter") or {}
            for note in repos.notes.unread_incoming(limit=50, min_priority=wanted.get("min_priority")):
                if note.id <= int(idle.get("after_note") or 0) and wanted:
                    continue
                if wanted.get("source") and note.source != wanted["source"]:
                    continue
                if wanted.get("tags") and not set(wanted["tags"]) & set(note.tags or []):
                    continue
                if wanted.get("contains") and str(wanted["contains"]).lower() not in note.text.lower():
                    continue
                return f"note {note.id} from {note.source}"
        process = idle.get("process")
        if process is not None:
            row = (
                repos.processes.get(int(process))
                if str(process).isdigit()
                else repos.processes.latest_named(str(process))
            )
            if row is not None and row.status not in ("in_progress", "pending"):
                return f"process {row.id} {row.name} finished ({row.status})"
        if idle.get("thread") and idle.get("since"):  # a script or a question to another model came back
            done = repos.processes.finished_since(idle["thread"], datetime.fromisoformat(idle["since"]))
            if done:
                return f"process {done[0].id} {done[0].name} finished ({done[0].status})"
        if idle.get("task") is not None:
            task = repos.tasks.get(int(idle["task"]))
            if task.repl_status != "running":
                return f"task {task.id}'s sub-cycle ended ({task.repl_status or 'not started'})"
        timeout, since = idle.get("timeout_s"), idle.get("since")
        answered = repos.approvals.decided_since(datetime.fromisoformat(since)) if since else []
        if answered:
            return f"my human answered approval {answered[0].id} ({answered[0].status})"
        if timeout and since and (now - datetime.fromisoformat(since)).total_seconds() >= float(timeout):
            return f"timeout of {float(timeout):g}s"
        return None

    def wake_if_due(self, thread_id: str, now: datetime) -> bool:
        """Whether the thread runs its next tick: not idle, or idle and woken now (the wake is recorded)."""
        idle = self.cycle(thread_id).get("idle")
        if not idle:
            return True
        reason = self.wake_reason(idle, now)
        if reason:
            self.idle_off(thread_id)
            self.repos.processes.add("cycle.idle", f"woke from idle: {reason}", status="ok", thread_id=thread_id)
        return reason is not None


def loaded_skills(cycle: Mapping[str, Any], persona: Persona, tick: int, limit: int) -> list[str]:
    """The bodies of the manual skills read for this tick (`LoopManager.load_skill`), each cut to `limit`
    characters."""
    by_name = {s.name: s for s in persona.skills}
    out = []
    for entry in cycle.get(SKILLS_LOADED_KEY) or []:
        skill = by_name.get(entry.get("name"))
        if skill is None or int(entry.get("until_tick", 0)) < tick:
            continue
        body = skill.body.strip()
        if len(body) > limit:
            body = (
                body[:limit].rsplit("\n", 1)[0]
                + f"\n… (the rest of {skill.name} is cut: {len(body) - limit:,} characters)"
            )
        out.append(f"### Skill: {skill.name} (read on request)\n{skill.description}\n\n{body}")
    return out
