"""The personas of a deployment, for its web app: list them, pause and resume one (the registry, graph/fleet/)."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from managers.errors import NotFound
from web.context import DeploymentServices, WebServices
from web.errors import ServiceError
from web.schemas.personas import PersonaEntry, PersonaList

if TYPE_CHECKING:
    from graph.fleet.personas import PersonaRow


def _deployment(services: WebServices | DeploymentServices) -> DeploymentServices:
    if not isinstance(services, DeploymentServices):
        raise ServiceError(
            "this app serves one persona (a data dir): a deployment of many is served by "
            "`run.py serve --db postgresql://…`",
            field="persona",
            status=404,
        )
    return services


def _entry(row: PersonaRow) -> PersonaEntry:
    return PersonaEntry(**asdict(row), url=f"/p/{row.name}/")


def personas(services: WebServices | DeploymentServices) -> PersonaList:
    return PersonaList(personas=[_entry(row) for row in _deployment(services).deployment.rows()])


def set_state(services: WebServices | DeploymentServices, name: str, state: str) -> PersonaEntry:
    deployment = _deployment(services).deployment
    try:
        row = deployment.resume(name) if state == "active" else deployment.pause(name)
    except NotFound as exc:
        raise ServiceError(str(exc), field="name", status=404) from None
    return _entry(row)
