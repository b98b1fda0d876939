"""The personas of a deployment: who is thinking, where it last thought; open any of them."""

from __future__ import annotations

from fastapi import APIRouter, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse

from web.services import personas
from web.templating import render

router = APIRouter()
Name = Path(..., pattern=r"^[a-z][a-z0-9_]{0,39}$")


@router.get("/personas")
async def personas_page(request: Request) -> HTMLResponse:
    listing = await run_in_threadpool(personas.personas, request.app.state.services)
    return render(request, "pages/personas.html", "personas", listing=listing)


@router.get("/personas/table")
async def personas_table(request: Request) -> HTMLResponse:
    listing = await run_in_threadpool(personas.personas, request.app.state.services)
    return render(request, "fragments/persona_table.html", listing=listing)


@router.post("/personas/{name}/{verb}")
async def change_persona(
    request: Request, verb: str = Path(..., pattern="^(pause|resume)$"), name: str = Name
) -> HTMLResponse:
    await run_in_threadpool(
        personas.set_state, request.app.state.services, name, "active" if verb == "resume" else "paused"
    )
    listing = await run_in_threadpool(personas.personas, request.app.state.services)
    return render(request, "fragments/persona_table.html", listing=listing)
