"""The live journal: the loop's stream (steps, dreams, Stelis threads, failures) written to `live_events`, so the
web app — in this process or another one over the same database — shows a run as it happens.

Writing is off the tick's path: events go to a queue and a writer thread commits them in small batches."""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from datetime import datetime
from typing import Any

from managers import ManagerDeps, ManagerFactory
from memory import Database
from memory.clock import utcnow
from persona.settings import stored_settings

log = logging.getLogger(__name__)
FLUSH_EVERY_S = 0.1  # a batch waits at most this long for the events after its first
KEEP_EVENTS = 5_000
DATA_CHARS = 4_000  # a bigger event keeps a preview: the full text is in its own table
TEXT_CHARS = 2_000
SKIPPED = {"token"}  # per-token events stay in the terminal: a stream reader gets the whole answer per step


def _bounded(data: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(data, ensure_ascii=False, default=str)
    if len(text) <= DATA_CHARS:
        plain: dict[str, Any] = json.loads(text)
        return plain
    return {"preview": text[:DATA_CHARS], "truncated": len(text)}


def step_summary(node: str, update: dict[str, Any]) -> dict[str, Any]:
    """What a live view needs of a step's update (the state itself stays in the checkpoint)."""
    if node == "call_llm":
        llm = update.get("llm") or {}
        return {
            "degraded": bool(update.get("degraded")),
            "llm_id": llm.get("llm_id"),
            "prompt_tokens": llm.get("prompt_tokens"),
            "completion_tokens": llm.get("completion_tokens"),
            "tokens_per_s": llm.get("tokens_per_s"),
            "response": str(update.get("response") or "")[:TEXT_CHARS],
        }
    if node == "execute_commands":
        return {
            "executed": [
                {"type": str(e.get("type"))[:80], "status": e.get("status")}
                for e in (update.get("executed") or [])[:40]
            ],
            "idle": bool(update.get("idle")),
        }
    return {"keys": sorted(update)[:20]}


class LiveJournal:
    """A stream listener (`run_loop(on_stream=…)`): call it with each (mode, data) the Agent yields."""

    def __init__(self, db: Database, thread_id: str, *, keep: int = KEEP_EVENTS, flush_every_s: float = FLUSH_EVERY_S):
        """`flush_every_s`: how long a batch waits for the events after its first (a fleet worker's waits longer:
        a tick's events then go in one transaction, its last one closing it)."""
        self.db, self.thread_id, self.keep, self.flush_every_s = db, thread_id, keep, flush_every_s
        # the journal's writes need no setting: the data dir's are read only if a manager ever asks
        self.managers = ManagerFactory(db, lambda: ManagerDeps(settings=stored_settings(db)))
        self.tick: int | None = None
        self._queue: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
        self._writer = threading.Thread(target=self._write, name="live-journal", daemon=True)
        self._writer.start()

    def __call__(self, mode: str, data: Any) -> None:
        now = utcnow()
        if mode == "custom":
            kind = str(data.get("event") or "event")
            if kind in SKIPPED:
                return
            if kind == "tick_resumed" and data.get("tick") is not None:  # an interrupted tick goes on (driver.py)
                self.tick = int(data["tick"])
            body = {k: v for k, v in data.items() if k != "event"}
            self.put(kind, node=data.get("node"), data=body, at=now, thread_id=data.get("thread_id"))
            return
        for node, update in (data or {}).items():
            update = update if isinstance(update, dict) else {}
            if node == "update_process_log" and update.get("tick") is not None:
                self.tick = int(update["tick"])
            self.put("step", node=node, data=step_summary(node, update), at=now)
            if node == "execute_commands":
                self.put("tick", node=node, data={"executed": len(update.get("executed") or [])}, at=now)

    def put(
        self,
        kind: str,
        *,
        node: str | None = None,
        data: dict[str, Any] | None = None,
        at: datetime | None = None,
        thread_id: str | None = None,
        tick: int | None = None,
    ) -> None:
        self._queue.put(
            {
                "at": at or utcnow(),
                "thread_id": thread_id or self.thread_id,
                "tick": self.tick if tick is None else tick,
                "kind": kind[:32],
                "node": (node or None) and str(node)[:128],
                "data": _bounded(data or {}),
            }
        )

    def close(self) -> None:
        self._queue.put(None)
        self._writer.join(timeout=5)

    def _write(self) -> None:
        """Events arriving within `flush_every_s` of a batch's first go in one transaction (a tick's steps come a few
        milliseconds apart: one transaction for each of them cost a tick more than its own writes); a tick's last
        event ("tick") closes its batch at once."""
        written = 0
        while True:
            first = self._queue.get()
            batch, stop = ([] if first is None else [first]), first is None
            deadline = time.monotonic() + self.flush_every_s
            while not stop and batch[-1]["kind"] != "tick":
                left = deadline - time.monotonic()
                try:
                    item = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                else:
                    batch.append(item)
            if batch:
                try:
                    with self.managers.unit() as house:
                        house.journal.write_events(batch)
                        written += len(batch)
                        if written >= 200:
                            house.journal.trim_events(self.keep)
                            written = 0
                except Exception:  # the journal must never stop the loop
                    log.exception("live journal: %d event(s) not written", len(batch))
            if stop:
                return
