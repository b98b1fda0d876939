"""Whether a tick has anything to think about, decided without a model (`cycle.thinking`).

Thinking costs a model call (money on a server, a minute of CPU on the embedded model); a persona left alone should
not spend it on the same thought again. Before each tick the loop driver (and a fleet worker, before it queues a
tick job) asks `reason`: something new since the persona last thought — a note from a human, a channel, a peer, a
feed or a task's sub-cycle; a human still waiting; a background process finished; an approval answered; a question
opened (the curiosity drive's source); a drive that would reach out now (persona/drives.py's rule); the first ticks
after a start; and, in `reflective` mode, the ceiling of the quiet pace reached (a free thought now and then). No
reason: no tick and no model call; a one-line quiet record (a closed process row, never shown in a prompt: the
persona's thoughts say nothing about it), and the next look comes after a pause that doubles each quiet tick
(1, 2, 4 … s) up to `cycle.quiet_ceiling_s`. The driver polls the cheap reasons (`arrived`) every second during that
pause, so the persona is back at full speed the moment something comes.

Modes: `continuous` thinks every tick (the seeds' stream of thought, Epos); `eventful` only when something is new;
`reflective` as eventful, plus a free thought when the quiet pace reaches its ceiling. `auto` (the default) is
`reflective` when the first model is the embedded one (no money spent, a mind that still muses) and `eventful` for a
server model.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from managers.records import Record, read
from memory.repositories.config import THINKING_PREFIX

if TYPE_CHECKING:
    from managers import Managers
    from persona.settings import Settings

ThinkingMode = Literal["continuous", "eventful", "reflective"]
QUIET_RECORD = "cycle.quiet"  # the quiet ticks' process rows (closed: no prompt shows them)


def _naive(value: datetime) -> datetime:
    return value.replace(tzinfo=None) if value.tzinfo else value


def resolved_mode(settings: Settings, first_provider: str | None) -> ThinkingMode:
    """The mode in force: the setting, or for `auto` the one right for the first model's kind."""
    mode = settings.cycle.thinking
    if mode != "auto":
        return mode
    return "reflective" if first_provider == "llamacpp" else "eventful"


def quiet_pause(streak: int, ceiling_s: float) -> float:
    """The pause after the `streak`-th quiet tick in a row: 1, 2, 4 … seconds, at most the ceiling."""
    return float(min(ceiling_s, 2.0 ** max(0, streak - 1)))


class ThinkingState(Record):
    """When a thread last thought (`since`), the newest note then, and its quiet ticks since (the `thinking:<thread>`
    key)."""

    since: datetime | None = None
    after_note: int = 0
    streak: int = 0  # quiet ticks in a row
    quiet_since: datetime | None = None


