"""A web page read in a real browser: Debian's Chromium driven by Playwright (HMP "Автоматизация браузера"), so a page
whose text its scripts write is read as a person sees it. Headless, no sandbox (it runs as whatever user runs the
persona, often in a container), no GPU, no background networking, component updates, sync or first-run work; a
fresh context per read (no cookies kept), a time limit on the whole read, and its text bounded.

Playwright's sync API refuses to run inside an asyncio loop, and the web app's threads may hold one: the read runs in
a thread of its own."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from urllib.parse import urlsplit

CHROMIUM_FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


class BrowserError(RuntimeError):
    """The page could not be read (the message says why: a bad address, no browser, a time-out)."""


@dataclass(frozen=True)
class PageText:
    url: str  # where the browser ended up (after redirects)
    title: str
    text: str  # what the page shows, as text, at most `max_chars`
    truncated: bool


def check_url(url: str) -> str:
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BrowserError(f"not an http(s) address: {url[:200]!r}")
    return url.strip()


def _read(url: str, executable: str, timeout_s: float, max_chars: int) -> PageText:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    try:
        with sync_playwright() as driver:
            browser = driver.chromium.launch(
                executable_path=executable, headless=True, args=list(CHROMIUM_FLAGS), timeout=timeout_s * 1000
            )
            try:
                context = browser.new_context(java_script_enabled=True, accept_downloads=False)
                page = context.new_page()
                page.set_default_timeout(timeout_s * 1000)
                page.goto(url, wait_until="load", timeout=timeout_s * 1000)
                try:  # scripts that fetch and render after `load`: wait for the network to settle, within the limit
                    page.wait_for_load_state("networkidle", timeout=min(5.0, timeout_s) * 1000)
                except PlaywrightError:
                    pass
                title = page.title()
                text = page.evaluate("() => document.body ? document.body.innerText : ''") or ""
                final = page.url
            finally:
                browser.close()
    except PlaywrightError as exc:
        raise BrowserError(f"the browser could not read {url}: {str(exc).splitlines()[0][:300]}") from None
    text = "\n".join(line.rstrip() for line in str(text).splitlines() if line.strip())
    return PageText(url=final, title=str(title)[:300], text=text[:max_chars], truncated=len(text) > max_chars)


def read_page(
    url: str, *, executable: str = "/usr/bin/chromium", timeout_s: float = 20.0, max_chars: int = 8000
) -> PageText:
    """The page's title and visible text once its scripts ran (BrowserError when it cannot be read)."""
    url = check_url(url)
    result: list[PageText] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(_read(url, executable, timeout_s, max_chars))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            failure.append(exc)

    worker = threading.Thread(target=run, name="browser-read", daemon=True)
    worker.start()
    worker.join(timeout_s * 2 + 30)  # launch + load + settle, each bounded inside; this is the hang guard
    if worker.is_alive():
        raise BrowserError(f"the browser did not finish reading {url} in time")
    if failure:
        exc = failure[0]
        raise exc if isinstance(exc, BrowserError) else BrowserError(f"the browser could not read {url}: {exc}")
    return result[0]


__all__ = ["CHROMIUM_FLAGS", "BrowserError", "PageText", "check_url", "read_page"]
