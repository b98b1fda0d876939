"""Sessions (Epos "save and resurrect"; HMP goal-state checkpoints).

A session is one run of a loop on a thread. It opens when the loop starts and is saved when it stops: the
goal state (active goals, open tasks, running sub-cycles) and the context a revival needs (the last thoughts,
the last compression, the conversation). While it runs, the goal state is checkpointed after every tick in
which it changed, so a killed run leaves it too; the next start marks that session `killed` and names the
tasks that were in progress, which the persona then resumes.

`export` gives the session as JSON and as a Markdown transcript; `revive` starts a new thread seeded with the saved
context — the persona remembers where it was; `adopt_export` takes another data dir's export in first. The loop and
the fleet open, checkpoint and close sessions; the command line and the web app list, export and revive them.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from managers.owners import owner_alive, process_token
from managers.views import frozen, frozen_all
from memory.models import Message, Note
from memory.note_kinds import HUMAN_SOURCES, NoteSource
from memory.repositories.diary import is_debug

if TYPE_CHECKING:
    from managers import Managers

SEED_RESPONSES = 10
SEED_NOTES = 10


def _digest(snapshot: dict[str, Any]) -> str:
    return hashlib.sha1(json.dumps(snapshot, sort_keys=True, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class SessionView:
    """One run of a loop on a thread, from start to stop, with what a revival is seeded with."""

    id: int
    thread_id: str
    playbook: str
    persona: str
    status: str  # running | stopped | killed
    first_tick: int
    last_tick: int
    goal_state: dict[str, Any]  # active goals, open tasks
    context: dict[str, Any]  # saved at stop: what a revival is seeded with
    revived_from: int | None
    started_at: datetime
    stopped_at: datetime | None


TRACE_COLUMNS = ("at", "record", "id", "tick", "who", "kind", "tags", "emotions", "text")


def trace_records(export: dict[str, Any]) -> list[dict[str, Any]]:
    """A session export (`SessionManager.export`'s JSON) as one time-ordered record per thought, message, note and
    diary entry — the thought log HMP's tracing and Epos's `epos_log/` keep; `kind` of a diary entry tagged
    `debug:*` is `debug`."""
    records = [
        {
            "at": m["created_at"],
            "record": "message",
            "id": m["id"],
            "tick": m["tick"],
            "who": m["role"],
            "kind": m["kind"],
            "tags": [],
            "emotions": m.get("emotions") or [],
            "text": m["content"],
        }
        for m in export.get("messages", [])
    ]
    records += [
        {
            "at": n["created_at"],
            "record": "note",
            "id": n["id"],
            "tick": None,
            "who": n["source"],
            "kind": "note",
            "tags": n.get("tags") or [],
            "emotions": [],
            "text": n["text"],
        }
        for n in export.get("notes", [])
    ]
    records += [
        {
            "at": e["created_at"],
            "record": "diary",
            "id": e["id"],
            "tick": e.get("tick"),
            "who": "persona",
            "kind": "debug" if e.get("debug") else "diary",
            "tags": e.get("tags") or [],
            "emotions": e.get("emotions") or [],
            "text": e["text"],
        }
        for e in export.get("diary", [])
    ]
    records.sort(key=lambda r: (r["at"][:26], r["record"], r["id"]))
    return records


def trace_jsonl(export: dict[str, Any]) -> str:
    """The thought log as JSON Lines: one record a line."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in trace_records(export))


def trace_csv(export: dict[str, Any]) -> str:
    """The thought log as CSV (beside the JSON export), for a spreadsheet or pandas; lists joined with `;`."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=TRACE_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for record in trace_records(export):
        writer.writerow(
            {**record, "tags": ";".join(map(str, record["tags"])), "emotions": ";".join(map(str, record["emotions"]))}
        )
    return out.getvalue()


class SessionManager:
    """The sessions of a persona's loops, in one unit of work."""

    def __init__(self, house: Managers) -> None:
        self.repos = house.repos

    def listing(self, limit: int = 50) -> list[SessionView]:
        return frozen_all(SessionView, self.repos.sessions.list(limit))

    def get(self, session_id: int) -> SessionView | None:
        row = self.repos.sessions.get(session_id)
        return frozen(SessionView, row) if row is not None else None

    def revived_as(self, session_id: int) -> list[str]:
        """The threads revived from the session."""
        return sorted(
            thread for thread, revived in self.repos.config.revived_threads().items() if revived == session_id
        )

    def goal_snapshot(self) -> dict[str, Any]:
        repos = self.repos
        goals = [
            {
                "id": g.id,
                "title": g.title,
                "horizon": g.horizon,
                "priority": g.priority,
                "status": g.status,
                "progress": (g.progress_notes or [])[-3:],
                **repos.goals.progress(g.id),
            }
            for g in repos.goals.list(status="active")
        ]
        tasks = [
            {
                "id": t.id,
                "title": t.title,
                "status": t.status,
                "priority": t.priority,
                "pinned": t.pinned,
                "goal_id": t.goal_id,
                "repl_status": t.repl_status,
            }
            for t in repos.tasks.list(open_only=True)
        ]
        return {"goals": goals, "tasks": tasks}

    def open(self, thread_id: str, *, playbook: str, persona: str, now: datetime) -> tuple[int, list[str]]:
        """Start a session; close the ones a dead process left running. Returns (id, what to tell the persona)."""
        repos = self.repos
        told: list[str] = []
        for stale in repos.sessions.running():
            if stale.thread_id == thread_id and stale.owner != process_token() and not owner_alive(stale.owner):
                stale.status, stale.stopped_at = "killed", stale.stopped_at or now
                stale.context = self.saved_context(stale.thread_id, stale.first_message_id)
        previous = repos.sessions.last_of(thread_id)
        in_progress = [t for t in repos.tasks.list(status="in_progress") if t.repl_status != "running"]
        if previous is not None and in_progress:  # HMP: after a restart the persona picks its tasks up again
            lines = ", ".join(f"{t.id} ({t.title})" for t in in_progress)
            text = (
                f"the last session ({previous.status}) left task(s) in progress: {lines}. "
                "Resume them, or update their status."
            )
            repos.processes.add("tasks.resume", text, status="warning", thread_id=thread_id)
            told.append(text)
        thread = repos.threads.get(thread_id)
        row = repos.sessions.start(
            thread_id,
            playbook=playbook,
            persona=persona,
            owner=process_token(),
            tick=thread.tick if thread is not None else 0,
            first_message_id=repos.messages.newest_id(),
            now=now,
        )
        row.goal_state = self.goal_snapshot()
        row.revived_from = repos.config.revived_from(thread_id) if previous is None else None
        return row.id, told

    def checkpoint(self, session_id: int, last_digest: str | None = None) -> str:
        """Save the goal state if it changed since `last_digest`; returns the current digest."""
        repos = self.repos
        row = repos.sessions.get(session_id)
        snapshot = self.goal_snapshot()
        digest = _digest(snapshot)
        if row is not None:
            thread = repos.threads.get(row.thread_id)
            row.last_tick = thread.tick if thread is not None else row.last_tick
            if digest != last_digest:
                row.goal_state = snapshot
        return digest

    def close(self, session_id: int, now: datetime, status: str = "stopped") -> None:
        repos = self.repos
        row = repos.sessions.get(session_id)
        if row is None:
            return
        self.checkpoint(session_id)
        row.status, row.stopped_at = status, now
        row.context = self.saved_context(row.thread_id, row.first_message_id)

    def close_running(self, now: datetime, status: str = "stopped") -> None:
        """Every session still running, saved and closed (a persona paused or removed from a deployment)."""
        for session in self.repos.sessions.running():
            self.close(session.id, now, status=status)

    def saved_context(self, thread_id: str, first_message_id: int = 0) -> dict[str, Any]:
        """What a revival is seeded with: the thread's last thoughts (and compression, in continuation mode)."""
        repos = self.repos
        responses = repos.messages.recent(thread_id, SEED_RESPONSES, kinds=("response", "step"))
        compression = repos.messages.last_of_kind(thread_id, "compression")
        chunks = repos.messages.since(thread_id, compression.id if compression else 0, ("continuation", "human"))[-20:]
        return {
            "thread_id": thread_id,
            "responses": [{"tick": m.tick, "kind": m.kind, "content": m.content} for m in responses],
            "compression": compression.content if compression else None,
            "continuation": [{"kind": m.kind, "role": m.role, "content": m.content} for m in chunks],
            "goal_state": self.goal_snapshot(),
            "new_messages": max(0, repos.messages.newest_id() - first_message_id),
        }

    def running_id(self, thread_id: str) -> int | None:
        """The session running on the thread, if one does."""
        return next((s.id for s in self.repos.sessions.running() if s.thread_id == thread_id), None)

    def leave_export(self, session_id: int, now: datetime) -> None:
        """The session's export (JSON and Markdown) left for whoever asked for it (a deployment's worker)."""
        data, markdown = self.export(session_id)
        self.repos.config.set_session_export(session_id, {"json": data, "markdown": markdown, "at": now.isoformat()})

    def take_export(self, session_id: int) -> dict[str, Any] | None:
        """The export a worker left, taken (it is not kept after)."""
        result = self.repos.config.session_export(session_id)
        self.repos.config.set_session_export(session_id, None)
        return dict(result) if result is not None else None

    def export(self, session_id: int) -> tuple[dict[str, Any], str]:
        """(JSON-ready dict, Markdown transcript) of everything the session's thread said and heard in it."""
        repos = self.repos
        row = repos.sessions.get(session_id)
        if row is None:
            raise LookupError(f"no session {session_id}")
        later = [s for s in repos.sessions.list(thread_id=row.thread_id) if s.id > row.id]
        upto = min(s.first_message_id for s in later) if later else None  # the next session's messages are its own
        messages = [
            m
            for m in repos.messages.log(row.thread_id)
            if m.id > row.first_message_id and (upto is None or m.id <= upto)
        ]
        until = row.stopped_at
        notes = repos.notes.between(row.started_at, until)
        diary = [e for e in repos.diary.between(row.started_at, until) if e.thread_id in (None, row.thread_id)]
        data = {
            "session": {
                "id": row.id,
                "thread_id": row.thread_id,
                "playbook": row.playbook,
                "persona": row.persona,
                "status": row.status,
                "started_at": row.started_at.isoformat(),
                "stopped_at": row.stopped_at.isoformat() if row.stopped_at else None,
                "ticks": [row.first_tick + 1, row.last_tick],
                "revived_from": row.revived_from,
            },
            "goal_state": row.goal_state,
            "messages": [
                {
                    "id": m.id,
                    "tick": m.tick,
                    "kind": m.kind,
                    "role": m.role,
                    "content": m.content,
                    "emotions": m.emotions,
                    "created_at": m.created_at.isoformat(),
                }
                for m in messages
            ],
            "notes": [
                {"id": n.id, "source": n.source, "text": n.text, "tags": n.tags, "created_at": n.created_at.isoformat()}
                for n in notes
            ],
            "diary": [
                {
                    "id": e.id,
                    "tick": e.tick,
                    "text": e.text,
                    "tags": e.tags,
                    "emotions": e.emotions,
                    "debug": is_debug(e),
                    "created_at": e.created_at.isoformat(),
                }
                for e in diary
            ],
        }
        lines = [
            f"# Session {row.id} — {row.persona or 'persona'} on thread {row.thread_id}",
            f"{row.playbook} · {row.status} · {row.started_at:%Y-%m-%d %H:%M} → {row.stopped_at:%Y-%m-%d %H:%M}"
            if row.stopped_at
            else f"{row.playbook} · {row.status}",
            "",
        ]
        timeline: list[tuple[datetime, str, Message | Note]] = [(m.created_at, "m", m) for m in messages]
        timeline += [(n.created_at, "n", n) for n in notes]
        timeline.sort(key=lambda entry: (entry[0].replace(tzinfo=None), entry[1]))
        for _, _, item in timeline:
            if isinstance(item, Message):
                who = (
                    "Human"
                    if item.role == "user"
                    else f"Thought, tick {item.tick}"
                    if item.kind == "response"
                    else item.kind
                )
                lines += [f"**{who}:** {item.content}", ""]
            elif item.source in HUMAN_SOURCES:
                lines += [f"> **Human:** {item.text}", ""]
            elif item.source == NoteSource.PERSONA and "outgoing" in (item.tags or []):
                lines += [f"> **{row.persona or 'Persona'} → human:** {item.text}", ""]
            else:
                lines += [f"> *{item.source}:* {item.text}", ""]
        if row.goal_state.get("goals") or row.goal_state.get("tasks"):
            lines += ["## Goals and tasks at the end", ""]
            lines += [
                f"- goal {g['id']} ({g['horizon']}, priority {g['priority']}): {g['title']}"
                for g in row.goal_state.get("goals", [])
            ]
            lines += [f"- task {t['id']} {t['status']}: {t['title']}" for t in row.goal_state.get("tasks", [])]
        return data, "\n".join(lines).rstrip() + "\n"

    def revive(self, session_id: int, now: datetime) -> str:
        """A new root thread seeded with the session's saved context; returns its id."""
        repos = self.repos
        row = repos.sessions.get(session_id)
        if row is None:
            raise LookupError(f"no session {session_id}")
        if row.status == "running" and owner_alive(row.owner):
            raise ValueError(f"session {session_id} is still running (process {row.owner}); stop it first")
        context = row.context or self.saved_context(row.thread_id, row.first_message_id)
        base = f"{row.thread_id.split('~')[0]}~r{row.id}"
        thread_id, n = base, 1
        while repos.threads.get(thread_id) is not None:
            n += 1
            thread_id = f"{base}.{n}"
        repos.threads.ensure(
            thread_id, label=f"revived from session {row.id}", playbook=row.playbook, persona=row.persona, origin="root"
        )
        header = (
            f"[I was revived from session {row.id} (thread {row.thread_id}, stopped "
            f"{row.stopped_at:%Y-%m-%d %H:%M} UTC). These are my last thoughts from then.]"
            if row.stopped_at
            else f"[I was revived from session {row.id} (thread {row.thread_id}).]"
        )
        repos.messages.add(
            thread_id=thread_id, tick=0, kind="step", role="system", content=header, meta={"revived_from": row.id}
        )
        if context.get("compression"):
            repos.messages.add(
                thread_id=thread_id,
                tick=0,
                kind="compression",
                role="assistant",
                content=context["compression"],
                meta={"revived_from": row.id},
            )
        for chunk in context.get("continuation") or []:
            repos.messages.add(
                thread_id=thread_id,
                tick=0,
                kind=chunk["kind"],
                role=chunk["role"],
                content=chunk["content"],
                meta={"revived_from": row.id},
            )
        for item in context.get("responses") or []:
            repos.messages.add(
                thread_id=thread_id,
                tick=0,
                kind=item["kind"],
                role="assistant",
                content=item["content"],
                meta={"revived_from": row.id, "original_tick": item["tick"]},
            )
        repos.config.set_revived_from(thread_id, session_id)
        return thread_id

    def adopt_export(self, data: dict[str, Any], now: datetime) -> int:
        """A session from another data dir's export (`export_session`'s JSON) as a row of this one, status `imported`,
        its saved context rebuilt from the exported messages: `revive_session` can then bring it back here."""
        repos = self.repos
        session = data.get("session") or {}
        messages = list(data.get("messages") or [])
        compression = next((m for m in reversed(messages) if m.get("kind") == "compression"), None)
        after = messages[messages.index(compression) + 1 :] if compression else messages
        origin = str(session.get("thread_id") or "imported").split("~")[0]
        row = repos.sessions.start(
            f"{origin}~imported",
            playbook=str(session.get("playbook") or "repl"),
            persona=str(session.get("persona") or ""),
            owner=None,
            tick=0,
            first_message_id=repos.messages.newest_id(),
            now=now,
        )
        row.status, row.stopped_at = "imported", now
        row.goal_state = data.get("goal_state") or {}
        row.context = {
            "thread_id": row.thread_id,
            "responses": [
                {"tick": m.get("tick") or 0, "kind": m.get("kind"), "content": m.get("content") or ""}
                for m in messages
                if m.get("kind") in ("response", "step")
            ][-SEED_RESPONSES:],
            "compression": compression.get("content") if compression else None,
            "continuation": [
                {"kind": m.get("kind"), "role": m.get("role") or "user", "content": m.get("content") or ""}
                for m in after
                if m.get("kind") in ("continuation", "human")
            ][-20:],
            "goal_state": row.goal_state,
            "new_messages": 0,
            "imported": {
                "session": session.get("id"),
                "thread_id": session.get("thread_id"),
                "started_at": session.get("started_at"),
                "stopped_at": session.get("stopped_at"),
            },
        }
        return row.id
