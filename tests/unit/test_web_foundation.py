"""The face's foundation: the guard (a binding beyond this machine needs a token; the token on every request; a
cross-site or header-less browser POST refused, nothing stored), JSON errors naming the field, the live journal the
loop writes and the stream reads back in order, and the start/pause/stop flag the loop obeys between ticks."""

from __future__ import annotations

import threading
import time

import pytest

from graph.loop import Stopper, run_loop
from graph.loop.journal import LiveJournal
from persona.settings import Overrides
from tests.fakes.managers import managers_over
from web.security import CSRF_HEADER, TOKEN_COOKIE, TOKEN_ENV, BindingError, check_binding, is_loopback
from web.services import events

TOKEN = "s3cret-token-for-tests"


def human_notes(web) -> list[str]:
    with web.services.db.unit() as repos:
        return [n.text for n in repos.notes.list(limit=500) if n.source != "llm"]


# ---- binding -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "anima.example"])
def test_binding_beyond_this_machine_without_a_token_is_refused_naming_the_variable(host):
    with pytest.raises(BindingError) as refused:
        check_binding(host, None)
    assert TOKEN_ENV in str(refused.value) and host in str(refused.value)
    check_binding(host, TOKEN)  # with a token it may


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"])
def test_loopback_needs_no_token(host):
    assert is_loopback(host)
    check_binding(host, None)


def test_the_server_refuses_to_start_on_0000_without_the_token(monkeypatch, tmp_path):
    from web.server import start_in_thread

    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with pytest.raises(BindingError, match=TOKEN_ENV):
        start_in_thread(Overrides.of(data_dir=str(tmp_path)), "0.0.0.0", 1, wait_s=2)


# ---- the token -----------------------------------------------------------------------------------------------------


@pytest.fixture
def guarded(web):
    web.services.api_token = TOKEN  # as when ANIMA_API_TOKEN is set: the guard reads it on every request
    yield web
    web.services.api_token = None


@pytest.mark.parametrize(
    "method, path",
    [
        ("GET", "/"),
        ("GET", "/controls"),
        ("GET", "/api/conversation"),
        ("GET", "/api/loop"),
        ("GET", "/openapi.json"),
        ("GET", "/docs"),
        ("POST", "/api/notes"),
        ("PUT", "/api/loop"),
        ("GET", "/nowhere"),
    ],
)
def test_with_a_token_every_request_without_it_is_401(guarded, method, path):
    answer = guarded.client.request(method, path, json={"text": "hi"} if method != "GET" else None)
    assert answer.status_code == 401, (path, answer.text)
    assert answer.json()["status"] == 401 and TOKEN_ENV in answer.json()["error"]
    wrong = guarded.client.request(method, path, headers={"Authorization": "Bearer not-it"})
    assert wrong.status_code == 401
    assert human_notes(guarded) == []


def test_with_a_token_static_files_stay_open_and_bearer_works(guarded):
    assert guarded.client.get("/static/app.css").status_code == 200
    assert guarded.client.get("/static/vendor/htmx-2.0.11/htmx.min.js").status_code == 200
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert guarded.client.get("/api/conversation", headers=bearer).status_code == 200
    posted = guarded.client.post("/api/notes", json={"text": "with the token"}, headers=bearer)
    assert posted.status_code == 201 and human_notes(guarded) == ["with the token"]


def test_the_token_in_the_query_sets_the_cookie_and_redirects(guarded):
    client = guarded.client
    answer = client.get(f"/controls?token={TOKEN}", follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/controls"  # the token leaves the URL
    cookie = answer.headers["set-cookie"]
    assert (
        cookie.startswith(f"{TOKEN_COOKIE}={TOKEN}")
        and "httponly" in cookie.lower()
        and "samesite=strict" in cookie.lower()
    )
    page = client.get("/controls")  # the client keeps the cookie, as a browser does
    assert page.status_code == 200 and "Controls" in page.text
    client.cookies.clear()
    assert client.get("/?token=wrong", follow_redirects=False).status_code == 401
    assert client.get("/").status_code == 401


# ---- CSRF ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "http://127.0.0.1.evil.example"},
        {"Origin": "http://127.0.0.1:9999"},  # another port is another origin
        {"Origin": "null"},  # a sandboxed frame or a data: page
        {"Referer": "http://evil.example/page"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Origin": "http://evil.example", "X-CSRF-Token": "guessed"},
    ],
)
def test_a_cross_site_post_is_403_and_stores_nothing(web, headers):
    for path, kwargs in (
        ("/api/notes", {"json": {"text": "forged"}}),
        ("/talk/notes", {"data": {"text": "forged"}}),
        ("/controls/loop", {"data": {"want": "stopped"}}),
    ):
        answer = web.client.post(path, headers=headers, **kwargs)
        assert answer.status_code == 403 and answer.json()["error"] == "cross-site request refused", (path, answer.text)
    assert web.client.put("/api/loop", json={"want": "stopped"}, headers=headers).status_code == 403
    assert human_notes(web) == []
    with web.services.db.unit() as repos:
        assert managers_over(repos).loop.wanted() == "running"


