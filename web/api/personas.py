"""/api/personas: a deployment's personas; pause and resume one. Every other resource of a persona is under
/p/<name>/api/…"""

from __future__ import annotations

from fastapi import APIRouter, Path, Request
from fastapi.concurrency import run_in_threadpool

from web.api.responses import errors
from web.schemas.personas import PersonaEntry, PersonaList
from web.services import personas

router = APIRouter(tags=["personas"])
Name = Path(..., pattern=r"^[a-z][a-z0-9_]{0,39}$")
NOT_DEPLOYED = "the app serves one persona's data dir, not a deployment"
CHANGE = errors(403, (404, f"no such persona, or {NOT_DEPLOYED}"), 422, persona=False)


@router.get("/personas", response_model=PersonaList, responses=errors((404, NOT_DEPLOYED), persona=False))
async def list_personas(request: Request) -> PersonaList:
    """Every persona of the deployment (404 when the app serves one persona's data dir)."""
    return await run_in_threadpool(personas.personas, request.app.state.services)


@router.post("/personas/{name}/pause", response_model=PersonaEntry, responses=CHANGE)
async def pause_persona(request: Request, name: str = Name) -> PersonaEntry:
    """It stops thinking: its waiting jobs are cancelled and its session saved."""
    return await run_in_threadpool(personas.set_state, request.app.state.services, name, "paused")


@router.post("/personas/{name}/resume", response_model=PersonaEntry, responses=CHANGE)
async def resume_persona(request: Request, name: str = Name) -> PersonaEntry:
    """It thinks again, at once, on the first free worker."""
    return await run_in_threadpool(personas.set_state, request.app.state.services, name, "active")
