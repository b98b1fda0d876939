"""Every error is JSON naming the field (`{"error", "field", "status"}`); on a page (htmx request) the same message
comes back as a fragment the page shows in place."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from markupsafe import escape
from starlette.exceptions import HTTPException
from starlette.routing import Match

import i18n

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


class ServiceError(Exception):
    """A request the service layer refuses: a message for the human, the field it is about, an HTTP status.
    `values`: the message is a template marked with N_ (`N_("no approval %(approval_id)s"), approval_id=7`), shown
    in the request's language (the `web` catalogue) and filled in then; `message` is the English."""

    def __init__(self, message: str, *, field: str | None = None, status: int = 400, **values: Any):
        self.template, self.values = message, values
        filled = message % values if values else message
        super().__init__(filled)
        self.message, self.field, self.status = filled, field, status

    def for_people(self, request: Request) -> str:
        """The message in the request's language (the app's `language_of`, web/templating.py, set by create_app)."""
        language_of = getattr(request.app.state, "language_of", None)
        text = i18n.translations(language_of(request) if language_of else i18n.SOURCE, "web").gettext(self.template)
        try:
            return text % self.values if self.values else text
        except (KeyError, ValueError, TypeError):  # a translation that does not fit its values: the English
            return self.message


class NotFoundError(ServiceError):
    def __init__(self, message: str, *, field: str | None = None, **values: Any):
        super().__init__(message, field=field, status=404, **values)


def _respond(
    request: Request, status: int, message: str, field: str | None, headers: Mapping[str, str] | None = None
) -> Response:
    if request.headers.get("hx-request") and not request.url.path.startswith("/api/"):
        where = f"<b>{escape(field)}</b>: " if field else ""
        return HTMLResponse(
            f'<p class="error" role="alert">{where}{escape(message)}</p>', status_code=status, headers=headers
        )
    return JSONResponse({"error": message, "field": field, "status": status}, status_code=status, headers=headers)


def _allowed_methods(request: Request) -> str | None:
    """Every method some route answers at this path (Starlette's 405 names only the first route's)."""
    methods = [
        method
        for method in METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] == Match.FULL for route in request.app.router.routes
        )
    ]
    return ", ".join(methods) or None


def _field(loc: Sequence[int | str]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header", "cookie", "form")]
    return ".".join(parts) or ".".join(map(str, loc))


def install(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def service_error(request: Request, exc: ServiceError) -> Response:
        return _respond(request, exc.status, exc.for_people(request), exc.field)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        errors = exc.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        field = _field(first.get("loc", ()))
        message = "; ".join(f"{_field(e.get('loc', ()))}: {e.get('msg')}" for e in errors[:5])
        return _respond(request, 422, message, field)

    @app.exception_handler(OverflowError)
    async def number_out_of_range(
        request: Request, exc: OverflowError
    ) -> Response:  # a number past what the database holds
        return _respond(request, 422, f"a number is out of range ({exc})", None)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        headers = dict(exc.headers or {})
        if exc.status_code == 405 and (allowed := _allowed_methods(request)):
            headers["Allow"] = allowed  # RFC 9110: a 405 lists the methods the resource answers
        return _respond(request, exc.status_code, str(exc.detail), None, headers)
