"""/api/approvals: the commands that wait for the human's consent; approve or deny them. /api/tainted: the rows
written from untrusted text; trust one."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Path, Query

from managers import Managers
from web.api.responses import PERSONA, errors
from web.context import WebServices, get_services, unit_of_work
from web.schemas import MAX_ID
from web.schemas.approvals import ApprovalDetail, ApprovalList, ApproveIn, DenyIn, TaintedList, TaintedRow, TrustIn
from web.security import web_actor
from web.services import approvals

router = APIRouter(tags=["approvals"], responses=PERSONA)
DECIDE = errors(403, (404, "no such approval"), (409, "decided already"), 422)


@router.get("/approvals", response_model=ApprovalList, responses=errors(422))
def list_approvals(
    status: Literal["pending", "approved", "denied", "expired", "executed", "failed", "all"] = Query("pending"),
    limit: int = Query(50, ge=1, le=500),
    house: Managers = unit_of_work(),
) -> ApprovalList:
    """Pending ones oldest first; any other status (or `all`) newest first."""
    return approvals.listing(house, None if status == "all" else status, limit)


@router.get("/approvals/{approval_id}", response_model=ApprovalDetail, responses=errors((404, "no such approval"), 422))
def read_approval(approval_id: int = Path(ge=1, le=MAX_ID), house: Managers = unit_of_work()) -> ApprovalDetail:
    """One approval with its trail in the audit log (requested, approved/denied, executed/failed)."""
    return approvals.detail(house, approval_id)


@router.post("/approvals/{approval_id}/approve", response_model=ApprovalDetail, responses=DECIDE)
def approve(
    body: ApproveIn | None = None,
    approval_id: int = Path(ge=1, le=MAX_ID),
    services: WebServices = Depends(get_services),
) -> ApprovalDetail:
    """It runs exactly once, at the persona's next tick."""
    return approvals.decide(
        services.managers,
        approval_id,
        approve=True,
        reason=(body or ApproveIn()).reason,
        now=services.clock(),
        by=web_actor(services.api_token),
    )


@router.post("/approvals/{approval_id}/deny", response_model=ApprovalDetail, responses=DECIDE)
def deny(
    body: DenyIn, approval_id: int = Path(ge=1, le=MAX_ID), services: WebServices = Depends(get_services)
) -> ApprovalDetail:
    """It never runs; the persona reads the denial and its reason in its next prompt."""
    return approvals.decide(
        services.managers,
        approval_id,
        approve=False,
        reason=body.reason,
        now=services.clock(),
        by=web_actor(services.api_token),
    )


@router.get("/tainted", response_model=TaintedList, responses=errors(422))
def list_tainted(limit: int = Query(50, ge=1, le=500), house: Managers = unit_of_work()) -> TaintedList:
    """Rows written from untrusted text (a guest's, a peer's, a feed's…), newest first, with where their words came
    from: fenced as data wherever a prompt shows them, and the ticks that show them are gated as if they had read
    that text."""
    return approvals.tainted(house, limit)


@router.post(
    "/tainted/{taint_id}/trust",
    response_model=TaintedRow,
    responses=errors(403, (404, "no such tainted row"), (409, "trusted already"), 422),
)
def trust(
    body: TrustIn | None = None, taint_id: int = Path(ge=1, le=MAX_ID), services: WebServices = Depends(get_services)
) -> TaintedRow:
    """Trust the row: from the next tick it is the persona's own (unfenced, gating nothing). Kept in the audit log."""
    return approvals.trust(
        services.managers,
        taint_id,
        reason=(body or TrustIn()).reason,
        now=services.clock(),
        by=web_actor(services.api_token),
    )
