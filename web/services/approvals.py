"""Approvals: what waits for the human's consent, what was decided and what came of it, and the decision itself —
`ConsentManager.answer` (managers/consent.py), the one implementation every door uses (audit log entry, the denial
in the persona's next prompt; an idle loop wakes on the decision)."""

from __future__ import annotations

from datetime import datetime

from graph.reports import approval_row, audit_row, taint_row
from i18n import N_
from managers import Managers
from managers.consent import ApprovalError
from memory import Database, Repos
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


def listing(repos: Repos, status: str | None = "pending", limit: int = 50) -> ApprovalList:
    consent = Managers(repos).consent
    return ApprovalList(items=[Approval(**approval_row(a)) for a in consent.listing(status, limit)],
                        pending=len(consent.pending()))


def overview(repos: Repos, limit: int = 20) -> ApprovalsOverview:
    consent = Managers(repos).consent
    return ApprovalsOverview(pending=[Approval(**approval_row(a)) for a in consent.pending()],
                             tainted=[TaintedRow(**taint_row(t, text)) for t, text in consent.tainted(limit)],
                             recent=[Approval(**approval_row(a)) for a in consent.decided(limit)],
                             audit=[AuditEntry(**audit_row(e)) for e in reversed(consent.audit_log(limit * 3))])


def detail(repos: Repos, approval_id: int) -> ApprovalDetail:
    consent = Managers(repos).consent
    row = consent.get(approval_id)
    if row is None:
        raise NotFoundError(N_("no approval %(approval_id)s"), approval_id=approval_id, field="approval_id")
    return ApprovalDetail(**approval_row(row), audit=[AuditEntry(**audit_row(e)) for e in consent.audit_of(approval_id)])


def decide(db: Database, approval_id: int, *, approve: bool, reason: str, now: datetime,
           by: str = DECIDED_BY) -> ApprovalDetail:
    """Approve (it runs once, at the persona's next tick) or deny (never runs; the persona is told why).
    404 when there is no such approval, 409 when it was decided already."""
    with db.unit() as repos:
        if Managers(repos).consent.get(approval_id) is None:
            raise NotFoundError(N_("no approval %(approval_id)s"), approval_id=approval_id, field="approval_id")
    try:
        with db.unit() as repos:
            Managers(repos).consent.answer(approval_id, approve=approve, by=by, reason=reason.strip(), now=now)
    except ApprovalError as exc:
        raise ServiceError(N_("%(exc)s (it was decided already)"), exc=exc, field="approval_id", status=409) from None
    with db.unit() as repos:
        return detail(repos, approval_id)


def tainted(repos: Repos, limit: int = 50) -> TaintedList:
    consent = Managers(repos).consent
    return TaintedList(items=[TaintedRow(**taint_row(t, text)) for t, text in consent.tainted(limit)],
                       count=consent.tainted_count())


def trust(db: Database, taint_id: int, *, reason: str, now: datetime, by: str = DECIDED_BY) -> TaintedRow:
    """The owner trusts a row written from untrusted text (audited): from the next tick it is shown as the persona's
    own. 404 when there is no such row, 409 when it was trusted already."""
    with db.unit() as repos:
        if repos.taints.get(taint_id) is None:
            raise NotFoundError(N_("no tainted row %(taint_id)s"), taint_id=taint_id, field="taint_id")
    try:
        with db.unit(actor="human") as repos:
            row = Managers(repos).consent.trust(taint_id, by=by, reason=reason.strip(), now=now)
            return TaintedRow(**taint_row(row, repos.taints.row_text(row.tier, row.ref)))
    except ApprovalError as exc:
        raise ServiceError(N_("%(exc)s (it was trusted already)"), exc=exc, field="taint_id", status=409) from None
