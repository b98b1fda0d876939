"""The face's assets: nothing is loaded from the network (no CDN: every script, stylesheet, font and image is served
from web/static), every vendored file is the one VENDORED.json pins (sha256) with its package's licence beside it,
and every /static/ path the base page names exists and is served."""

from __future__ import annotations

import hashlib
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "web"
TEMPLATES, STATIC = WEB / "templates", WEB / "static"
VENDOR = STATIC / "vendor"

REMOTE = r"""(?:https?:)?//"""  # an absolute (or protocol-relative) URL: another host
# CSS: url(…) and @import, which the browser fetches (comments stripped first: a URL in a comment loads nothing)
CSS_LOADS = re.compile(
    r"""url\(\s*['"]?\s*""" + REMOTE + r"""|@import\s+(?:url\(\s*)?['"]?\s*""" + REMOTE, re.IGNORECASE
)
CSS_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
# JS: module imports (static, re-exports, dynamic), importScripts, a script/link/img whose src/href is set to a URL.
# A string such as "http://www.w3.org/2000/svg" (an XML namespace in htmx and uPlot) is not a load, and not matched.
Q = r"""["'`]\s*"""
JS_LOADS = re.compile(
    r"""\bimport\s*(?:[\w$*{},\s]+?\s*from\s*)?"""
    + Q
    + REMOTE  # import x from "https://…" / import "https://…"
    + r"""|\bexport\s*[\w$*{},\s]+?\s*from\s*"""
    + Q
    + REMOTE  # export … from "https://…"
    + r"""|\bimport\s*\(\s*"""
    + Q
    + REMOTE  # import("https://…")
    + r"""|\bimportScripts\s*\(\s*"""
    + Q
    + REMOTE
    + r"""|\.(?:src|href)\s*=\s*"""
    + Q
    + REMOTE  # el.src = "https://…"
    + r"""|setAttribute\(\s*["'](?:src|href)["']\s*,\s*"""
    + Q
    + REMOTE
    + r"""|new\s+(?:Shared)?Worker\(\s*"""
    + Q
    + REMOTE
)
NAVIGATION = {"a", "area", "form"}  # an href/action a human follows is a link, not an asset the page loads
ASSET_ATTRIBUTES = {"src", "href", "srcset", "data", "poster", "background", "xlink:href"}


class _AssetRefs(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs) -> None:
        for name, value in attrs:
            value = (value or "").strip()
            if name == "style":
                self.found += [f"<{tag} style>: {m.group(0)}" for m in CSS_LOADS.finditer(value)]
            elif tag not in NAVIGATION and name in ASSET_ATTRIBUTES:
                urls = [part.strip().split(" ")[0] for part in value.split(",")] if name == "srcset" else [value]
                self.found += [f"<{tag} {name}={u!r}>" for u in urls if re.match(REMOTE, u, re.IGNORECASE)]
        self._in = tag if tag in ("script", "style") else None

    def handle_endtag(self, tag: str) -> None:
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "style":
            self.found += [f"<style>: {m.group(0)}" for m in CSS_LOADS.finditer(CSS_COMMENT.sub("", data))]
        elif self._in == "script":
            self.found += [f"<script>: {m.group(0)}" for m in JS_LOADS.finditer(data)]


def remote_loads(path_or_name: str | Path, text: str | None = None) -> list[str]:
    """What a template, stylesheet or script would fetch from another host."""
    name = str(path_or_name)
    text = Path(path_or_name).read_text(encoding="utf-8") if text is None else text
    if name.endswith((".html", ".htm", ".jinja", ".j2")):
        parser = _AssetRefs()
        parser.feed(text)
        parser.close()
        return parser.found
    if name.endswith(".css"):
        return [m.group(0) for m in CSS_LOADS.finditer(CSS_COMMENT.sub("", text))]
    if name.endswith((".js", ".mjs")):
        return [m.group(0) for m in JS_LOADS.finditer(text)]
    return []


def checked_files() -> list[Path]:
    files = [p for p in TEMPLATES.rglob("*") if p.is_file()]
    files += [p for p in STATIC.rglob("*") if p.suffix in (".css", ".js", ".mjs", ".html")]
    return sorted(files)


def test_the_checker_finds_real_cdn_references_and_ignores_namespaces_links_and_comments():
    bad_html = """{% extends "base.html" %}<head>
      <script src="https://unpkg.com/htmx.org@2.0.4"></script>
      <link rel="stylesheet" href="//cdn.jsdelivr.net/npm/@picocss/pico@2/css/pico.min.css">
      <img srcset="/static/a.png 1x, https://img.example.com/b.png 2x">
      <div style="background: url('https://example.com/bg.png')"></div>
      <style>@import url("https://fonts.googleapis.com/css2?family=Inter");</style>
      <script type="module">import confetti from "https://esm.sh/canvas-confetti";</script></head>"""
    found = remote_loads("page.html", bad_html)
    assert len(found) == 6, found
    assert remote_loads(
        "x.css", "/* https://picocss.com */ @import 'https://a.b/c.css'; b{background:url(//x.y/z.png)}"
    ) == ["@import 'https://", "url(//"]
    bad_js = [
        'import {a} from "https://esm.sh/a";',
        "import 'https://x.y/side-effect.js';",
        'const m = await import("https://cdn.example/m.js");',
        'importScripts("https://x/worker.js")',
        's.src = "https://cdn.example/lib.js";',
        "el.setAttribute('href', '//cdn.example/x.css')",
        'export * from "https://esm.sh/b"',
        "new Worker('https://x/w.js')",
    ]
    assert [len(remote_loads("x.js", js)) for js in bad_js] == [1] * len(bad_js)
    fine_html = (
        '<a href="https://github.com/anima">source</a><form action="https://example.com"></form>'
        '<link rel="stylesheet" href="/static/app.css"><script src="/static/app.js"></script>'
        '<li><a href="{{ href }}" {% if x %}aria-current="page"{% endif %}>x</a></li>'
    )
    assert remote_loads("ok.html", fine_html) == []
    fine_js = (
        'var s=document.createElementNS("http://www.w3.org/2000/svg","svg");'
        'x.setAttributeNS("http://www.w3.org/1999/xlink","href","#a");/* see https://htmx.org */'
        'const important = "https://example.com"; fetch("/api/notes"); a.src = "/static/x.png";'
    )
    assert remote_loads("ok.js", fine_js) == []


