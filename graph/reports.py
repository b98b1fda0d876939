"""The reports `run.py inspect`, `sessions` and `approvals` print (and the web app shows): built by the managers
(managers/reports.py); here the validators' metrics (nodes/reflexes/validation.py) are joined in."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from managers import Managers
from managers.reports import approval_row, audit_row, iso, session_row, taint_row
from nodes.reflexes.validation import validator_metrics


def inspect_report(house: Managers, now: datetime, limit: int, database_url: str) -> dict[str, Any]:
    """Ticks, threads, notes, responses with their reflex fields, anti-stagnation metrics, the validators' metrics
    (coverage, accuracy, response time, drift), commands, LLM use, memory, drives, dreams, goals, tasks, sessions,
    approvals and the audit log."""
    return house.reports.inspect(now, limit, database_url, validation=validator_metrics)


__all__ = ["approval_row", "audit_row", "inspect_report", "iso", "session_row", "taint_row"]
