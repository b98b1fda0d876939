"""The server-rendered pages, one router per page (each over the same services as the API); `live` streams
their HTML fragments over Server-Sent Events."""

from fastapi import APIRouter

from web.pages import (
    approvals,
    controls,
    inner_life,
    language,
    live,
    memory,
    mesh,
    people,
    persona,
    personas,
    sessions,
    talk,
    thoughts,
)

PAGES = (
    talk,
    thoughts,
    inner_life,
    memory,
    approvals,
    people,
    sessions,
    persona,
    controls,
    live,
    personas,
    mesh,
    language,
)


def page_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)
    for page in PAGES:
        router.include_router(page.router)
    return router
