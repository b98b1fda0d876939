"""/api/peers: the personas and A2A agents this one knows (the owner adds and removes them here; the persona asks
with agents.add, which the owner approves); /api/mesh: the whole Mesh page as JSON."""

from __future__ import annotations

from fastapi import APIRouter, Path, Response

from memory import Repos
from web.api.responses import PERSONA, errors
from web.context import unit_of_work
from web.schemas.mesh import MeshView, PeerIn, PeerOut, PeerTagsIn
from web.services import mesh

router = APIRouter(tags=["mesh"], responses=PERSONA)
NAME = Path(pattern=r"^[A-Za-z0-9_.:%-]{1,200}$", description="The peer's name (or DID).")


@router.get("/peers", response_model=list[PeerOut])
def list_peers(repos: Repos = unit_of_work()):
    return mesh.list_peers(repos)


@router.post("/peers", response_model=PeerOut, status_code=201,
             responses=errors(403, (409, "a peer of that name or DID is already known"), 422))
def add_peer(body: PeerIn, repos: Repos = unit_of_work()):
    """Add a peer (the owner's act: no approval is asked)."""
    return mesh.add_peer(repos, body)


@router.get("/peers/{name}", response_model=PeerOut, responses=errors((404, "no such peer"), 422))
def read_peer(name: str = NAME, repos: Repos = unit_of_work()):
    return mesh.read_peer(repos, name)


@router.put("/peers/{name}/tags", response_model=PeerOut, responses=errors(403, (404, "no such peer"), 422))
def tag_peer(body: PeerTagsIn, name: str = NAME, repos: Repos = unit_of_work()):
    """The owner's tags on a peer, replacing the old ones (its own act: no approval is asked); `friend` makes it a
    friend of the distributed notes."""
    return mesh.tag_peer(repos, name, body)


@router.delete("/peers/{name}", status_code=204, response_class=Response,
               responses=errors(403, (404, "no such peer"), 422))
def remove_peer(name: str = NAME, repos: Repos = unit_of_work()):
    mesh.remove_peer(repos, name)
    return Response(status_code=204)


@router.get("/mesh", response_model=MeshView)
def read_mesh(repos: Repos = unit_of_work()):
    return mesh.view(repos)
