"""The JSON API under /api, one router per resource (each over its service in web/services/), and its contract: the
OpenAPI at /openapi.json says what each route takes and every status it answers (web/api/responses.py), and the
routes take nothing else (no query parameter they do not declare)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.dependencies.models import Dependant

from web.api import (
    approvals,
    controls,
    events,
    inner_life,
    memory,
    peers,
    people,
    persona,
    personas,
    sessions,
    talk,
    thoughts,
)
from web.api.responses import EVERY_ROUTE
from web.errors import ServiceError

RESOURCES = (
    talk,
    thoughts,
    inner_life,
    memory,
    approvals,
    people,
    sessions,
    persona,
    controls,
    events,
    personas,
    peers,
)


def _query_names(dependant: Dependant) -> list[str]:
    """The query parameters a route takes: its own and its dependencies'."""
    names = [param.alias for param in dependant.query_params]
    for sub in dependant.dependencies:
        names += _query_names(sub)
    return names


def declared_query(request: Request) -> None:
    """A query parameter the route does not take is a 422 naming it (a misspelt `?limt=5` is not quietly ignored)."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None or not request.query_params:
        return
    known = set(_query_names(dependant))
    unknown = [name for name in request.query_params if name not in known]
    if unknown:
        takes = ", ".join(sorted(known)) or "none"
        raise ServiceError(
            f"unknown query parameter {unknown[0][:64]!r} (this route takes: {takes})",
            field=unknown[0][:64],
            status=422,
        )


def api_router() -> APIRouter:
    router = APIRouter(
        prefix="/api",
        responses=EVERY_ROUTE,  # 400, 401: any route may answer them
        dependencies=[Depends(declared_query)],
    )
    for resource in RESOURCES:
        router.include_router(resource.router)
    return router


def _never_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A parameter's schema without FastAPI's `anyOf: [T, null]` for an optional one: a query parameter, header or
    path part is absent or a value — never null (`?after_id=null` is the text "null", refused)."""
    branches = schema.get("anyOf")
    if not branches or {"type": "null"} not in branches:
        return schema
    rest = [branch for branch in branches if branch != {"type": "null"}]
    outer = {key: value for key, value in schema.items() if key != "anyOf" and not (key == "default" and value is None)}
    return {**rest[0], **outer} if len(rest) == 1 else {**outer, "anyOf": rest}


def install(app: FastAPI) -> None:
    """The API on `app`, its OpenAPI as the routes take it (parameters never null)."""
    app.include_router(api_router())
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            for item in build()["paths"].values():
                for operation in item.values():
                    for parameter in operation.get("parameters", []) if isinstance(operation, dict) else []:
                        parameter["schema"] = _never_null(parameter["schema"])
        assert app.openapi_schema is not None
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to amend the schema
