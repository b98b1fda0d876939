"""Who may talk to the app. Bound to 127.0.0.1 by default; any other address needs `ANIMA_API_TOKEN`, and then every
request carries it (`Authorization: Bearer …`, or the cookie a browser gets from `/?token=…`). A state-changing
request from a browser must come from the app's own pages: same origin and the page's CSRF token in a header
(htmx sends it on every request); a cross-site form or fetch has neither.

Before all of that, `HostGuard` (around the whole app: pages, API, streams, /mcp, /static, /p/<name>/…) answers only
to the names the app is served as: localhost and the loopback addresses (any port), the `--host` it is bound to (or,
bound to 0.0.0.0, this machine's name and the address a client connected to), and the names in `--allowed-hosts` /
`ANIMA_ALLOWED_HOSTS` (a reverse proxy's public name). Any other Host is a 400: a page of another site whose name
was rebound to 127.0.0.1 (DNS rebinding) reads nothing and changes nothing. A stream (/api/events, /live/…), /mcp
and any websocket also refuse an Origin that is not one of those names on this port, whatever the method."""

from __future__ import annotations

import hmac
import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from fastapi import Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.datastructures import Headers
from starlette.middleware.base import RequestResponseEndpoint
from starlette.types import ASGIApp, Receive, Scope, Send

TOKEN_ENV = "ANIMA_API_TOKEN"
TOKEN_COOKIE = "anima_token"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
OPEN_PATHS = ("/static/",)  # vendored assets and the app's own CSS/JS: nothing private (the Host is checked still)
OPEN_DOCUMENTS = ("/.well-known/agent-card.json",)  # the A2A agent card (of any persona): public, as discovery needs
ALLOWED_HOSTS_ENV = "ANIMA_ALLOWED_HOSTS"
ALLOWED_HOSTS_FLAG = "--allowed-hosts"
WILDCARD_BINDS = ("", "0.0.0.0", "::", "[::]")
# the A2A endpoint (of any persona) checks its callers itself (web/a2a.py): a peer's credential opens it, the owner's
# token does not, and no peer's credential opens anything else
A2A_ENDPOINT = re.compile(r"^(?:/p/[^/]+)?/a2a/?$")
LIVE_PATHS = re.compile(r"^(?:/p/[^/]+)?/(?:api/events|live|mcp|a2a)(?:/|$)")  # streams, MCP and A2A, of any persona
DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}
_HOST = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9._-]+))(?::(?P<port>[0-9]{1,5}))?$")


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
        raise BindingError(
            f"refusing to serve on {host}: beyond this machine every request needs a token — set "
            f"{TOKEN_ENV} (e.g. `export {TOKEN_ENV}=$(openssl rand -hex 16)`) or bind to 127.0.0.1"
        )


# ---- the names the app answers to ------------------------------------------------------------------------------------