def test_no_template_or_static_file_loads_anything_from_another_host():
    files = checked_files()
    assert any(p.name == "base.html" for p in files) and any(p.name == "htmx.min.js" for p in files)
    found = {str(p.relative_to(ROOT)): refs for p in files if (refs := remote_loads(p))}
    assert not found, json.dumps(found, indent=2)


def _vendored() -> dict:
    return json.loads((VENDOR / "VENDORED.json").read_text(encoding="utf-8"))


def test_every_vendored_file_matches_its_pinned_sha256_and_nothing_unlisted_is_there():
    packages = _vendored()["packages"]
    assert packages, "VENDORED.json lists no package"
    wrong, listed = [], set()
    for package in packages:
        for name, digest in package["files"].items():
            path = VENDOR / package["dir"] / name
            listed.add(path)
            if not path.is_file():
                wrong.append(f"{package['dir']}/{name}: missing")
            elif hashlib.sha256(path.read_bytes()).hexdigest() != digest:
                wrong.append(f"{package['dir']}/{name}: sha256 differs from VENDORED.json")
    assert not wrong, wrong
    on_disk = {p for p in VENDOR.rglob("*") if p.is_file() and p.parent != VENDOR}
    assert on_disk == listed, f"not in VENDORED.json: {sorted(map(str, on_disk - listed))}"
    dirs = {p.name for p in VENDOR.iterdir() if p.is_dir()}
    assert dirs == {p["dir"] for p in packages}


@pytest.mark.parametrize("package", [p["dir"] for p in _vendored()["packages"]])
def test_every_vendored_package_carries_its_licence(package):
    entry = next(p for p in _vendored()["packages"] if p["dir"] == package)
    licences = [p for p in (VENDOR / package).iterdir() if re.match(r"(LICEN[CS]E|COPYING)", p.name, re.IGNORECASE)]
    assert licences, f"{package}: no LICENSE file"
    assert any(p.name in entry["files"] for p in licences)  # pinned like the code
    assert entry.get("license") and entry.get("version") and entry["dir"].endswith(entry["version"])
    text = " ".join(p.read_text(encoding="utf-8", errors="replace") for p in licences)
    assert {
        "MIT": "Permission is hereby granted",
        "0BSD": "Permission to use, copy, modify",
        "Apache-2.0": "Apache License",
    }.get(entry["license"], "") in text


def _static_refs(template: Path) -> list[str]:
    text = template.read_text(encoding="utf-8")
    return sorted(set(re.findall(r"""(?:src|href)\s*=\s*["'](/static/[^"'?#]+)""", text)))


def test_every_static_path_the_base_page_names_exists_and_is_served(web):
    refs = _static_refs(TEMPLATES / "base.html")
    assert "/static/app.css" in refs and any("htmx" in r for r in refs)
    missing = [r for r in refs if not (STATIC / r.removeprefix("/static/")).is_file()]
    assert not missing, missing
    for ref in refs:
        answer = web.client.get(ref)
        assert answer.status_code == 200 and answer.content == (STATIC / ref.removeprefix("/static/")).read_bytes(), ref
    page = web.client.get("/")
    assert all(ref in page.text for ref in refs)  # the rendered page names the same files


def test_the_api_docs_page_names_only_the_apps_own_files_and_each_is_served(web):
    """/docs is Swagger UI from the vendored swagger-ui-dist (its validator, which would ask another host, off);
    ReDoc, which would need a CDN, is not served. The browser renders it offline: tests/integration/
    test_api_docs_browser.py."""
    page = web.client.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    refs = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)""", page.text)
    assert sorted(refs) == [
        "/static/vendor/swagger-ui-dist-5.35.0/favicon-32x32.png",
        "/static/vendor/swagger-ui-dist-5.35.0/swagger-ui-bundle.js",
        "/static/vendor/swagger-ui-dist-5.35.0/swagger-ui.css",
    ]
    assert not re.search(REMOTE, page.text.replace("http://www.w3.org", ""))  # no URL of another host at all
    assert "url: '/openapi.json'" in page.text and '"validatorUrl": null' in page.text
    for ref in refs:
        assert web.client.get(ref).status_code == 200, ref
    assert web.client.get("/redoc").status_code == 404


def test_the_api_docs_page_keeps_a_personas_prefix(web):
    from fastapi.testclient import TestClient

    with TestClient(web.app, base_url="http://127.0.0.1", root_path="/p/ada") as prefixed:
        text = prefixed.get("/docs").text
    assert "url: '/p/ada/openapi.json'" in text
    assert 'src="/p/ada/static/vendor/swagger-ui-dist-5.35.0/swagger-ui-bundle.js"' in text
