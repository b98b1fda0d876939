"""The first hour (issue 32). Connecting a model from the browser: Controls → "Add a model" against a real
OpenAI-compatible server —
llama-cpp-python's own server (`python -m llama_cpp.server`, its [server] extras) on the embedded Gemma model,
started here with an API key it requires. The health check refuses a wrong key and a wrong address; the right one is
saved, listed, thinks through the registry (the key read from its 0600 secrets file), never appears in the database,
the API or the page, and is removed again. Local servers on loopback are found with their models. Controls shows the
quiet hours, a dreaming persona and its Wake up button. One server and one web app for the module; every wait is
bounded."""

from __future__ import annotations

import shutil
import sqlite3
import stat
import time
from datetime import UTC, datetime

import pytest

from tests.fakes.managers import managers_over
from tests.integration.browser import http_json, screenshot
from tests.integration.servers import ROOT, free_port, llama_cpp_server, served_web_app

pytestmark = pytest.mark.integration

KEY = "sk-anima-test-8c1f2e"
ALIAS = "gemma-3-270m"
CHECK_MS = 120_000  # one short completion on a loaded 2-core machine; a hang guard, not a timing


@pytest.fixture(scope="module")
def model_server():
    from llm.embedded_model import assemble_model

    port = free_port()
    with llama_cpp_server(assemble_model(), port=port, extra=("--model_alias", ALIAS, "--api_key", KEY)) as (url, _):
        yield url, port


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    base = tmp_path_factory.mktemp("add-model")
    shutil.copytree(ROOT / "persona" / "default", base / "persona")
    with served_web_app(base / "data", base / "persona") as url:
        yield url, base / "data"


def test_local_servers_are_found_with_their_models():
    from llm.discovery import detect_local
    from llm.embedded_model import assemble_model

    port = free_port()  # a server as people run them locally: no key
    with llama_cpp_server(assemble_model(), port=port, extra=("--model_alias", ALIAS)):
        found = detect_local((("llama.cpp server", port), ("nothing here", free_port())))
    assert [s.base_url for s in found] == [f"http://127.0.0.1:{port}/v1"] and found[0].models == [ALIAS]
    assert detect_local((("llama.cpp server", port),)) == []  # stopped: nothing found
    assert found[0].offer == f"llama.cpp server is running with {ALIAS} — think with it?"


def test_the_api_refuses_a_server_that_fails_the_check(app, model_server):
    url, _ = model_server
    status, body = http_json(
        app[0] + "/api/llms", "POST", {"base_url": url, "model": ALIAS, "api_key": "wrong"}, timeout=CHECK_MS / 1000
    )
    assert status == 422 and body["field"] == "base_url" and "key was refused" in body["error"]
    status, body = http_json(
        app[0] + "/api/llms", "POST", {"base_url": f"http://127.0.0.1:{free_port()}/v1", "model": ALIAS}
    )
    assert status == 422 and "did not answer" in body["error"]
    _, llms = http_json(app[0] + "/api/llms")
    assert [m["id"] for m in llms if m["added"]] == []  # nothing saved


def test_add_a_model_on_controls_then_think_with_it_then_remove_it(page, app, model_server):
    from playwright.sync_api import expect

    url, _ = model_server
    web, data_dir = app
    page.goto(web + "/controls")
    expect(page.get_by_role("heading", name="Add a model")).to_be_visible()
    form = page.get_by_test_id("add-model")
    form.get_by_label("Base URL").fill(url.removesuffix("/v1"))  # a bare host:port is taken as its /v1
    form.get_by_label("Model").fill(ALIAS)
    form.get_by_label("Name").fill("My Gemma")
    form.get_by_label("API key").fill(KEY)
    form.get_by_role("button", name="Check and add").click()
    expect(page.get_by_test_id("model-added")).to_contain_text("my-gemma", timeout=CHECK_MS)
    row = page.locator('#llm-models tr[data-llm="my-gemma"]')
    expect(row).to_contain_text(ALIAS)
    expect(form.get_by_label("API key")).to_have_value("")  # the form was reset
    screenshot(page, "controls-model-added")

    _, llms = http_json(web + "/api/llms")
    added = next(m for m in llms if m["id"] == "my-gemma")
    assert added["added"] and added["base_url"] == url and added["priority"] == 50 and added["enabled"]
    secret = data_dir / "secrets" / "llm-my-gemma.key"
    assert secret.read_text() == KEY and stat.S_IMODE(secret.stat().st_mode) == 0o600
    page.reload()
    assert KEY not in page.content() and KEY not in str(llms)
    with sqlite3.connect(data_dir / "anima.sqlite") as db:
        dump = "\n".join(db.iterdump())
    assert KEY not in dump and "llm-my-gemma.key" in dump  # only the file's path is kept

    from graph.services import open_services
    from llm import Sampling
    from persona.settings import Overrides

    services = open_services(Overrides.of(data_dir=str(data_dir), persona_dir=str(data_dir.parent / "persona")))
    try:
        assert "my-gemma" in services.llms.ids
        answer = services.llms.generate("test", prompt="The sea is", sampling=Sampling(max_tokens=4), only="my-gemma")
        assert answer.completion_tokens > 0  # the key from the secrets file was accepted
    finally:
        services.db.close()

    row = page.locator('#llm-models tr[data-llm="my-gemma"]')
    row.get_by_role("button", name="Remove").click()
    expect(page.locator('#llm-models tr[data-llm="my-gemma"]')).to_have_count(0)
    assert not secret.exists()
    status, body = http_json(web + "/api/llms/my-gemma", "DELETE")
    assert status == 404