def _ip_address(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return None


def _normal(name: str) -> str:
    """A host name as compared: lower case, no trailing dot; an address in its canonical form, without brackets."""
    name = name.strip().strip("[]").lower().rstrip(".")
    address = _ip_address(name)
    return str(address) if address is not None else name


def parse_host(value: str) -> tuple[str, int | None] | None:
    """`name[:port]` or `[v6][:port]` (a Host header) → (normal name, port); None when it is not one."""
    found = _HOST.match(value.strip())
    if not found:
        return None
    v6, name, port = found.group("v6"), found.group("name"), found.group("port")
    if v6 is not None and not isinstance(_ip_address(v6), ipaddress.IPv6Address):
        return None
    if name is not None and not name.strip("."):
        return None
    port_number = int(port) if port else None
    if port_number is not None and not 0 < port_number < 65536:
        return None
    return _normal(v6 if v6 is not None else name), port_number


def split_hosts(value: str | Iterable[str] | None) -> list[str]:
    """`a.example, b.example` (commas or spaces), or a list of them."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) else list(value)
    return [part for item in items for part in re.split(r"[,\s]+", item) if part]


@dataclass(frozen=True)
class AllowedHosts:
    """The names the app answers to besides the loopback ones (always: localhost, 127.0.0.0/8, ::1, any port).
    `suffixes`: from `*.example.org` entries (any name under example.org)."""

    names: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()

    @classmethod
    def serving(cls, bind: str | None = None, extra: str | Iterable[str] | None = None) -> AllowedHosts:
        """The app bound to `bind` (its `--host`) with the `--allowed-hosts` entries `extra`. Bound to every address
        (0.0.0.0, ::), this machine's name joins (the address a client connected to is allowed as it comes). A bad
        entry is a BindingError: the app does not start."""
        names: set[str] = set()
        suffixes: list[str] = []
        if bind is not None and bind.strip() in WILDCARD_BINDS:
            for name in (socket.gethostname(), socket.getfqdn()):
                if name and parse_host(name):
                    names.add(_normal(name))
        elif bind:
            parsed = (_normal(bind), None) if _ip_address(bind) is not None else parse_host(bind)
            if parsed:
                names.add(parsed[0])
        for entry in split_hosts(extra):
            given = entry
            if "://" in entry:
                entry = urlsplit(entry).netloc
            if entry == "*":
                raise BindingError(
                    f"{ALLOWED_HOSTS_ENV}/{ALLOWED_HOSTS_FLAG}: '*' would let a page of any site that "
                    "rebinds its name to this machine use the app; name the hosts"
                )
            wildcard = entry.startswith("*.")
            parsed = parse_host(entry[2:] if wildcard else entry)
            if parsed is None or (wildcard and _ip_address(parsed[0]) is not None):
                raise BindingError(
                    f"{ALLOWED_HOSTS_ENV}/{ALLOWED_HOSTS_FLAG}: {given!r} is not a host name "
                    "(name, name:port, an address, or *.domain)"
                )
            if wildcard:
                suffixes.append("." + parsed[0])
            else:
                names.add(parsed[0])
        return cls(frozenset(names), tuple(dict.fromkeys(suffixes)))

    def allows(self, name: str, local: str | None = None) -> bool:
        """`name` (normal, from `parse_host`): loopback, listed, under a listed domain, or the very address this
        connection came in on (`local`: bound to 0.0.0.0, http://192.168.1.20:8765 from the LAN)."""
        address = _ip_address(name)
        if name == "localhost" or (address is not None and address.is_loopback):
            return True
        if name in self.names or any(name.endswith(suffix) for suffix in self.suffixes):
            return True
        return address is not None and local is not None and _ip_address(local) == address

    def describe(self) -> str:
        listed = sorted(f"[{n}]" if ":" in n else n for n in self.names if not (n == "localhost" or is_loopback(n)))
        return ", ".join(["localhost", "127.0.0.1", "[::1]", *listed, *(f"*{s}" for s in self.suffixes)])


def _local_address(scope: Scope) -> str | None:
    server = scope.get("server")
    return str(server[0]) if server else None


def _origin_is_here(origin: str, host: str, scope: Scope, allowed: AllowedHosts) -> bool:
    """Whether `origin` (an Origin or Referer) is a page of this app: the request's own Host, or another name the app
    answers to on the same port (http://localhost:8765 calling http://127.0.0.1:8765). Another port is another app."""
    try:
        parts = urlsplit(origin)
        origin_port = parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username is not None:
        return False
    here = parse_host(host)
    if here is None or not allowed.allows(_normal(parts.hostname), _local_address(scope)):
        return False
    if parts.netloc.lower() == host.strip().lower():
        return True
    return origin_port == (here[1] or DEFAULT_PORTS.get(scope.get("scheme", "http"), 80))


def host_refusal(host: str | None, allowed: AllowedHosts) -> str:
    shown = "no Host header" if host is None else repr(host[:100])
    parsed = parse_host(host) if host else None
    example = (f"[{parsed[0]}]" if ":" in parsed[0] else parsed[0]) if parsed else "anima.example.org"
    return (
        f"host not allowed: {shown} — this app answers to {allowed.describe()} (any port); serving it under "
        f"another name (a reverse proxy)? add it with {ALLOWED_HOSTS_FLAG} {example} or "
        f"{ALLOWED_HOSTS_ENV}={example}"
    )


class HostGuard:
    """ASGI middleware around the whole app (before the persona prefix, the token guard, /static and /mcp): a Host
    the app does not answer to is a 400, for every request and websocket; a foreign Origin on a stream, /mcp or a
    websocket is a 403 whatever the method (a state-changing request's Origin is the token guard's, with its CSRF)."""

    def __init__(self, app: ASGIApp, allowed: AllowedHosts | None = None) -> None:
        self.app, self.allowed = app, allowed or AllowedHosts()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        hosts = headers.getlist("host")
        host = hosts[0] if len(hosts) == 1 else None
        parsed = parse_host(host) if host is not None else None
        refusal = None
        if parsed is None or not self.allowed.allows(parsed[0], _local_address(scope)):
            refusal = _refuse(400, host_refusal(host if len(hosts) <= 1 else ", ".join(hosts), self.allowed))
        elif host is not None and (scope["type"] == "websocket" or LIVE_PATHS.match(scope.get("path", ""))):
            origin = headers.get("origin")
            if origin is not None and not _origin_is_here(origin, host, scope, self.allowed):
                refusal = _refuse(403, "cross-site request refused")
        if refusal is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "http":
            await refusal(scope, receive, send)
        elif "websocket.http.response" in scope.get("extensions", {}):
            await refusal(scope, receive, send)  # Starlette sends it as the websocket's denial response
        else:
            await send({"type": "websocket.close", "code": 1008})


# ---- the token and CSRF ----------------------------------------------------------------------------------------------


def same_secret(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


_same = same_secret


def web_actor(api_token: str | None) -> str:
    """Who acts through the web app's pages and API, as exactly as the app can tell (the audit log and the approvals
    keep it): the holder of its API token, or — an app without a token listens on this machine only — whoever uses
    it there. No peer's credential opens the app (web/a2a.py), so it is never a peer."""
    return "owner (web, API token)" if api_token else "owner (web, loopback)"


def presented_bearer(request: Request) -> str | None:
    """The `Authorization: Bearer …` token, if any."""
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip() or None
    return None


def _presented_token(request: Request) -> str | None:
    return presented_bearer(request) or request.cookies.get(TOKEN_COOKIE)


def _foreign_origin(request: Request) -> bool:
    origin = request.headers.get("origin") or request.headers.get("referer")
    if request.headers.get("sec-fetch-site") == "cross-site":
        return True
    if not origin or origin == "null":
        return origin == "null"
    allowed = getattr(request.app.state, "allowed_hosts", None) or AllowedHosts()
    return not _origin_is_here(origin, request.headers.get("host", ""), request.scope, allowed)


def _refuse(status: int, message: str) -> Response:
    return JSONResponse({"error": message, "field": None, "status": status}, status_code=status)


async def guard(request: Request, call_next: RequestResponseEndpoint) -> Response:
    services = request.app.state.services
    path = request.url.path
    if path.startswith(OPEN_PATHS) or (path.endswith(OPEN_DOCUMENTS) and request.method in SAFE_METHODS):
        return await call_next(request)
    if services.api_token and not A2A_ENDPOINT.match(path):
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
        # A2A authenticates by a bearer header, which no cross-site page can send (nor JSON without a preflight the
        # app never allows); A2A clients on fetch (node's) send Sec-Fetch-Mode without being a page of this app
        if (
            browser
            and not A2A_ENDPOINT.match(path)
            and not _same(request.headers.get(CSRF_HEADER, ""), services.csrf_token)
        ):
            return _refuse(403, f"missing or wrong {CSRF_HEADER} header (the app's pages send it)")
    return await call_next(request)
