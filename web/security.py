"""Who may talk to the app. Bound to 127.0.0.1 by default; any other address needs `ANIMA_API_TOKEN`, and then every
request carries it (`Authorization: Bearer …`, or the cookie a browser gets from `/?token=…`). A state-changing
request from a browser must come from the app's own pages: same origin and the page's CSRF token in a header
(htmx sends it on every request); a cross-site form or fetch has neither."""

from __future__ import annotations

import hmac
import ipaddress
from urllib.parse import urlsplit

from fastapi import Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

TOKEN_ENV = "ANIMA_API_TOKEN"
TOKEN_COOKIE = "anima_token"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
OPEN_PATHS = ("/static/",)  # vendored assets and the app's own CSS/JS: nothing private


class BindingError(RuntimeError):
    pass


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_binding(host: str, token: str | None) -> None:
    if not is_loopback(host) and not token:
        raise BindingError(f"refusing to serve on {host}: beyond this machine every request needs a token — set "
                           f"{TOKEN_ENV} (e.g. `export {TOKEN_ENV}=$(openssl rand -hex 16)`) or bind to 127.0.0.1")


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def _presented_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    return request.cookies.get(TOKEN_COOKIE)


def _foreign_origin(request: Request) -> bool:
    origin = request.headers.get("origin") or request.headers.get("referer")
    if request.headers.get("sec-fetch-site") == "cross-site":
        return True
    if not origin or origin == "null":
        return origin == "null"
    return urlsplit(origin).netloc != request.headers.get("host", "")


def _refuse(status: int, message: str) -> Response:
    return JSONResponse({"error": message, "field": None, "status": status}, status_code=status)


async def guard(request: Request, call_next):
    services = request.app.state.services
    path = request.url.path
    if path.startswith(OPEN_PATHS):
        return await call_next(request)
    if services.api_token:
        given = request.query_params.get("token")
        if given is not None and request.method == "GET" and _same(given, services.api_token):
            response = RedirectResponse(path, status_code=303)
            response.set_cookie(TOKEN_COOKIE, given, httponly=True, samesite="strict")
            return response
        presented = _presented_token(request)
        if presented is None or not _same(presented, services.api_token):
            return _refuse(401, f"this app needs its token: `Authorization: Bearer <{TOKEN_ENV}>`, or open /?token=…")
    if request.method not in SAFE_METHODS:
        browser = any(h in request.headers for h in ("origin", "sec-fetch-site", "sec-fetch-mode"))
        if _foreign_origin(request):
            return _refuse(403, "cross-site request refused")
        if browser and not _same(request.headers.get(CSRF_HEADER, ""), services.csrf_token):
            return _refuse(403, f"missing or wrong {CSRF_HEADER} header (the app's pages send it)")
    return await call_next(request)
