"""Every error is JSON naming the field (`{"error", "field", "status"}`); on a page (htmx request) the same message
comes back as a fragment the page shows in place."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from markupsafe import escape
from starlette.exceptions import HTTPException


class ServiceError(Exception):
    """A request the service layer refuses: a message for the human, the field it is about, an HTTP status."""

    def __init__(self, message: str, *, field: str | None = None, status: int = 400):
        super().__init__(message)
        self.message, self.field, self.status = message, field, status


class NotFoundError(ServiceError):
    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message, field=field, status=404)


def _respond(request: Request, status: int, message: str, field: str | None):
    if request.headers.get("hx-request") and not request.url.path.startswith("/api/"):
        where = f"<b>{escape(field)}</b>: " if field else ""
        return HTMLResponse(f'<p class="error" role="alert">{where}{escape(message)}</p>', status_code=status)
    return JSONResponse({"error": message, "field": field, "status": status}, status_code=status)


def _field(loc) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header", "cookie", "form")]
    return ".".join(parts) or ".".join(map(str, loc))


def install(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def service_error(request: Request, exc: ServiceError):
        return _respond(request, exc.status, exc.message, exc.field)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError):
        errors = exc.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        field = _field(first.get("loc", ()))
        message = "; ".join(f"{_field(e.get('loc', ()))}: {e.get('msg')}" for e in errors[:5])
        return _respond(request, 422, message, field)

    @app.exception_handler(OverflowError)
    async def number_out_of_range(request: Request, exc: OverflowError):  # a number past what the database holds
        return _respond(request, 422, f"a number is out of range ({exc})", None)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):
        return _respond(request, exc.status_code, str(exc.detail), None)
