"""Approvals: what waits for the human's consent, what was decided and what came of it, and the decision itself —
`ConsentManager.answer` (managers/consent.py), the one implementation every door uses (audit log entry, the denial
in the persona's next prompt; an idle loop wakes on the decision)."""

from __future__ import annotations

from datetime import datetime

from graph.reports import approval_row, audit_row, taint_row
from i18n import N_
from managers import ManagerFactory, Managers
from managers.audience import OWNER
from managers.consent import ApprovalError
from web.errors import NotFoundError, ServiceError
from web.schemas.approvals import (
    Approval,
    ApprovalDetail,
    ApprovalList,
    ApprovalsOverview,
    AuditEntry,
    TaintedList,
    TaintedRow,
)

DECIDED_BY = "owner (web)"  # the default of a caller that does not say more (web/security.py web_actor says more)


def listing(house: Managers, status: str | None = "pending", limit: int = 50) -> ApprovalList:
    consent = house.consent
    return ApprovalList(
        items=[Approval(**approval_row(a)) for a in consent.listing(status, limit)], pending=len(consent.pending())
    )


def overview(house: Managers, limit: int = 20) -> ApprovalsOverview:
    consent = house.consent
    return ApprovalsOverview(
        pending=[Approval(**approval_row(a)) for a in consent.pending()],
        tainted=[TaintedRow(**taint_row(t, text)) for t, text in consent.tainted(limit)],
        recent=[Approval(**approval_row(a)) for a in consent.decided(limit)],
        audit=[AuditEntry(**audit_row(e)) for e in reversed(consent.audit_log(limit * 3))],
    )


def detail(house: Managers, approval_id: int) -> ApprovalDetail:
    consent = house.consent
    row = consent.get(approval_id)
    if row is None:
        raise NotFoundError(N_("no approval %(approval_id)s"), approval_id=approval_id, field="approval_id")
    return ApprovalDetail(
        **approval_row(row), audit=[AuditEntry(**audit_row(e)) for e in consent.audit_of(approval_id)]
    )


def decide(
    managers: ManagerFactory, approval_id: int, *, approve: bool, reason: str, now: datetime, by: str = DECIDED_BY
) -> ApprovalDetail:
    """Approve (it runs once, at the persona's next tick) or deny (never runs; the persona is told why).
    404 when there is no such approval, 409 when it was decided already."""
    with managers.unit(OWNER) as house:
        if house.consent.get(approval_id) is None:
            raise NotFoundError(N_("no approval %(approval_id)s"), approval_id=approval_id, field="approval_id")
    try:
        with managers.unit(OWNER) as house:
            house.consent.answer(approval_id, approve=approve, by=by, reason=reason.strip(), now=now)
    except ApprovalError as exc:
        raise ServiceError(N_("%(exc)s (it was decided already)"), exc=exc, field="approval_id", status=409) from None
    with managers.unit(OWNER) as house:
        return detail(house, approval_id)


def tainted(house: Managers, limit: int = 50) -> TaintedList:
    consent = house.consent
    return TaintedList(
        items=[TaintedRow(**taint_row(t, text)) for t, text in consent.tainted(limit)], count=consent.tainted_count()
    )


def trust(managers: ManagerFactory, taint_id: int, *, reason: str, now: datetime, by: str = DECIDED_BY) -> TaintedRow:
    """The owner trusts a row written from untrusted text (audited): from the next tick it is shown as the persona's
    own. 404 when there is no such row, 409 when it was trusted already."""
    with managers.unit(OWNER) as house:
        if house.consent.taint(taint_id) is None:
            raise NotFoundError(N_("no tainted row %(taint_id)s"), taint_id=taint_id, field="taint_id")
    try:
        with managers.unit(OWNER) as house:
            row = house.consent.trust(taint_id, by=by, reason=reason.strip(), now=now)
            shown = house.consent.taint(row.id)
            assert shown is not None  # just trusted in this unit
            return TaintedRow(**taint_row(*shown))
    except ApprovalError as exc:
        raise ServiceError(N_("%(exc)s (it was trusted already)"), exc=exc, field="taint_id", status=409) from None
