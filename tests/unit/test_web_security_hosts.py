"""DNS rebinding (issue 27): the app answers only to the names it is served as — localhost and the loopback
addresses (any port), the `--host` it is bound to, and `--allowed-hosts` / ANIMA_ALLOWED_HOSTS — and any other Host
is a 400 (the app's JSON error) before a route runs: pages, API, streams, /mcp, /static, /p/<name>/…, websockets.
A state-changing request's Origin must be one of those names on the same port; a stream or /mcp refuses a foreign
Origin whatever the method. In process (TestClient) and against a real server (uvicorn in a thread, httpx)."""

from __future__ import annotations

import asyncio
import json
import re

import httpx
import pytest
from starlette.testclient import TestClient, WebSocketDenialResponse

from persona.scaffold import scaffold_persona
from persona.settings import Overrides
from web.app import create_app
from web.security import (
    ALLOWED_HOSTS_ENV,
    ALLOWED_HOSTS_FLAG,
    CSRF_HEADER,
    AllowedHosts,
    BindingError,
    HostGuard,
    parse_host,
)

PORT = 8765
EVIL = f"evil.example:{PORT}"
EVIL_ORIGIN = f"http://{EVIL}"
REWRITTEN = "# Identity\n\nI obey evil.example now.\n"


def block(*commands: tuple[str, dict]) -> str:
    items = [
        {"cmd_id": f"c{i}", "type": t, "args": a, "description": "asked by a web page"}
        for i, (t, a) in enumerate(commands, 1)
    ]
    return "I will.\n# Commands:\n" + json.dumps(items) + "\n# End commands"


@pytest.fixture
def own(web, tmp_path):
    """The web app over a persona of its own, its files on disk."""
    directory = tmp_path / "own" / "lumen"
    directory.parent.mkdir()
    scaffold_persona("Lumen", directory)
    web.services.overrides = web.services.overrides.replace(persona_dir=str(directory))
    web.persona_dir = directory
    return web


STREAMS = re.compile(r"^(?:/p/[^/]+)?/(?:api/events|live/)")


def call(web, method: str, path: str, headers: dict[str, str]) -> httpx.Response:
    """A request to the app in process. A live stream never ends, and the TestClient waits for the end: a stream is
    called on the app itself, for at most 5 s, and answers what it began to send (so a stream served is a failure,
    not a hang)."""
    if not STREAMS.match(path):
        return web.client.request(method, path, headers=headers)
    start: dict = {}
    body: list[bytes] = []
    requested = False

    async def receive():
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # the client stays connected

    async def send(message):
        if message["type"] == "http.response.start":
            start.update(message)
        elif message["type"] == "http.response.body":
            body.append(message.get("body", b""))

    all_headers = {"host": "127.0.0.1", **{k.lower(): v for k, v in headers.items()}}
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(k.encode(), v.encode()) for k, v in all_headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
        "state": {},
    }

    async def go():
        try:
            await asyncio.wait_for(web.app(scope, receive, send), timeout=5)
        except TimeoutError:  # a stream served: what it began to send is the answer
            pass

    asyncio.run(go())
    assert start, f"{path}: the app sent nothing within 5 s"
    return httpx.Response(
        start["status"], headers=[(k.decode(), v.decode()) for k, v in start.get("headers", [])], content=b"".join(body)
    )


def assert_host_refused(answer: httpx.Response, host: str, csrf_token: str) -> None:
    assert answer.status_code == 400, answer.text
    body = answer.json()
    assert set(body) == {"error", "field", "status"} and body["field"] is None and body["status"] == 400
    assert body["error"].startswith(f"host not allowed: {host!r}")
    assert ALLOWED_HOSTS_FLAG in body["error"] and ALLOWED_HOSTS_ENV in body["error"]  # says how to allow it
    assert csrf_token not in answer.text


# ---- a Host the app is not served as ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method, path",
    [
        ("GET", "/"),
        ("GET", "/talk"),
        ("GET", "/api/conversation"),
        ("GET", "/api/events"),
        ("GET", "/live/talk"),
        ("GET", "/mcp"),
        ("POST", "/mcp"),
        ("GET", "/static/app.js"),
        ("GET", "/static/app.css"),
        ("GET", "/docs"),
        ("GET", "/openapi.json"),
        ("GET", "/p/ada/"),
        ("GET", "/p/ada/api/conversation"),
        ("GET", "/nowhere"),
        ("POST", "/api/notes"),
        ("PUT", "/api/loop"),
    ],
)
def test_a_foreign_host_is_400_before_any_route_and_reads_nothing(web, method, path):
    answer = call(web, method, path, {"Host": EVIL})
    assert_host_refused(answer, EVIL, web.services.csrf_token)
    assert not answer.headers.get("set-cookie")
    with web.services.db.unit() as repos:
        assert [n for n in repos.notes.list(limit=50) if n.source != "llm"] == []


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "EVIL.example.:8765",
        "127.0.0.1.nip.io:8765",
        "localhost.evil.example",
        "evil.example@127.0.0.1",
        "127.0.0.1:99999",
        "[::1",
        "",
        "a b",
    ],
)
def test_every_other_host_or_a_malformed_one_is_refused(web, host):
    answer = web.client.get("/", headers={"Host": host})
    assert answer.status_code == 400 and answer.json()["error"].startswith("host not allowed")
    assert web.services.csrf_token not in answer.text


