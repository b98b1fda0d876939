"""What a root loop does besides ticking: its session (sessions.py), dreams when they are due
(persona/dreaming.py, playbooks/dream.yaml), and the task sub-cycles (task_cycles.py)."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from datetime import date, datetime, timedelta
from typing import Any

from langgraph.errors import GraphDrained
from langgraph.runtime import RunControl

from graph.agent import Agent
from graph.loop.task_cycles import TaskCycles
from graph.playbook import load_playbook, resolve_playbook_path
from llm import LLMCancelled
from managers.loop import PlaybookRun
from managers.vault import VaultReport, sync_vault
from managers.world import RefreshCounts, refresh_feeds

log = logging.getLogger(__name__)
DREAM_CHECK_EVERY = timedelta(minutes=1)
WAKE_POLL_S = 0.25  # while dreaming: how often the human's "Wake up" and new notes are looked for
FEEDS_CHECK_EVERY = timedelta(minutes=1)


class Autonomy:
    """What a root loop does besides ticking: its session, dreams, and the task sub-cycles."""

    def __init__(
        self,
        agent: Agent,
        on_stream: Callable[[str, Any], None] | None = None,
        notify: Callable[[str], None] | None = None,
    ):
        self.agent = agent
        self.on_stream = on_stream
        self.notify = notify
        self.session_id: int | None = None
        self.digest: str | None = None
        self.tasks = TaskCycles(agent)
        self.dream_agent: Agent | None = None
        self.dream_failed_on: date | None = None  # the date a dream raised: not retried before the next day
        self.dream_checked: datetime | None = None  # when maybe_dream last looked
        self.feeds_checked: datetime | None = None  # when the feeds were last looked at
        self.vault_checked: datetime | None = None  # when the watched folder was last looked at
        self.started = agent.services.clock()

    def start(self) -> None:
        services = self.agent.services
        with services.db.unit() as repos:
            self.session_id, told = services.managers.over(repos).sessions.open(
                self.agent.thread_id,
                playbook=self.agent.playbook.name,
                persona=services.persona.name,
                now=services.clock(),
            )
        for text in told:
            if self.notify:
                self.notify(text)
        self.tasks.resume_interrupted(self.notify)
        recovered = services.background().recover()  # jobs a stopped process recorded: started, or marked offline
        if recovered["offline"] and self.notify:
            self.notify(f"{recovered['offline']} background process(es) were lost when the last run stopped")

    def after_tick(self, control: RunControl) -> None:
        if self.session_id is not None:  # start() opened it
            with self.agent.services.db.unit() as repos:
                self.digest = self.agent.services.managers.over(repos).sessions.checkpoint(self.session_id, self.digest)
        self.step_tasks(control)

    def step_tasks(self, control: RunControl) -> None:
        self.maybe_fetch_feeds()
        self.maybe_sync_vault()
        if self.human_waits():  # a task's tick asks a model: the human is answered first
            return
        for outcome in self.tasks.step(control, self.on_stream):
            quiet = outcome.get("status") == "running" or (
                outcome.get("status") == "waiting" and not outcome.get("reason")
            )
            if not quiet and self.on_stream:  # ended, stopped, restarted or backing off after an error
                self.on_stream("custom", {"event": "task_cycle", **outcome})

    def maybe_fetch_feeds(self) -> RefreshCounts | None:
        """Fetch the feeds that are due (config.yaml feeds.every_minutes; at once when the world check asked),
        between ticks and while idle; a feed that fails is logged and tried at its next turn."""
        services = self.agent.services
        now = services.clock()
        if self.feeds_checked is not None and now - self.feeds_checked < FEEDS_CHECK_EVERY and not self._fetch_asked():
            return None
        self.feeds_checked = now
        try:
            counts = refresh_feeds(services.db, services.settings, services.clock, thread_id=self.agent.thread_id)
        except Exception:  # noqa: BLE001 - reading feeds must never stop the persona
            log.exception("fetching feeds failed")
            return None
        if counts["items"] and self.on_stream:
            self.on_stream("custom", {"event": "feeds", **counts})
        return counts

    def maybe_sync_vault(self) -> VaultReport | None:
        """The watched folder (tools.vault) into the knowledge base when its poll is due (managers/vault.py: why a
        poll by file time); between ticks and while idle; a failure is logged and tried at the next turn."""
        services = self.agent.services
        settings, now = services.settings, services.clock()
        if not settings.tools.vault or (
            self.vault_checked is not None and (now - self.vault_checked).total_seconds() < settings.tools.vault_every_s
        ):
            return None
        self.vault_checked = now
        try:
            report = sync_vault(services.db, settings, services.clock)
        except Exception:  # noqa: BLE001 - a folder that cannot be read must never stop the persona
            log.exception("syncing the vault failed")
            return None
        if report is not None and (report.added or report.changed or report.removed) and self.on_stream:
            self.on_stream("custom", {"event": "vault", "line": report.line()})
        return report

    def _fetch_asked(self) -> bool:
        with self.agent.services.db.unit() as repos:
            return self.agent.services.managers.over(repos).world.fetch_asked()

    def human_waits(self) -> bool:
        with self.agent.services.db.reading() as repos:
            return bool(self.agent.services.managers.over(repos).conversation.waiting())

    def maybe_dream(self, control: RunControl) -> dict[str, Any] | None:
        """Run the dream playbook when it is due (persona/dreaming.py: never while a conversation goes on); returns
        its result, or None."""
        services = self.agent.services
        now = services.clock()
        if self.dream_checked is not None and now - self.dream_checked < DREAM_CHECK_EVERY:
            return None  # the loop also spins while idle: the settings and queries need not run every poll
        self.dream_checked = now
        with services.managers.reading() as house:
            if house.loop.is_child_thread(self.agent.thread_id):
                return None
            reason = house.loop.dream_reason(now, services.settings, started=self.started)
        if reason is None or self.dream_failed_on == now.date():
            return None
        if self.dream_agent is None:
            self.dream_agent = self.agent.sibling(load_playbook(resolve_playbook_path("dream")), self.agent.thread_id)
        with services.managers.unit() as house:
            notes_seen = house.conversation.newest_note_id()
            house.loop.record_status("dreaming", now=now, thread=self.agent.thread_id, pid=os.getpid())
        outer = services.llms.cancel  # the loop's stop: it still cancels the dream's model call
        wake = threading.Event()
        woken: list[str] = []
        watcher = threading.Thread(
            target=self._watch_for_waking,
            args=(now, notes_seen, outer, wake, woken),
            name="dream-wake-watch",
            daemon=True,
        )
        watcher.start()
        try:
            with services.llms.cancel_when(wake):
                for mode, data in self.dream_agent.stream(control, inputs={"level": 0, "reason": reason}):
                    if self.on_stream and mode == "custom":
                        self.on_stream(mode, data)
        except (GraphDrained, LLMCancelled):
            if not woken or outer.is_set():
                raise
            return self._woken(woken[0])
        except Exception as exc:  # noqa: BLE001 - a failed dream must not stop the persona; tried again tomorrow
            log.exception("dream failed")
            self.dream_failed_on = now.date()
            with services.managers.unit() as house:
                house.loop.log(
                    "dream",
                    f"dream failed ({type(exc).__name__}: {exc}); tried again tomorrow",
                    status="error",
                    thread_id=self.agent.thread_id,
                )
            return {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        finally:
            wake.set()  # ends the watcher
            watcher.join(timeout=WAKE_POLL_S * 5)
        return self.dream_agent.outputs().get("dream")

    def _watch_for_waking(
        self, since: datetime, notes_seen: int, outer: threading.Event, wake: threading.Event, woken: list[str]
    ) -> None:
        """While the dream runs: the human's "Wake up" or a note ends it (its model call is cancelled, so the dream
        yields at the step it is in, and the note is answered next); so does a stop of the loop."""
        db = self.agent.services.db
        while not wake.wait(WAKE_POLL_S):
            if outer.is_set():
                wake.set()
                return
            try:
                with db.unit() as repos:
                    why = self.agent.services.managers.over(repos).loop.woken_since(since, notes_seen)
            except Exception:  # noqa: BLE001 - a failed look is tried again at the next poll
                log.exception("looking for a wake-up failed")
                continue
            if why:
                woken.append(why)
                wake.set()
                return

    def _woken(self, why: str) -> dict[str, Any]:
        """The dream was ended by the human: recorded, its unfinished run dropped (the next dream starts afresh)."""
        assert self.dream_agent is not None
        services = self.agent.services
        log.info("dream ended: %s", why)
        with services.managers.unit() as house:
            house.loop.set_playbook_run(
                self.agent.thread_id,
                self.dream_agent.playbook.name,
                PlaybookRun(run_id=self.dream_agent.run_id, status="woken"),
            )
            house.loop.log("dream", f"dream ended: {why}", status="done", thread_id=self.agent.thread_id)
        if self.on_stream:
            self.on_stream("custom", {"event": "dream_woken", "reason": why})
        return {"status": "woken", "reason": why}

    def stop(self, status: str = "stopped") -> None:
        if self.session_id is None:
            return
        with self.agent.services.db.unit() as repos:
            self.agent.services.managers.over(repos).sessions.close(
                self.session_id, self.agent.services.clock(), status=status
            )
