"""/api/peers: the personas and A2A agents this one knows (the owner adds and removes them here; the persona asks
with agents.add, which the owner approves); /api/mesh: the whole Mesh page as JSON."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path, Response

from managers import Managers
from web.api.responses import PERSONA, errors
from web.context import WebServices, get_services, unit_of_work
from web.schemas import MAX_ID
from web.schemas.mesh import (
    CredentialOut,
    IssuedCredentialOut,
    MeshView,
    OutgoingCredentialIn,
    PeerIn,
    PeerOut,
    PeerTagsIn,
)
from web.security import web_actor
from web.services import mesh

router = APIRouter(tags=["mesh"], responses=PERSONA)
NAME = Path(pattern=r"^[A-Za-z0-9_.:%-]{1,200}$", description="The peer's name (or DID).")


@router.get("/peers", response_model=list[PeerOut])
def list_peers(house: Managers = unit_of_work()) -> list[PeerOut]:
    return mesh.list_peers(house)


@router.post(
    "/peers",
    response_model=PeerOut,
    status_code=201,
    responses=errors(403, (409, "a peer of that name or DID is already known"), 422),
)
def add_peer(body: PeerIn, house: Managers = unit_of_work()) -> PeerOut:
    """Add a peer (the owner's act: no approval is asked)."""
    return mesh.add_peer(house, body)


@router.get("/peers/{name}", response_model=PeerOut, responses=errors((404, "no such peer"), 422))
def read_peer(name: str = NAME, house: Managers = unit_of_work()) -> PeerOut:
    return mesh.read_peer(house, name)


@router.put("/peers/{name}/tags", response_model=PeerOut, responses=errors(403, (404, "no such peer"), 422))
def tag_peer(body: PeerTagsIn, name: str = NAME, house: Managers = unit_of_work()) -> PeerOut:
    """The owner's tags on a peer, replacing the old ones (its own act: no approval is asked); `friend` makes it a
    friend of the distributed notes."""
    return mesh.tag_peer(house, name, body)


@router.delete(
    "/peers/{name}", status_code=204, response_class=Response, responses=errors(403, (404, "no such peer"), 422)
)
def remove_peer(
    name: str = NAME, house: Managers = unit_of_work(), services: WebServices = Depends(get_services)
) -> Response:
    mesh.remove_peer(house, name, services.settings())
    return Response(status_code=204)


@router.post(
    "/peers/{name}/credentials",
    response_model=IssuedCredentialOut,
    status_code=201,
    responses=errors(403, (404, "no such peer"), 422),
)
def issue_credential(
    name: str = NAME, house: Managers = unit_of_work(), services: WebServices = Depends(get_services)
) -> IssuedCredentialOut:
    """A new credential for the peer to call this persona's A2A endpoint with (it opens nothing else). Its token is in
    this answer and never again: only its hash is kept."""
    return mesh.issue_credential(house, name, web_actor(services.api_token))


@router.delete(
    "/peers/{name}/credentials", response_model=list[CredentialOut], responses=errors(403, (404, "no such peer"), 422)
)
def revoke_credentials(name: str = NAME, house: Managers = unit_of_work()) -> list[CredentialOut]:
    """Revoke every credential of the peer: none opens anything from now on."""
    return mesh.revoke_credentials(house, name)


@router.delete(
    "/peers/{name}/credentials/{credential_id}",
    response_model=list[CredentialOut],
    responses=errors(403, (404, "no such peer or credential"), 422),
)
def revoke_credential(
    name: str = NAME, credential_id: int = Path(ge=1, le=MAX_ID), house: Managers = unit_of_work()
) -> list[CredentialOut]:
    return mesh.revoke_credentials(house, name, credential_id)


@router.put(
    "/peers/{name}/outgoing-credential",
    status_code=204,
    response_class=Response,
    responses=errors(403, (404, "no such peer"), 422),
)
def set_outgoing_credential(
    body: OutgoingCredentialIn,
    name: str = NAME,
    house: Managers = unit_of_work(),
    services: WebServices = Depends(get_services),
) -> Response:
    """Keep the credential the peer issued to this persona: sent with its messages to that peer, kept as a secret
    (a 0600 file or sealed; never in the database, a page or an export)."""
    mesh.set_outgoing_credential(house, services.settings(), name, body.token)
    return Response(status_code=204)


@router.delete(
    "/peers/{name}/outgoing-credential",
    status_code=204,
    response_class=Response,
    responses=errors(403, (404, "no such peer"), 422),
)
def drop_outgoing_credential(
    name: str = NAME, house: Managers = unit_of_work(), services: WebServices = Depends(get_services)
) -> Response:
    mesh.set_outgoing_credential(house, services.settings(), name, None)
    return Response(status_code=204)


@router.get("/mesh", response_model=MeshView)
def read_mesh(house: Managers = unit_of_work()) -> MeshView:
    return mesh.view(house)
