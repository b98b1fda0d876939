"""Managers for unit tests: over a transaction the test holds, with the default settings unless it gives its own, and
the consent manager's answer and trust in a unit of their own (what a door does with its `ManagerFactory`)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from managers import ManagerDeps, ManagerFactory, Managers
from managers.audience import ALONE, OWNER, Audience
from managers.consent import ApprovalView, TaintView
from memory import Database, Repos
from persona.settings import Overrides, Settings, stored_settings


def managers_over(repos: Repos, settings: Settings | None = None, *, actor: Audience = ALONE, **deps: Any) -> Managers:
    return Managers(repos, ManagerDeps(settings=settings if settings is not None else Settings(), **deps), actor=actor)


def factory(db: Database, settings: Settings | None = None, **deps: Any) -> ManagerFactory:
    return ManagerFactory(db, ManagerDeps(settings=settings if settings is not None else Settings(), **deps))


def door_settings(db: Database) -> Settings:
    """The settings of the persona a test's database belongs to, as a door reads them (its data dir's)."""
    where = Path(db.engine.url.database or "") if db.engine.dialect.name == "sqlite" else None
    return stored_settings(db, Overrides.of(data_dir=str(where.parent) if where is not None else None))


def answer(
    db: Database,
    approval_id: int,
    *,
    approve: bool,
    by: str,
    reason: str = "",
    now: datetime,
    settings: Settings | None = None,
) -> ApprovalView:
    """The owner's answer to an approval, as a door gives it."""
    with factory(db, settings or door_settings(db)).unit(OWNER) as house:
        return house.consent.answer(approval_id, approve=approve, by=by, reason=reason, now=now)


def trust(db: Database, taint_id: int, *, by: str, reason: str = "", now: datetime) -> TaintView:
    """The owner trusting a row written from untrusted text, as a door does it."""
    with factory(db, door_settings(db)).unit(OWNER) as house:
        return house.consent.trust(taint_id, by=by, reason=reason, now=now)