def test_even_the_apps_own_csrf_token_from_another_origin_is_refused(web):
    answer = web.client.post(
        "/api/notes",
        json={"text": "forged"},
        headers={"Origin": "http://evil.example", CSRF_HEADER: web.services.csrf_token},
    )
    assert answer.status_code == 403 and human_notes(web) == []


def test_a_browser_post_from_the_same_origin_needs_the_pages_csrf_header(web):
    same = {"Origin": "http://127.0.0.1"}
    for headers in (
        same,
        {**same, CSRF_HEADER: "wrong"},
        {"Sec-Fetch-Site": "same-origin"},
        {"Sec-Fetch-Mode": "cors"},
    ):
        answer = web.client.post("/talk/notes", data={"text": "no header"}, headers=headers)
        assert answer.status_code == 403 and CSRF_HEADER in answer.json()["error"], answer.text
        assert web.client.post("/api/notes", json={"text": "no header"}, headers=headers).status_code == 403
    assert human_notes(web) == []
    page = web.client.post("/talk/notes", data={"text": "from the page"}, headers=web.csrf)
    assert page.status_code == 200 and "from the page" in page.text
    api = web.client.post("/api/notes", json={"text": "from the page's script"}, headers=web.csrf)
    assert api.status_code == 201
    assert web.csrf[CSRF_HEADER] in web.client.get("/").text  # the page carries its header for htmx
    assert human_notes(web) == ["from the page", "from the page's script"]


def test_safe_methods_and_non_browser_clients_pass_without_the_header(web):
    assert web.client.get("/api/conversation", headers={"Origin": "http://evil.example"}).status_code == 200
    assert web.client.post("/api/notes", json={"text": "curl"}).status_code == 201  # no Origin, no Sec-Fetch-*


# ---- errors --------------------------------------------------------------------------------------------------------


def test_json_errors_name_the_field(web):
    too_long = web.client.post("/api/notes", json={"text": "x" * 8001})
    assert too_long.status_code == 422
    body = too_long.json()
    assert body["field"] == "text" and body["status"] == 422 and "text" in body["error"]
    assert web.client.post("/api/notes", json={}).json()["field"] == "text"
    assert web.client.put("/api/loop", json={"want": "faster"}).json()["field"] == "want"
    assert web.client.get("/api/conversation?limit=0").json()["field"] == "limit"
    assert (
        web.client.post("/api/notes", content=b"{not json", headers={"Content-Type": "application/json"}).status_code
        == 422
    )
    missing = web.client.get("/api/no-such-thing")
    assert missing.status_code == 404 and missing.json()["status"] == 404
    assert human_notes(web) == []


def test_a_page_error_comes_back_as_a_fragment_the_page_shows(web):
    answer = web.client.post("/talk/notes", data={"text": "x" * 8001}, headers={**web.csrf, "HX-Request": "true"})
    assert answer.status_code == 422 and answer.headers["content-type"].startswith("text/html")
    assert 'role="alert"' in answer.text and "<b>text</b>" in answer.text


# ---- the live journal ----------------------------------------------------------------------------------------------


