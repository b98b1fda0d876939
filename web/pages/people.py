"""People: who the persona knows (role, identities per channel, language, quiet hours), add or change one, and the
contact requests from unknown senders that wait for the owner."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Form, Path, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError

from managers.audience import OWNER
from web.context import WebServices, get_services
from web.errors import ServiceError
from web.schemas import MAX_ID
from web.schemas.people import PersonIn
from web.services import people
from web.templating import render

router = APIRouter()


def _overview(request: Request, services: WebServices) -> HTMLResponse:
    with services.managers.unit(OWNER) as house:
        overview = people.overview(house, services.settings())
    return render(request, "fragments/people_overview.html", overview=overview)


@router.get("/people")
def people_page(request: Request, services: WebServices = Depends(get_services)) -> HTMLResponse:
    with services.managers.unit(OWNER) as house:
        overview = people.overview(house, services.settings())
    return render(request, "pages/people.html", "people", overview=overview)


@router.post("/people")
def add_person(
    request: Request,
    name: str = Form(..., max_length=120),
    role: str = Form("guest", max_length=16),
    channel: str = Form("", max_length=64),
    address: str = Form("", max_length=300),
    language: str = Form("", max_length=16),
    quiet_hours: str = Form("", max_length=16),
    services: WebServices = Depends(get_services),
) -> HTMLResponse:
    try:
        body = PersonIn(
            name=name,
            role=role,
            channel=channel or None,
            address=address or None,
            language=language or None,
            quiet_hours=quiet_hours or None,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ServiceError(str(first.get("msg")), field=str(first.get("loc", ["?"])[0]), status=422) from None
    people.add(services.managers, body, services.settings())
    return _overview(request, services)


@router.post("/people/requests/{request_id}/accept")
def accept(
    request: Request, request_id: int = Path(ge=1, le=MAX_ID), services: WebServices = Depends(get_services)
) -> HTMLResponse:
    people.decide(services.managers, request_id, accept=True, now=services.clock(), settings=services.settings())
    return _overview(request, services)


@router.post("/people/requests/{request_id}/refuse")
def refuse(
    request: Request, request_id: int = Path(ge=1, le=MAX_ID), services: WebServices = Depends(get_services)
) -> HTMLResponse:
    people.decide(services.managers, request_id, accept=False, now=services.clock(), settings=services.settings())
    return _overview(request, services)


@router.post("/people/requests/{request_id}/vouch")
def vouch(
    request: Request, request_id: int = Path(ge=1, le=MAX_ID), services: WebServices = Depends(get_services)
) -> HTMLResponse:
    people.decide(services.managers, request_id, accept="vouch", now=services.clock(), settings=services.settings())
    return _overview(request, services)


@router.post("/people/{person_id}/delete")
def delete_person(
    request: Request, person_id: int = Path(ge=1, le=MAX_ID), services: WebServices = Depends(get_services)
) -> HTMLResponse:
    people.delete(services.managers, person_id, settings=services.settings(), memory=services.memory)
    return _overview(request, services)
