"""Approvals: what waits for the human's consent (arguments, effect, why), approve or deny it with a reason; the
decided ones with what came of them, and the audit log."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Form, Path, Request
from fastapi.responses import HTMLResponse

from managers import Managers
from web.context import WebServices, get_services, unit_of_work
from web.errors import ServiceError
from web.schemas import MAX_ID
from web.schemas.approvals import NO_REASON
from web.security import web_actor
from web.services import approvals
from web.templating import render

router = APIRouter()


@router.get("/approvals")
def approvals_page(request: Request, house: Managers = unit_of_work()) -> HTMLResponse:
    return render(request, "pages/approvals.html", "approvals", overview=approvals.overview(house))


@router.get("/approvals/overview")
def approvals_overview(request: Request, house: Managers = unit_of_work()) -> HTMLResponse:
    return render(request, "fragments/approval_overview.html", overview=approvals.overview(house))


@router.post("/approvals/{approval_id}/approve")
def approve(
    request: Request,
    approval_id: int = Path(ge=1, le=MAX_ID),
    reason: str = Form("", max_length=2000),
    services: WebServices = Depends(get_services),
) -> HTMLResponse:
    item = approvals.decide(
        services.managers,
        approval_id,
        approve=True,
        reason=reason,
        now=services.clock(),
        by=web_actor(services.api_token),
    )
    return render(request, "fragments/approval_item.html", item=item)


@router.post("/tainted/{taint_id}/trust")
def trust(
    request: Request,
    taint_id: int = Path(ge=1, le=MAX_ID),
    reason: str = Form("", max_length=2000),
    services: WebServices = Depends(get_services),
) -> HTMLResponse:
    row = approvals.trust(services.managers, taint_id, reason=reason, now=services.clock())
    return render(request, "fragments/tainted_item.html", row=row)


@router.post("/approvals/{approval_id}/deny")
def deny(
    request: Request,
    approval_id: int = Path(ge=1, le=MAX_ID),
    reason: str = Form(..., max_length=2000),
    services: WebServices = Depends(get_services),
) -> HTMLResponse:
    if not reason.strip():
        raise ServiceError(NO_REASON, field="reason", status=422)
    item = approvals.decide(
        services.managers,
        approval_id,
        approve=False,
        reason=reason,
        now=services.clock(),
        by=web_actor(services.api_token),
    )
    return render(request, "fragments/approval_item.html", item=item)
