"""The JSON API under /api, one router per resource (each over its service in web/services/)."""

from fastapi import APIRouter

from web.api import approvals, controls, events, inner_life, memory, persona, personas, sessions, talk, thoughts

RESOURCES = (talk, thoughts, inner_life, memory, approvals, sessions, persona, controls, events, personas)


def api_router() -> APIRouter:
    router = APIRouter(prefix="/api")
    for resource in RESOURCES:
        router.include_router(resource.router)
    return router