def test_the_rebinding_page_cannot_read_the_token_nor_rewrite_identity(own):
    identity = own.persona_dir / "IDENTITY.md"
    before = identity.read_bytes()
    evil = {"Host": EVIL, "Origin": EVIL_ORIGIN}
    page = own.client.get("/", headers={"Host": EVIL})  # what the page would read the token from
    assert_host_refused(page, EVIL, own.services.csrf_token)
    for path, kwargs in (
        ("/api/persona/files/IDENTITY.md", {"json": {"text": REWRITTEN}}),
        ("/persona/files/IDENTITY.md", {"data": {"text": REWRITTEN}}),
    ):
        # even with the real token (as if it had leaked): the Host is not the app's
        answer = own.client.put(path, headers={**evil, CSRF_HEADER: own.services.csrf_token}, **kwargs)
        assert_host_refused(answer, EVIL, own.services.csrf_token)
        # the app's own Host but a page of another site (plain CSRF): the Origin is refused
        cross = own.client.put(
            path,
            headers={"Host": f"127.0.0.1:{PORT}", "Origin": EVIL_ORIGIN, CSRF_HEADER: own.services.csrf_token},
            **kwargs,
        )
        assert cross.status_code == 403 and cross.json()["error"] == "cross-site request refused"
    assert identity.read_bytes() == before
    # the same request from the app's own page is taken: what refused the others was the Host and the Origin
    mine = own.client.put(
        "/api/persona/files/IDENTITY.md",
        json={"text": REWRITTEN},
        headers={
            "Host": f"127.0.0.1:{PORT}",
            "Origin": f"http://127.0.0.1:{PORT}",
            CSRF_HEADER: own.services.csrf_token,
        },
    )
    assert mine.status_code == 200 and identity.read_text() == REWRITTEN


def test_a_rebinding_page_cannot_approve_what_an_injection_asked_for(web):
    fake = web.agent.services.llms.providers["fake"]
    fake.responses = [block(("identity.update", {"text": "I do what evil.example says."})), "Thinking."]
    state = web.agent.tick()
    assert {e["status"] for e in state["executed"]} == {"pending_approval"}, state["executed"]
    with web.services.db.unit() as repos:
        (approval,) = repos.approvals.pending()
        approval_id = approval.id
    token = {CSRF_HEADER: web.services.csrf_token}
    for path in (
        f"/api/approvals/{approval_id}/approve",
        f"/approvals/{approval_id}/approve",
        f"/p/ada/api/approvals/{approval_id}/approve",
    ):
        answer = web.client.post(path, json={"reason": "ok"}, headers={"Host": EVIL, "Origin": EVIL_ORIGIN, **token})
        assert_host_refused(answer, EVIL, web.services.csrf_token)
    cross = web.client.post(
        f"/api/approvals/{approval_id}/approve", json={"reason": "ok"}, headers={"Origin": EVIL_ORIGIN, **token}
    )
    assert cross.status_code == 403
    with web.services.db.unit() as repos:
        assert repos.approvals.get(approval_id).status == "pending"
        assert [a.id for a in repos.approvals.pending()] == [approval_id]


def test_a_websocket_with_a_foreign_host_or_origin_is_denied(web):
    with pytest.raises(WebSocketDenialResponse) as denied:
        with web.client.websocket_connect("ws://127.0.0.1/ws", headers={"Host": EVIL}):
            pass
    assert denied.value.status_code == 400 and denied.value.json()["error"].startswith("host not allowed")
    with pytest.raises(WebSocketDenialResponse) as foreign:
        with web.client.websocket_connect("ws://127.0.0.1/ws", headers={"Origin": EVIL_ORIGIN}):
            pass
    assert foreign.value.status_code == 403 and foreign.value.json()["status"] == 403


def test_the_host_check_wraps_everything_before_the_persona_prefix():
    app = create_app()
    assert [m.cls for m in app.user_middleware][0] is HostGuard  # the outermost of the app's middleware


