"""Sessions: every run of a loop (managers/sessions.py), exported as JSON or a Markdown transcript, and revived —
"resume" here means what `run.py sessions revive` does: a new thread seeded with the session's last thoughts, on
which the loop then runs (the web starts no loop; it names the command). A session exported from another data dir
is imported first (Epos's resurrection), then revived the same way."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from graph.reports import session_row
from i18n import N_
from managers import ManagerFactory, Managers
from managers.audience import OWNER
from managers.sessions import SessionView, trace_csv, trace_jsonl
from persona.yaml_lines import parse_json
from web.errors import NotFoundError, ServiceError
from web.schemas.sessions import Revived, Session, SessionDetail, SessionExport, SessionList

EXPORT_LIMIT = 20 * 1024 * 1024  # an uploaded export
EXPORT_TYPES = ("application/json", "text/json")


def listing(house: Managers, limit: int = 50) -> SessionList:
    return SessionList(items=[Session(**session_row(s)) for s in house.sessions.listing(limit)])


def _row(house: Managers, session_id: int) -> SessionView:
    row = house.sessions.get(session_id)
    if row is None:
        raise NotFoundError(N_("no session %(session_id)s"), session_id=session_id, field="session_id")
    return row


def detail(house: Managers, session_id: int) -> SessionDetail:
    row = _row(house, session_id)
    revived = house.sessions.revived_as(session_id)
    thoughts = [r.get("content", "") for r in (row.context or {}).get("responses", [])]
    return SessionDetail(
        **session_row(row), goal_state=row.goal_state or {}, last_thoughts=thoughts[-5:], revived_as=revived
    )


def export(house: Managers, session_id: int, fmt: str) -> tuple[bytes, str, str]:
    """(body, file name, media type)."""
    _row(house, session_id)
    data, markdown = house.sessions.export(session_id)
    if fmt == "md":
        return markdown.encode("utf-8"), f"session-{session_id}.md", "text/markdown; charset=utf-8"
    if fmt == "csv":
        return trace_csv(data).encode("utf-8"), f"session-{session_id}.csv", "text/csv; charset=utf-8"
    if fmt == "jsonl":
        return trace_jsonl(data).encode("utf-8"), f"session-{session_id}.jsonl", "application/x-ndjson"
    return (
        json.dumps(data, indent=2, ensure_ascii=False).encode("utf-8"),
        f"session-{session_id}.json",
        "application/json",
    )


def _revived(house: Managers, session_id: int, thread_id: str) -> Revived:
    playbook = _row(house, session_id).playbook or "repl"
    return Revived(
        session_id=session_id,
        thread_id=thread_id,
        playbook=playbook,
        command=f"python run.py --playbook {playbook} --thread {thread_id}",
    )


def revive(house: Managers, session_id: int, now: datetime) -> Revived:
    _row(house, session_id)
    try:
        thread_id = house.sessions.revive(session_id, now)
    except ValueError as exc:
        raise ServiceError(str(exc), field="session_id", status=409) from None
    return _revived(house, session_id, thread_id)


def parse_export(raw: bytes) -> SessionExport:
    """An uploaded export, checked: JSON, and the shape `SessionManager.export` writes."""
    try:
        data: Any = parse_json(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ServiceError(N_("not a session export (JSON): %(exc)s"), exc=exc, field="file", status=422) from None
    try:
        return SessionExport.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ServiceError(f"not a session export: {where}: {first['msg']}", field="file", status=422) from None


def revive_export(house: Managers, export_data: SessionExport, now: datetime) -> Revived:
    sessions = house.sessions
    session_id = sessions.adopt_export(export_data.model_dump(), now)
    return _revived(house, session_id, sessions.revive(session_id, now))


def revive_upload(managers: ManagerFactory, raw: bytes, now: datetime) -> Revived:
    parsed = parse_export(raw)
    with managers.unit(OWNER) as house:
        return revive_export(house, parsed, now)
