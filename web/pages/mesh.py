"""The Mesh page: peers and their trust over time, what was learned from whom, open consensus cases, refused
containers, the A2A outbox and what peers wrote; the owner adds and removes peers here."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse

from managers import Managers
from web.context import WebServices, get_services, unit_of_work
from web.errors import ServiceError
from web.schemas.mesh import PeerIn
from web.security import web_actor
from web.services import mesh
from web.templating import render

router = APIRouter()


@router.get("/mesh")
def mesh_page(request: Request, house: Managers = unit_of_work()) -> HTMLResponse:
    return render(
        request, "pages/mesh.html", "mesh", mesh=mesh.view(house), error=None, mesh_events=mesh.recent_events(house)
    )


@router.post("/mesh/peers")
def add_peer(
    request: Request,
    name: str = Form(..., max_length=120),
    a2a_url: str = Form("", max_length=500),
    note: str = Form("", max_length=2000),
    house: Managers = unit_of_work(),
) -> HTMLResponse:
    error = None
    try:
        mesh.add_peer(house, PeerIn(name=name.strip(), a2a_url=a2a_url.strip() or None, note=note))
    except ServiceError as exc:
        error = exc.message
    except ValueError as exc:  # the form's fields, checked as the API's body is
        error = str(exc).splitlines()[0] if str(exc) else "invalid peer"
    return render(request, "fragments/mesh_peers.html", mesh=mesh.view(house), error=error)


@router.post("/mesh/discovered/add")
def add_discovered(
    request: Request,
    did: str = Form(..., max_length=200),
    name: str = Form(..., max_length=120),
    house: Managers = unit_of_work(),
) -> HTMLResponse:
    """One click on a peer seen on the mesh: the owner adds it by its DID."""
    error = None
    try:
        mesh.add_discovered(house, did, name)
    except ServiceError as exc:
        error = exc.message
    except ValueError as exc:
        error = str(exc).splitlines()[0] if str(exc) else "invalid peer"
    return render(request, "fragments/mesh_peers.html", mesh=mesh.view(house), error=error)


@router.post("/mesh/peers/{name}/remove")
def remove_peer(
    request: Request, name: str, house: Managers = unit_of_work(), services: WebServices = Depends(get_services)
) -> HTMLResponse:
    mesh.remove_peer(house, name, services.settings())
    return render(request, "fragments/mesh_peers.html", mesh=mesh.view(house), error=None)


@router.post("/mesh/peers/{name}/credentials")
def issue_credential(
    request: Request, name: str, house: Managers = unit_of_work(), services: WebServices = Depends(get_services)
) -> HTMLResponse:
    """A credential for the peer, its token shown this once in the answer (never again, nowhere else)."""
    issued = mesh.issue_credential(house, name, web_actor(services.api_token))
    return render(
        request,
        "fragments/mesh_peers.html",
        mesh=mesh.view(house),
        error=None,
        issued={"name": name, "token": issued.token},
    )


@router.post("/mesh/peers/{name}/credentials/revoke")
def revoke_credentials(request: Request, name: str, house: Managers = unit_of_work()) -> HTMLResponse:
    mesh.revoke_credentials(house, name)
    return render(request, "fragments/mesh_peers.html", mesh=mesh.view(house), error=None)
