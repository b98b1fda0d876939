"""The errors the API answers, documented once: every error is `ErrorOut` (web/errors.py writes it), and each route
lists the statuses it really can answer (`errors(...)`), so /openapi.json is the whole contract (schemathesis checks
it: tests/integration/test_web_api_fuzz.py).

Every /api route may answer 400 (a Host the app does not answer to: web/security.py `HostGuard`) and 401 (the app is
served with a token the request does not carry): `EVERY_ROUTE`, on the /api router. A route that serves one persona
(web/context.py `get_services`) may answer 404 (over a deployment: no such persona): `PERSONA`, on the routers whose
every route does. A state-changing route (POST, PUT, PATCH, DELETE) may also answer 403 (a cross-site request, or a
browser's without the page's CSRF header) and lists it; a route with parameters or a body lists 422."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ErrorOut(BaseModel):
    """An error: the message for the human, the field it is about (a parameter, a body field, `file`), the status."""

    error: str
    field: str | None = Field(description="The parameter or body field at fault, when there is one.")
    status: int


REASONS: dict[int, str] = {
    400: "a Host the app does not answer to (it answers to the names it is served as)",
    401: "the app is served with a token (ANIMA_API_TOKEN) and the request does not carry it",
    403: "a cross-site request, or a browser's without the page's X-CSRF-Token header",
    404: "no such persona (a deployment serves each one under /p/<name>/api/…)",
    405: "not done to this tier",
    409: "it conflicts with the resource's state",
    411: "an upload without a Content-Length",
    413: "the upload is too large",
    415: "the upload is not of a type taken here",
    422: "a parameter or the body is invalid (the message names the field)",
}


def errors(*statuses: int | tuple[int, str], persona: bool = True) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route: each status plain (its usual reason) or `(status, "why here")`. A route's own 400
    or 404 keeps the shared reason too (a foreign Host; no such persona, unless `persona=False`: the route serves no
    one persona)."""
    documented: dict[int | str, dict[str, Any]] = {}
    for item in statuses:
        status, why = item if isinstance(item, tuple) else (item, REASONS[item])
        if (status == 400 or (status == 404 and persona)) and why != REASONS[status]:
            why = f"{why}; or {REASONS[status]}"
        documented[status] = {"model": ErrorOut, "description": why}
    return documented


EVERY_ROUTE = errors(400, 401)
PERSONA = errors(404)
# an upload read by web/uploads.py (a multipart form's `file`, or the raw body); each route adds its 413, 415, 422
UPLOAD_ERRORS: tuple[int | tuple[int, str], ...] = ((400, "a malformed multipart body"), 403, 411)