@dataclass(frozen=True)
class Decision:
    think: bool
    reason: str  # why it thinks, or why not
    pause_s: float = 0.0  # quiet: the pause before the next look


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class ThinkingManager:
    """A thread's thinking policy, in one unit of work."""

    def __init__(self, house: Managers) -> None:
        self.house = house
        self.repos = house.repos

    def nothing_new_since(self, thread_id: str, ticks: int) -> bool:
        """No note for the persona (from the human, a task, the system) ever came, or none during the thread's last
        `ticks` ticks: the anti-stagnation escalation's "no new data"."""
        recent = self.repos.ticks.recent(ticks, thread_id=thread_id)
        latest = self.repos.notes.latest_incoming_at()
        start = min((t.started_at for t in recent), default=None)
        return latest is None or (start is not None and _naive(latest) < _naive(start))

    def state(self, thread_id: str) -> ThinkingState:
        """The thread's thinking state (what cannot be read: the defaults, logged — as if it never thought)."""
        return read(ThinkingState, self.repos.config.thinking_state(thread_id), THINKING_PREFIX + thread_id)

    def thought(self, thread_id: str, now: datetime) -> None:
        """The persona thought now: what is new is counted from here; the quiet pace starts again."""
        state = ThinkingState(since=now, after_note=self.repos.notes.newest_id(), streak=0, quiet_since=None)
        self.repos.config.set_thinking_state(thread_id, state.stored())

    def arrived(self, thread_id: str, state: ThinkingState | None = None) -> str | None:
        """The cheap reasons (a few indexed queries): a note, a waiting human, a finished background process, an
        approval answered, a question opened — since the persona last thought. None: nothing."""
        state = self.state(thread_id) if state is None else state
        since = state.since
        if since is None:
            return "no thought yet"
        repos = self.repos
        settings = self.house.deps.settings
        notes_mode = self.house.loop.cycle(thread_id).notes_mode or (settings.cycle.notes_mode if settings else "auto")
        waiting = repos.notes.unread_human_ids(limit=1) if notes_mode == "auto" else []
        if waiting:  # (in manual mode the persona reads notes when it chooses: only a new one is news)
            return f"note {waiting[0]} from a human waits"
        after = state.after_note
        fresh = [n for n in repos.notes.unread_incoming(limit=5) if n.id > after]
        if fresh:
            return f"note {fresh[0].id} from {fresh[0].source}"
        item = repos.notes.newest_of("feed")
        if item > after:
            return f"note {item} from feed"
        done = repos.processes.finished_since(thread_id, since)
        if done:
            return f"process {done[0].id} {done[0].name} finished"
        answered = repos.approvals.decided_since(since)
        if answered:
            return f"approval {answered[0].id} answered"
        opened = [
            q
            for q in repos.questions.open_lines()  # its own (a command's) are what it thinks already
            if _utc(q.created_at) > _utc(since) and getattr(q, "source", "") != "command"
        ]
        if opened:
            return f"a question opened: {str(opened[0].topic)[:60]}"
        return None

    def decide(self, thread_id: str, now: datetime, mode: ThinkingMode, *, ticks_since_start: int) -> Decision:
        """Whether the next tick thinks; a quiet one is recorded and its pause set (the streak grows)."""
        settings = self.house.deps.settings
        if settings is None:
            raise ValueError("ThinkingManager.decide needs the settings (ManagerDeps.settings)")
        budget = self.house.budget.state(now)
        state = self.state(thread_id)
        if budget != "ok":  # its own thinking goes first: spent, it only answers humans; low, whoever wrote
            waiting = self.repos.notes.unread_human_ids(limit=1)
            arrived = self.arrived(thread_id, state) if budget == "low" else None
            if waiting or (arrived and arrived.startswith("note ")):
                return Decision(
                    True, f"budget {budget}: " + (f"note {waiting[0]} from a human waits" if waiting else arrived or "")
                )
            return self._quiet(
                thread_id,
                now,
                state,
                f"budget {budget}: only answering humans"
                if budget == "spent"
                else f"budget {budget}: no thought of my own",
            )
        if mode == "continuous":
            return Decision(True, "continuous thinking")
        if ticks_since_start < settings.cycle.wake_ticks:
            return Decision(True, "the first ticks after a start")
        reason = self.arrived(thread_id, state) or self._drive_wants(now)
        ceiling = settings.cycle.quiet_ceiling_s
        quiet_since = state.quiet_since
        if reason is None and mode == "reflective" and quiet_since and (now - quiet_since).total_seconds() >= ceiling:
            reason = f"a free thought after {ceiling:g}s of quiet"
        if reason is not None:
            return Decision(True, reason)
        since = state.since.isoformat() if state.since else "the start"
        return self._quiet(thread_id, now, state, f"nothing new since {since}")

    def _quiet(self, thread_id: str, now: datetime, state: ThinkingState, why: str) -> Decision:
        """A quiet tick: recorded in one line, the streak one longer, the pause before the next look doubled."""
        settings = self.house.deps.settings
        assert settings is not None
        streak = state.streak + 1
        pause = quiet_pause(streak, settings.cycle.quiet_ceiling_s)
        state = state.changed(streak=streak, quiet_since=state.quiet_since or now)
        self.repos.config.set_thinking_state(thread_id, state.stored())
        self.repos.processes.add(
            QUIET_RECORD, f"quiet: {why}; no model call; next look in {pause:g}s", status="close", thread_id=thread_id
        )
        return Decision(False, why, pause)

    def _drive_wants(self, now: datetime) -> str | None:
        """A drive strong enough that the persona would reach out now (the drives' one rule)."""
        from persona.drives import compute_drives, reach_out_offer

        settings = self.house.deps.settings
        assert settings is not None
        repos = self.repos
        drives = compute_drives(repos, now, settings.drives)
        offers = repos.config.reach_outs
        last_offer = datetime.fromisoformat(offers[-1]["at"]) if offers else None
        why_not = reach_out_offer(
            drives,
            now,
            settings.zone(),
            settings.drives,
            quiet_hours=settings.dreaming.quiet_hours,
            human_waiting=False,
            last_offer_at=last_offer,
        )
        return f"drive {drives.dominant} at {drives.dominant_level:.2f}" if why_not is None else None

    def quiet_ticks(self, thread_id: str | None = None, since: datetime | None = None) -> int:
        """How many quiet ticks were recorded (for a thread, since a moment)."""
        return self.repos.processes.count_named(QUIET_RECORD, thread_id=thread_id, since=since)