def test_the_journal_writes_each_step_and_tick_of_a_ticked_agent_and_the_stream_reads_them_in_order(web):
    journal = LiveJournal(web.agent.services.db, "main")
    try:
        result = run_loop(web.agent, 2, on_stream=journal, autonomy=False)
    finally:
        journal.close()
    assert result.ticks_run == 2
    rows = events.read_after(web.services.managers, 0)
    assert [r["id"] for r in rows] == sorted(r["id"] for r in rows) and len({r["id"] for r in rows}) == len(rows)
    steps = [r for r in rows if r["kind"] == "step"]
    ticks = [r for r in rows if r["kind"] == "tick"]
    assert [t["tick"] for t in ticks] == [1, 2]
    for tick in (1, 2):
        nodes = [r["node"] for r in steps if r["tick"] == tick]
        assert nodes[0] == "update_process_log" and nodes[-1] == "execute_commands" and "call_llm" in nodes, nodes
        closing = next(r for r in rows if r["kind"] == "tick" and r["tick"] == tick)
        assert all(r["id"] < closing["id"] for r in steps if r["tick"] == tick)  # the tick closes after its steps
    call = next(r for r in steps if r["node"] == "call_llm")
    assert call["data"]["llm_id"] == "fake" and call["data"]["response"]
    assert all(r["thread_id"] == "main" and r["at"].endswith("+00:00") for r in rows)
    only_ticks = events.read_after(web.services.managers, 0, kinds=["tick"])
    assert [r["id"] for r in only_ticks] == [t["id"] for t in ticks]
    assert events.read_after(web.services.managers, ticks[0]["id"], kinds=["tick"]) == [only_ticks[1]]
    assert events.newest_id(web.services.managers) == rows[-1]["id"]


def test_the_journal_trims_to_the_newest_events_and_bounds_big_ones(web):
    journal = LiveJournal(web.services.db, "main", keep=50)
    try:
        for i in range(260):
            journal.put("step", node="call_llm", data={"i": i})
        journal.put("step", node="call_llm", data={"i": "big", "text": "x" * 50_000})
    finally:
        journal.close()
    rows = events.read_after(web.services.managers, 0, limit=1_000)
    assert 50 <= len(rows) < 261  # trimmed once 200 were written, keeping the newest
    assert rows[-1]["data"]["truncated"] > 50_000 and len(rows[-1]["data"]["preview"]) <= 4_000
    numbers = [r["data"]["i"] for r in rows[:-1]]
    assert numbers == list(range(260 - len(numbers), 260))  # the newest ones, in order


def test_the_sse_json_of_an_event_names_its_kind_and_cursor(web):
    journal = LiveJournal(web.services.db, "main")
    journal.put("message", data={"note_id": 7, "text": "hé"})
    journal.close()
    (row,) = events.read_after(web.services.managers, 0)
    sse = events.sse_json(row)
    assert sse["event"] == "message" and sse["id"] == str(row["id"]) and '"hé"' in sse["data"]


# ---- the control flag the loop obeys --------------------------------------------------------------------------------


def _want(web, want: str) -> None:
    with web.services.db.unit() as repos:
        managers_over(repos).loop.request_state(want, by="test", now=web.services.clock())


def _reported(web) -> str | None:
    with web.services.db.unit() as repos:
        return managers_over(repos).loop.status().loop.state


def test_paused_ticks_nothing_within_the_budget_until_a_stopper_ends_the_run(web):
    _want(web, "paused")
    stopper, seen_paused = Stopper(), []

    def stop_once_paused():
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _reported(web) != "paused":
            time.sleep(0.02)
        seen_paused.append(_reported(web))
        time.sleep(0.3)  # several poll intervals while paused
        stopper.request("test")

    watcher = threading.Thread(target=stop_once_paused)
    watcher.start()
    result = run_loop(web.agent, 3, stopper=stopper, idle_poll_s=0.05, autonomy=False)
    watcher.join(timeout=15)
    assert seen_paused == ["paused"]  # the loop said so while it waited
    assert result.ticks_run == 0 and result.interrupted and not result.stopped_by_human
    assert web.agent.state().get("tick", 0) == 0 and _reported(web) == "stopped"


def test_stopped_ends_the_run_as_stopped_by_the_human(web):
    _want(web, "stopped")
    result = run_loop(web.agent, 3, stopper=Stopper(), idle_poll_s=0.05, autonomy=False)
    assert result.stopped_by_human and result.ticks_run == 0 and not result.interrupted


def test_running_ticks_and_a_pause_between_ticks_is_obeyed_before_the_next(web):
    _want(web, "running")
    assert run_loop(web.agent, 2, stopper=Stopper(), autonomy=False).ticks_run == 2
    stopper = Stopper()
    ticks_seen = []

    def listen(mode, data):
        if "execute_commands" in (data or {}) and mode == "updates":
            ticks_seen.append(1)
            _want(web, "paused")  # asked during the tick: it finishes, then the loop waits
            threading.Timer(0.5, stopper.request).start()

    result = run_loop(web.agent, 5, stopper=stopper, idle_poll_s=0.05, autonomy=False, on_stream=listen)
    assert result.ticks_run == 1 and ticks_seen == [1] and web.agent.state()["tick"] == 3
