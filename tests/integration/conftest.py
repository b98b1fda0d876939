"""Servers the integration tests share: one of each per session (every start is bounded; every server is stopped)."""

import contextlib

import pytest

from tests.integration.servers import scripted_llm_server


@pytest.fixture(scope="session")
def chroma_url():
    """A `chroma run` server for the session (tests/integration/fleet_parts.py)."""
    from tests.integration.fleet_parts import chroma_server

    with chroma_server() as url:
        yield url


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    """`run.py serve` over a fresh data dir and a copy of the shipped persona (a fuzzer may rewrite its files, never
    the shipped ones): the web app alone, as a user starts it; `.url`, `.data_dir`."""
    import shutil
    from types import SimpleNamespace

    from tests.integration.servers import ROOT, served_web_app

    base = tmp_path_factory.mktemp("served")
    shutil.copytree(ROOT / "persona" / "default", base / "persona")
    with served_web_app(base / "data", base / "persona") as url:
        yield SimpleNamespace(url=url, data_dir=base / "data")


@pytest.fixture(scope="session")
def served_app(served):
    """The served web app's URL (see `served`)."""
    return served.url


@pytest.fixture(scope="session")
def scripted_server():
    """tests/integration/scripted_llm_server.py: an OpenAI-compatible server whose answers each test scripts."""
    with scripted_llm_server() as server:
        yield server


# ---- the real browser (tests/integration/browser.py) ----------------------------------------------------------------

_BROWSER = None


def _holder():
    global _BROWSER
    if _BROWSER is None:
        from tests.integration.browser import BrowserHolder

        _BROWSER = BrowserHolder()
    return _BROWSER


@pytest.fixture(scope="session")
def browser():
    """Debian's chromium under Playwright, one for the session; the test skips (saying why) when it cannot start."""
    holder = _holder()
    if holder.get() is None:
        pytest.skip(holder.failure)
    yield holder
    holder.close()


@pytest.fixture
def page(browser, request):
    """A fresh browser context and page (every action and expectation bounded); its last state is saved as
    tests/artifacts/<test>.png."""
    from playwright.sync_api import expect

    from tests.integration.browser import NAVIGATION_TIMEOUT_MS, PAGE_TIMEOUT_MS, screenshot

    instance = browser.get()
    if instance is None:
        pytest.skip(browser.failure)
    context = instance.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    context.set_default_navigation_timeout(NAVIGATION_TIMEOUT_MS)
    expect.set_options(timeout=PAGE_TIMEOUT_MS)
    tab = context.new_page()
    try:
        yield tab
    finally:
        with contextlib.suppress(Exception):  # a screenshot is a courtesy, never the failure
            screenshot(tab, request.node.name.replace("/", "_")[:120])
        context.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Close the session's browser once the next test does not use it: Playwright's sync API leaves an asyncio loop
    marked as running in the main thread while it is open, and the tests after must not meet it."""
    result = yield
    if _BROWSER is not None and _BROWSER.is_open and (nextitem is None or "browser" not in nextitem.fixturenames):
        _BROWSER.close()
    return result


@pytest.fixture(scope="session")
def synapse(tmp_path_factory):
    """One real Synapse homeserver for the session (tests/integration/synapse_server.py): loopback, SQLite."""
    from tests.integration.synapse_server import synapse_server

    with synapse_server(tmp_path_factory.mktemp("synapse")) as server:
        yield server