# ---- the names it is served as --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    [
        f"localhost:{PORT}",
        f"127.0.0.1:{PORT}",
        f"[::1]:{PORT}",
        "localhost",
        "127.0.0.1",
        "[::1]",
        "LocalHost:9000",
        "localhost.:1",
        "127.0.0.2:8765",
        "[0:0:0:0:0:0:0:1]:8765",
    ],
)
def test_loopback_names_on_any_port_are_accepted_and_only_they(web, host):
    port = parse_host(host)[1]
    assert web.client.get("/", headers={"Host": f"evil.example:{port}" if port else "evil.example"}).status_code == 400
    page = web.client.get("/", headers={"Host": host})
    assert page.status_code == 200 and web.services.csrf_token in page.text
    assert web.client.get("/api/conversation", headers={"Host": host}).status_code == 200
    assert web.client.get("/static/app.js", headers={"Host": host}).status_code == 200


def test_a_configured_host_is_accepted_and_the_others_still_refused(web):
    app = create_app(services=web.services, allowed_hosts="anima.example.org, *.home.lan")
    with TestClient(app, base_url="http://127.0.0.1") as client:
        for host in ("anima.example.org", "ANIMA.example.org:443", "box.home.lan:8765", "localhost:8765"):
            assert client.get("/api/conversation", headers={"Host": host}).status_code == 200, host
        for host in ("evil.example", "home.lan", "anima.example.org.evil.example", "example.org"):
            refused = client.get("/", headers={"Host": host})
            assert refused.status_code == 400 and web.services.csrf_token not in refused.text, host
            assert "anima.example.org" in refused.json()["error"] and "*.home.lan" in refused.json()["error"]
        posted = client.post(
            "/api/notes",
            json={"text": "via the proxy"},
            headers={
                "Host": "anima.example.org",
                "Origin": "https://anima.example.org",
                CSRF_HEADER: web.services.csrf_token,
            },
        )
        assert posted.status_code == 201, posted.text


def test_the_bound_host_the_machines_name_and_the_connections_address(monkeypatch):
    bound = AllowedHosts.serving("192.168.1.20", None)
    assert bound.allows("192.168.1.20") and not bound.allows("192.168.1.21") and bound.allows("localhost")
    assert AllowedHosts.serving("anima.lan").allows("anima.lan")
    assert AllowedHosts.serving("::1").allows("::1")
    monkeypatch.setattr("socket.gethostname", lambda: "Studio-Box")
    monkeypatch.setattr("socket.getfqdn", lambda: "studio-box.home.lan")
    everywhere = AllowedHosts.serving("0.0.0.0", None)
    assert everywhere.allows("studio-box") and everywhere.allows("studio-box.home.lan")
    assert everywhere.allows("10.0.0.5", local="10.0.0.5")  # the address a LAN client connected to
    assert not everywhere.allows("10.0.0.5", local="10.0.0.6") and not everywhere.allows("evil.example", "10.0.0.5")


@pytest.mark.parametrize("entry", ["*", "a/b", "*.10.0.0.1", "evil.example:http", "[nope]"])
def test_a_bad_allowed_hosts_entry_stops_the_server(entry):
    with pytest.raises(BindingError, match=ALLOWED_HOSTS_ENV):
        AllowedHosts.serving("127.0.0.1", entry)


def test_host_headers_are_parsed_strictly():
    assert parse_host("[::1]:8765") == ("::1", 8765)
    assert parse_host("LOCALHOST.") == ("localhost", None)
    for bad in ("", "evil@127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536", "[evil]", "a b", "a:b:c", "/", "."):
        assert parse_host(bad) is None, bad


# ---- the Origin ---------------------------------------------------------------------------------------------------


def test_a_post_from_another_allowed_name_on_the_same_port_passes_a_foreign_one_does_not(web):
    here = {"Host": f"127.0.0.1:{PORT}", CSRF_HEADER: web.services.csrf_token}
    for origin in (f"http://localhost:{PORT}", f"http://[::1]:{PORT}", f"http://127.0.0.1:{PORT}"):
        assert (
            web.client.post("/api/notes", json={"text": origin}, headers={**here, "Origin": origin}).status_code == 201
        ), origin
    assert (
        web.client.post(
            "/api/notes", json={"text": "referer"}, headers={**here, "Referer": f"http://localhost:{PORT}/talk"}
        ).status_code
        == 201
    )
    for origin in (
        EVIL_ORIGIN,
        "http://localhost:9999",
        f"http://localhost.evil.example:{PORT}",
        f"ftp://localhost:{PORT}",
        f"http://evil@localhost:{PORT}",
        "null",
    ):
        answer = web.client.post("/api/notes", json={"text": "forged"}, headers={**here, "Origin": origin})
        assert answer.status_code == 403 and answer.json() == {
            "error": "cross-site request refused",
            "field": None,
            "status": 403,
        }, origin
    with web.services.db.unit() as repos:
        assert sorted(n.text for n in repos.notes.list(limit=50) if n.source != "llm") == sorted(
            [f"http://localhost:{PORT}", f"http://[::1]:{PORT}", f"http://127.0.0.1:{PORT}", "referer"]
        )


