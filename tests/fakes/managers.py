"""Managers for unit tests: over a transaction the test holds, with the default settings unless it gives its own, and
the consent manager's answer and trust in a unit of their own (what a door does with its `ManagerFactory`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from managers import ManagerDeps, ManagerFactory, Managers
from managers.audience import ALONE, OWNER, Audience
from memory import Database, Repos
from memory.models import Approval, Taint
from persona.settings import Settings


def managers_over(repos: Repos, settings: Settings | None = None, *, actor: Audience = ALONE, **deps: Any) -> Managers:
    return Managers(repos, ManagerDeps(settings=settings if settings is not None else Settings(), **deps), actor=actor)


def factory(db: Database, settings: Settings | None = None, **deps: Any) -> ManagerFactory:
    return ManagerFactory(db, ManagerDeps(settings=settings if settings is not None else Settings(), **deps))


def answer(db: Database, approval_id: int, *, approve: bool, by: str, reason: str = "", now: datetime,
           settings: Settings | None = None) -> Approval:
    """The owner's answer to an approval, as a door gives it."""
    with factory(db, settings).unit(OWNER) as house:
        return house.consent.answer(approval_id, approve=approve, by=by, reason=reason, now=now)


def trust(db: Database, taint_id: int, *, by: str, reason: str = "", now: datetime) -> Taint:
    """The owner trusting a row written from untrusted text, as a door does it."""
    with factory(db).unit(OWNER) as house:
        return house.consent.trust(taint_id, by=by, reason=reason, now=now)
