"""/docs, the API reference `run.py` prints at start, in a real browser (Debian's chromium under Playwright) with
every request to anything but the app refused, as on a machine without a network: Swagger UI, served from the
vendored swagger-ui-dist, renders the operations of /openapi.json, and the page asked no other host for anything."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from tests.integration.browser import http_json

pytestmark = pytest.mark.integration


def test_the_api_docs_render_every_operation_with_no_network_but_the_app(page, served_app):
    app = urlsplit(served_app).netloc
    elsewhere: list[str] = []
    failed: list[str] = []

    def only_the_app(route):
        if urlsplit(route.request.url).netloc == app:
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    page.route("**/*", only_the_app)
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.goto(f"{served_app}/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("anima")
    operations = page.locator(".swagger-ui .opblock")
    expect(operations.first).to_be_visible()
    _, spec = http_json(f"{served_app}/openapi.json")
    expected = sum(
        1 for item in spec["paths"].values() for method in item if method in ("get", "put", "post", "delete", "patch")
    )
    expect(operations).to_have_count(expected)
    paths = page.locator(".swagger-ui .opblock-summary-path").all_inner_texts()
    assert "/api/notes" in {p.replace("\u200b", "") for p in paths}
    page.locator(".swagger-ui .opblock-summary", has_text="/api/loop").first.click()  # an operation opens
    expect(page.locator(".swagger-ui .opblock.is-open .opblock-section-header").first).to_be_visible()
    assert elsewhere == [], f"the page asked other hosts: {elsewhere}"
    assert failed == [], f"requests to the app that failed: {failed}"
    assert http_json(f"{served_app}/redoc")[0] == 404  # no second viewer that would need a CDN