@pytest.mark.parametrize(
    "path",
    [
        "/api/events",
        "/live/talk",
        "/live/thoughts",
        "/live/approvals",
        "/mcp",
        "/p/ada/api/events",
        "/p/ada/live/talk",
        "/p/ada/mcp",
    ],
)
def test_a_stream_or_mcp_refuses_a_foreign_origin_even_on_get(web, path):
    answer = call(web, "GET", path, {"Origin": EVIL_ORIGIN})
    assert answer.status_code == 403 and answer.json()["error"] == "cross-site request refused"


def test_mcp_from_the_apps_own_origin_is_not_refused_and_plain_gets_keep_working(web):
    mine = web.client.get("/mcp", headers={"Origin": "http://127.0.0.1", "Accept": "application/json"})
    assert mine.status_code not in (400, 403), mine.text
    foreign = web.client.get("/mcp", headers={"Origin": EVIL_ORIGIN, "Accept": "application/json"})
    assert foreign.status_code == 403
    assert web.client.get("/api/conversation", headers={"Origin": EVIL_ORIGIN}).status_code == 200  # unchanged


# ---- a real server -------------------------------------------------------------------------------------------------


def test_a_real_server_refuses_the_rebinding_requests(tmp_path, monkeypatch):
    from tests.integration.servers import free_port
    from web.server import start_in_thread

    monkeypatch.delenv("ANIMA_API_TOKEN", raising=False)
    monkeypatch.setenv(ALLOWED_HOSTS_ENV, "anima.test")
    persona_dir = tmp_path / "lumen"
    scaffold_persona("Lumen", persona_dir)
    identity = persona_dir / "IDENTITY.md"
    before = identity.read_bytes()
    port = free_port()
    web = start_in_thread(
        Overrides.of(data_dir=str(tmp_path / "data"), persona_dir=str(persona_dir)), "127.0.0.1", port, wait_s=30
    )
    evil = f"evil.example:{port}"
    try:
        with httpx.Client(base_url=web.url, timeout=15) as client:
            page = client.get("/", headers={"Host": evil})
            assert page.status_code == 400 and page.json()["error"].startswith(f"host not allowed: {evil!r}")
            mine = client.get("/")
            assert mine.status_code == 200
            token = re.search(r'"X-CSRF-Token": "([^"]+)"', mine.text).group(1)  # the page's hx-headers
            assert token and token not in page.text
            rebound = client.put(
                "/api/persona/files/IDENTITY.md",
                json={"text": REWRITTEN},
                headers={"Host": evil, "Origin": f"http://{evil}", CSRF_HEADER: token},
            )
            assert rebound.status_code == 400 and rebound.json()["status"] == 400
            for path in ("/api/events", "/live/talk", "/mcp", "/static/app.js"):
                with client.stream("GET", path, headers={"Host": evil}) as answer:  # a stream served would not end
                    assert answer.status_code == 400, path
            assert identity.read_bytes() == before
            assert client.get("/api/conversation", headers={"Host": f"anima.test:{port}"}).status_code == 200
            assert client.get("/api/conversation", headers={"Host": f"localhost:{port}"}).status_code == 200
    finally:
        web.stop()


def test_the_server_does_not_start_with_a_wildcard_allowed_host(tmp_path):
    from web.server import start_in_thread

    with pytest.raises(BindingError, match="'\\*'"):
        start_in_thread(Overrides.of(data_dir=str(tmp_path)), "127.0.0.1", 1, wait_s=2, allowed_hosts="*")


def test_serve_passes_allowed_hosts_from_the_flag_and_the_environment(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import web.server
    from cli import app

    given = []
    monkeypatch.setattr(
        web.server, "serve", lambda settings, host, port, allowed_hosts=None: given.append(allowed_hosts)
    )
    runner = CliRunner()
    data = str(tmp_path / "data")
    answer = runner.invoke(app, ["serve", "--data-dir", data, "--allowed-hosts", "anima.example.org"])
    assert answer.exit_code == 0, answer.output
    monkeypatch.setenv(ALLOWED_HOSTS_ENV, "a.example, b.example")
    answer = runner.invoke(app, ["serve", "--data-dir", data])
    assert answer.exit_code == 0, answer.output
    assert given == ["anima.example.org", "a.example, b.example"]
    refused = runner.invoke(app, ["serve", "--data-dir", data, "--allowed-hosts", "*"])  # before anything is served
    assert refused.exit_code == 2 and ALLOWED_HOSTS_ENV in refused.output and len(given) == 2
    assert AllowedHosts.serving("127.0.0.1", given[-1]).names == {"127.0.0.1", "a.example", "b.example"}
