"""/api/people: the persona's humans (owner, trusted, guests; identities per channel) and the contact requests that
wait for the owner. This is the operator's door: what is added here the owner added (the persona cannot add anyone
by itself: its `users.add` waits for approval)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path

from managers import Managers
from web.api.responses import PERSONA, errors
from web.context import WebServices, get_services, unit_of_work
from web.schemas import MAX_ID
from web.schemas.people import (
    AcceptIn,
    ContactRequest,
    Forgotten,
    Group,
    GroupIn,
    PeopleOverview,
    Person,
    PersonIn,
    PersonUpdate,
)
from web.services import people

router = APIRouter(tags=["people"], responses=PERSONA)
DECIDE = errors(403, (404, "no such contact request"), (409, "decided already"), 422)


@router.get("/people", response_model=PeopleOverview, responses=errors(422))
def list_people(services: WebServices = Depends(get_services), house: Managers = unit_of_work()) -> PeopleOverview:
    """Everyone the persona knows, the contact requests, and the channels' state."""
    return people.overview(house, services.settings())


@router.get("/people/{person_id}", response_model=Person, responses=errors((404, "no such person"), 422))
def read_person(person_id: int = Path(ge=1, le=MAX_ID), house: Managers = unit_of_work()) -> Person:
    return people.get(house, person_id)


@router.post(
    "/people",
    response_model=Person,
    status_code=201,
    responses=errors(403, (409, "refused: a name or identity taken, an owner made by the persona"), 422),
)
def add_person(body: PersonIn, services: WebServices = Depends(get_services)) -> Person:
    return people.add(services.managers, body, services.settings())


@router.patch(
    "/people/{person_id}",
    response_model=Person,
    responses=errors(403, (404, "no such person"), (409, "refused: the last owner, a taken identity"), 422),
)
def update_person(
    body: PersonUpdate, person_id: int = Path(ge=1, le=MAX_ID), services: WebServices = Depends(get_services)
) -> Person:
    return people.update(services.managers, person_id, body, services.settings())


@router.post("/people/requests/{request_id}/accept", response_model=ContactRequest, responses=DECIDE)
def accept_request(
    body: AcceptIn | None = None, request_id: int = Path(ge=1, le=MAX_ID), services: WebServices = Depends(get_services)
) -> ContactRequest:
    """The sender becomes a person (or an identity of `name`); their held messages become notes from them."""
    body = body or AcceptIn()
    return people.decide(
        services.managers,
        request_id,
        accept=True,
        now=services.clock(),
        name=body.name,
        role=body.role,
        settings=services.settings(),
    )


@router.post("/people/requests/{request_id}/vouch", response_model=ContactRequest, responses=DECIDE)
def vouch_request(
    request_id: int = Path(ge=1, le=MAX_ID), services: WebServices = Depends(get_services)
) -> ContactRequest:
    """It was you: mail that claims your own address but failed authentication becomes your notes (only a request
    that claims the owner's address; 409 otherwise)."""
    return people.decide(
        services.managers, request_id, accept="vouch", now=services.clock(), settings=services.settings()
    )


@router.post("/people/requests/{request_id}/refuse", response_model=ContactRequest, responses=DECIDE)
def refuse_request(
    request_id: int = Path(ge=1, le=MAX_ID), services: WebServices = Depends(get_services)
) -> ContactRequest:
    """The held messages are deleted; later ones from that sender are dropped."""
    return people.decide(
        services.managers, request_id, accept=False, now=services.clock(), settings=services.settings()
    )


@router.delete(
    "/people/{person_id}",
    response_model=Forgotten,
    responses=errors(403, (404, "no such person"), (409, "refused: the last owner"), 422),
)
def delete_person(person_id: int = Path(ge=1, le=MAX_ID), services: WebServices = Depends(get_services)) -> Forgotten:
    """Forget a person: their notes and conversation deleted for good, their name a placeholder everywhere else in
    memory (the owner's `run.py memory deanonymise` brings the name back; their words do not come back)."""
    return people.delete(services.managers, person_id, settings=services.settings(), memory=services.memory)


@router.get("/groups", response_model=list[Group], responses=errors(422))
def list_groups(house: Managers = unit_of_work()) -> list[Group]:
    """The groups of the persona's humans (HMP users_group) and who is in each."""
    return people.groups(house)


@router.post(
    "/groups",
    response_model=list[Group],
    status_code=201,
    responses=errors(403, (409, "a group with that name exists"), 422),
)
def add_group(body: GroupIn, services: WebServices = Depends(get_services)) -> list[Group]:
    return people.add_group(services.managers, body)


@router.delete("/groups/{name}", response_model=list[Group], responses=errors(403, (404, "no such group"), 422))
def delete_group(
    name: str = Path(min_length=1, max_length=120), services: WebServices = Depends(get_services)
) -> list[Group]:
    """The group goes; its members stay."""
    return people.delete_group(services.managers, name)


@router.put(
    "/groups/{name}/members/{person_id}",
    response_model=list[Group],
    responses=errors(403, (404, "no such group or person"), 422),
)
def join_group(
    name: str = Path(min_length=1, max_length=120),
    person_id: int = Path(ge=1, le=MAX_ID),
    services: WebServices = Depends(get_services),
) -> list[Group]:
    return people.membership(services.managers, name, person_id, member=True)


@router.delete(
    "/groups/{name}/members/{person_id}",
    response_model=list[Group],
    responses=errors(403, (404, "no such group or person"), 422),
)
def leave_group(
    name: str = Path(min_length=1, max_length=120),
    person_id: int = Path(ge=1, le=MAX_ID),
    services: WebServices = Depends(get_services),
) -> list[Group]:
    return people.membership(services.managers, name, person_id, member=False)
