"""People: the persona's humans and the contact requests that wait for the owner — managers/people.py is the one
implementation (the web page and the API are the operator's door: what they add the owner added)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from i18n import N_
from managers import ManagerFactory, Managers
from managers.audience import OWNER
from managers.errors import NotFound
from managers.people import PeopleError, RequestView
from web.errors import NotFoundError, ServiceError
from web.schemas.people import (
    ChannelState,
    ContactRequest,
    Forgotten,
    Group,
    GroupIn,
    PeopleOverview,
    Person,
    PersonIn,
    PersonUpdate,
    SetAside,
)

BY = "operator (web)"


def _person(house: Managers, person: Any) -> Person:
    return Person(**house.people.view(person).as_dict())


HELD_SHOWN = 2000  # characters of each held text on the page


def _request(view: RequestView) -> ContactRequest:
    r = view.request
    return ContactRequest(
        id=r.id,
        channel=r.channel,
        address=r.address,
        sender_name=r.sender_name,
        warning=r.warning or "",
        status=r.status,
        messages=r.messages or 0,
        requested_at=r.created_at.isoformat() if r.created_at else None,
        claims=view.claims.name if view.claims else None,
        claims_role=view.claims.role if view.claims else None,
        unverified=view.unverified,
        lookalike=view.lookalike,
        dropped=view.dropped,
        held=[text[:HELD_SHOWN] for text in view.held],
        can_accept=view.can_accept,
        can_vouch=view.can_vouch,
    )


def overview(house: Managers, settings: Any = None) -> PeopleOverview:
    configured = [e.name for e in settings.channels.entries] if settings is not None else []
    dropped, senders = house.people.dropped_before_requests()
    aside, aside_total = house.channels.set_aside()
    return PeopleOverview(
        people=[Person(**v.as_dict()) for v in house.people.list()],
        contact_requests=[_request(view) for view in house.people.request_views(None)],
        channels=channel_states(house, configured),
        dropped_messages=dropped,
        dropped_senders=senders,
        set_aside=[
            SetAside(
                channel=row.channel,
                sender=row.sender,
                reason=row.reason,
                received_at=row.received_at.isoformat() if row.received_at else None,
            )
            for row in aside
        ],
        set_aside_total=aside_total,
    )


def channel_states(house: Managers, configured: list[str]) -> list[ChannelState]:
    return [ChannelState(**s) for s in house.channels.states(configured)]


def get(house: Managers, person_id: int) -> Person:
    try:
        return _person(house, house.people.get(person_id))
    except NotFound:
        raise NotFoundError(N_("no person %(person_id)s"), person_id=person_id, field="person_id") from None


def add(managers: ManagerFactory, body: PersonIn, settings: Any = None) -> Person:
    try:
        with managers.unit(OWNER) as house:
            person = house.people.add(
                body.name,
                role=body.role,
                preferred_channel=body.preferred_channel,
                language=body.language,
                quiet_hours=body.quiet_hours,
                about=body.about,
                by=BY,
            )
            if body.channel and body.address:
                house.people.add_identity(person.id, body.channel, body.address)
            return _person(house, person)
    except PeopleError as exc:
        raise ServiceError(str(exc), status=409) from None


def update(managers: ManagerFactory, person_id: int, body: PersonUpdate, settings: Any = None) -> Person:
    changes = body.model_dump(exclude_unset=True, exclude={"channel", "address"})
    try:
        with managers.unit(OWNER) as house:
            house.people.get(person_id)
            person = house.people.update(person_id, by=BY, **changes)
            if body.channel and body.address:
                house.people.add_identity(person.id, body.channel, body.address)
            return _person(house, person)
    except NotFound:
        raise NotFoundError(N_("no person %(person_id)s"), person_id=person_id, field="person_id") from None
    except PeopleError as exc:
        raise ServiceError(str(exc), status=409) from None


def decide(
    managers: ManagerFactory,
    request_id: int,
    *,
    accept: bool | Literal["vouch"],
    now: datetime,
    name: str | None = None,
    role: str = "guest",
    settings: Any = None,
) -> ContactRequest:
    """Accept, refuse, or ("vouch") take in as the owner's own a request that claims the owner's address."""
    try:
        with managers.unit(OWNER) as house:
            if accept == "vouch":
                house.people.vouch(request_id, now=now)
            elif accept:
                house.people.accept(request_id, name=name, role=role, now=now)
            else:
                house.people.refuse(request_id, now=now)
            [view] = [v for v in house.people.request_views(None) if v.request.id == request_id]
            return _request(view)
    except NotFound:
        raise NotFoundError(
            N_("no contact request %(request_id)s"), request_id=request_id, field="request_id"
        ) from None
    except PeopleError as exc:
        raise ServiceError(str(exc), field="request_id", status=409) from None


def delete(managers: ManagerFactory, person_id: int, *, settings: Any, memory: Any = None) -> Forgotten:
    """Forget a person (managers/people.py `delete`), audited as the owner's act; then the stores beyond the unit:
    checkpoints, vectors, files (graph/forgetting.py)."""
    from graph.forgetting import finish_at

    try:
        with managers.unit(OWNER) as house:
            house.people.get(person_id)
            done = house.people.delete(person_id, by=BY)
            now = house.deps.clock()
            house.consent.record(
                thread_id="main",
                tick=0,
                cmd_key=f"human:users.delete:{now.isoformat()}",
                type="users.delete",
                effect="modify_self",
                decision="executed",
                actor="human",
                reason=f"my human's own request (web): {done.notes} note(s), {done.memories} memories",
                now=now,
            )
    except NotFound:
        raise NotFoundError(N_("no person %(person_id)s"), person_id=person_id, field="person_id") from None
    except PeopleError as exc:
        raise ServiceError(str(exc), field="person_id", status=409) from None
    anonymised = done.anonymised
    if anonymised is not None and anonymised.change is not None:
        finish_at(anonymised.change, db=managers.db, data_dir=settings.data_dir, memory=memory)
    return Forgotten(
        name=done.name,
        notes=done.notes,
        memories=done.memories,
        directory=done.directory,
        sources=done.sources,
        placeholders=anonymised.placeholders() if anonymised is not None else [],
    )


def groups(house: Managers) -> list[Group]:
    return [
        Group(name=g.name, description=g.description or "", members=[p.name for p in members])
        for g, members in house.people.groups()
    ]


def _group_change(managers: ManagerFactory, action: Any, *, status: int = 409) -> list[Group]:
    try:
        with managers.unit(OWNER) as house:
            action(house.people)
            return groups(house)
    except NotFound as exc:
        raise ServiceError(str(exc), status=404) from None
    except PeopleError as exc:
        raise ServiceError(str(exc), status=status) from None


def add_group(managers: ManagerFactory, body: GroupIn) -> list[Group]:
    return _group_change(managers, lambda people: people.add_group(body.name, body.description))


def delete_group(managers: ManagerFactory, name: str) -> list[Group]:
    return _group_change(managers, lambda people: people.delete_group(name))


def membership(managers: ManagerFactory, name: str, person_id: int, *, member: bool) -> list[Group]:
    return _group_change(
        managers, lambda people: people.join(person_id, name) if member else people.leave(person_id, name)
    )
