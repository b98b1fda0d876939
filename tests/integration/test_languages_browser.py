"""The languages in a real browser (Debian's chromium under Playwright) over `run.py serve`: a browser that prefers
Japanese gets the pages in Japanese; the switcher in the header turns them Russian, and the choice sticks — on
another page, after a reload — over the browser's own preference. Every wait is bounded."""

from __future__ import annotations

import contextlib
import shutil

import pytest

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from tests.integration.servers import ROOT, served_web_app

    base = tmp_path_factory.mktemp("languages-web")
    shutil.copytree(ROOT / "persona" / "default", base / "persona")
    with served_web_app(base / "data", base / "persona") as url:
        yield url


def test_the_switcher_changes_the_language_and_it_sticks(browser, served):
    from playwright.sync_api import expect

    from tests.integration.browser import NAVIGATION_TIMEOUT_MS, PAGE_TIMEOUT_MS, screenshot

    instance = browser.get()
    if instance is None:
        pytest.skip(browser.failure)
    context = instance.new_context(viewport={"width": 1280, "height": 900}, locale="ja-JP")  # Accept-Language: ja-JP
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    context.set_default_navigation_timeout(NAVIGATION_TIMEOUT_MS)
    expect.set_options(timeout=PAGE_TIMEOUT_MS)
    page = context.new_page()
    try:
        page.goto(served + "/memory")
        expect(page.locator("html")).to_have_attribute("lang", "ja")
        expect(page.get_by_role("heading", name="記憶", exact=True)).to_be_visible()
        expect(page.get_by_role("button", name="検索", exact=True)).to_be_visible()

        page.get_by_test_id("lang-ru").click()
        page.wait_for_url("**/memory")
        expect(page.locator("html")).to_have_attribute("lang", "ru")
        expect(page.get_by_role("heading", name="Память", exact=True)).to_be_visible()
        expect(page.get_by_test_id("lang-ru")).to_have_attribute("aria-current", "true")

        page.get_by_role("link", name="Разговор", exact=True).click()  # another page: the choice goes along
        expect(page.get_by_role("heading", name="Разговор", exact=True)).to_be_visible()
        expect(page.get_by_role("button", name="Отправить", exact=True)).to_be_visible()
        page.reload()
        expect(page.locator("html")).to_have_attribute("lang", "ru")
        assert any(c["name"] == "anima_lang" and c["value"] == "ru" for c in context.cookies())

        page.get_by_test_id("lang-en").click()
        expect(page.get_by_role("heading", name="Talk", exact=True)).to_be_visible()
    finally:
        with contextlib.suppress(Exception):  # a screenshot is a courtesy, never the failure
            screenshot(page, "test_the_switcher_changes_the_language_and_it_sticks")
        context.close()