def test_the_api_adds_and_deletes_a_model(app, model_server):
    url, _ = model_server
    status, body = http_json(
        app[0] + "/api/llms", "POST", {"base_url": url, "model": ALIAS, "api_key": KEY}, timeout=CHECK_MS / 1000
    )
    assert status == 201 and body["id"] == ALIAS and body["model"] == ALIAS and KEY not in str(body)
    status, again = http_json(
        app[0] + "/api/llms", "POST", {"base_url": url, "model": ALIAS, "api_key": KEY}, timeout=CHECK_MS / 1000
    )
    assert status == 409
    status, left = http_json(app[0] + f"/api/llms/{ALIAS}", "DELETE")
    assert status == 200 and ALIAS not in [m["id"] for m in left]
    status, body = http_json(app[0] + "/api/llms/embedded", "DELETE")
    assert status == 409  # configured, not added: disabled instead


def test_controls_shows_quiet_hours_and_a_dreaming_persona_with_wake_up(page, app):
    """The loop reports "dreaming" while it dreams (tests/unit/test_autonomy.py drives that and the waking): here
    the page shows it, with its button, and the button records the human's wake-up the loop looks for."""
    from playwright.sync_api import expect

    from memory import Database

    web, data_dir = app
    database = Database.open(str(data_dir), None)
    try:
        with database.unit() as repos:
            managers_over(repos).loop.record_status("dreaming", now=datetime.now(UTC), thread="main", pid=None)
        page.goto(web + "/controls")
        expect(page.get_by_test_id("quiet-hours")).to_contain_text("00:00-07:00")
        expect(page.get_by_test_id("loop-state")).to_have_text("dreaming")
        page.get_by_role("button", name="Wake up").click()
        screenshot(page, "controls-wake-up")
        deadline = time.monotonic() + 10
        asked = None
        while time.monotonic() < deadline and asked is None:
            with database.unit() as repos:
                asked = repos.config.wake_request
            time.sleep(0.1)
        assert asked is not None and asked["by"] == "human (web)"
    finally:
        database.close()


def _seed_ticks(data_dir, times, first_tick: int) -> None:
    from memory import Database

    database = Database.open(str(data_dir), None)
    try:
        with database.unit() as repos:
            repos.threads.ensure("main")
            for number, at in enumerate(times, start=first_tick):
                row = repos.ticks.start("main", number, "repl")
                row.started_at = at
                repos.ticks.finish(
                    "main",
                    number,
                    status="ok",
                    summary={},
                    llm_calls=1,
                    prompt_tokens=500 + number,
                    completion_tokens=40,
                    llm_ms=1.0,
                )
    finally:
        database.close()


def _drawn(page, key: str) -> tuple[dict, list[str]]:
    import json

    box = page.locator(f'[data-chart="chart-{key}-data"]')
    box.wait_for()
    page.wait_for_function(f"() => document.querySelector('[data-chart=\"chart-{key}-data\"]').dataset.domain")
    return json.loads(box.get_attribute("data-domain")), json.loads(box.get_attribute("data-x-labels"))


def test_charts_read_right_with_one_point_a_few_and_thousands(page, app):
    """Issue 32: one point drew an axis from January 2027 to July 2029. The drawn scales (uPlot's own) and the time
    axis's labels, with one point, a few, and (the same domain function) thousands."""
    from datetime import timedelta

    web, data_dir = app
    at = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
    _seed_ticks(data_dir, [at], 1)
    page.goto(web + "/inner-life")
    domain, labels = _drawn(page, "tokens")
    x = at.timestamp()
    assert domain["x"] == [x - 1800, x + 1800]  # half an hour either side of the one point
    assert domain["y"] == pytest.approx([40 - 0.08 * 461, 501 + 0.08 * 461])  # completion 40, prompt 501
    assert labels and not any(str(year) in " ".join(labels) for year in (2027, 2028, 2029))
    screenshot(page, "inner-life-one-point")

    _seed_ticks(data_dir, [at + timedelta(minutes=m) for m in (5, 9, 20, 31)], 2)  # a few, over half an hour
    page.reload()
    domain, labels = _drawn(page, "tokens")
    span = 31 * 60
    assert domain["x"][0] == pytest.approx(x - max(0.03 * span, 60)) and domain["x"][1] == pytest.approx(x + span + 60)
    assert len(labels) >= 2 and all(":" in label for label in labels)  # times of day, not dates years apart
    screenshot(page, "inner-life-few-points")

    many = page.evaluate("""() => {
        const xs = Array.from({length: 3000}, (_, i) => 1764064800 + i * 60);
        const ys = xs.map((_, i) => 100 + (i % 50));
        return chartDomain(xs, [ys, ys.map((v) => v / 2)]);
    }""")
    assert many["x"] == pytest.approx([1764064800 - 0.03 * 2999 * 60, 1764064800 + 2999 * 60 * 1.03])
    assert many["y"] == pytest.approx([50 - 0.08 * 99, 149 + 0.08 * 99])
