"""A local HTTP server for the world-input tests: RSS and Atom feeds (with ETag: a second fetch is a 304), a
SearXNG-shaped JSON search endpoint, an OpenAI-compatible chat endpoint that "searches", a broken feed, and a page
whose text its script writes."""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

RSS = """<?xml version="1.0"?>
<rss version="2.0"><channel><title>Tide News</title><link>http://tides.test/</link>
<item><title>Spring tide tonight</title><link>http://tides.test/1</link><guid>tide-1</guid>
<description>&lt;p&gt;The &lt;b&gt;highest&lt;/b&gt; tide of the year comes at 21:40.&lt;/p&gt;</description></item>
<item><title>Seals return to the bay</title><link>http://tides.test/2</link><guid>tide-2</guid>
<description>Forty grey seals were counted on the sandbank.</description></item>
</channel></rss>"""

ATOM = """<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>Wind \
Log</title><id>urn:wind</id><updated>2026-11-01T00:00:00Z</updated>
<entry><title>The mistral is back</title><id>urn:wind:1</id><link href="http://wind.test/1"/>
<updated>2026-11-01T00:00:00Z</updated><summary>Cold gusts down the Rhône valley.</summary></entry>
</feed>"""


PAGE = """<!doctype html><html><head><title>Harbour notices</title></head><body><main id="board"></main>
<script>document.getElementById("board").textContent = "The ferry leaves at " + (6 + 1) + " tonight.";</script>
</body></html>"""


class Handler(BaseHTTPRequestHandler):
    hits: dict[str, int] = {}
    queries: list[str] = []

    def log_message(self, *args):  # quiet
        pass

    def _send(self, status: int, body: str, kind: str, headers: dict[str, str] | None = None) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urlsplit(self.path)
        Handler.hits[url.path] = Handler.hits.get(url.path, 0) + 1
        if url.path == "/tides.rss":
            if self.headers.get("If-None-Match") == '"v1"':
                self.send_response(304)
                self.end_headers()
                return
            self._send(200, RSS, "application/rss+xml", {"ETag": '"v1"'})
        elif url.path == "/wind.atom":
            self._send(200, ATOM, "application/atom+xml")
        elif url.path == "/page.html":  # its words are written by its script: only a real browser reads them
            self._send(200, PAGE, "text/html")
        elif url.path == "/broken.rss":
            self._send(200, "<html>this is not a feed", "text/html")
        elif url.path == "/search":
            query = parse_qs(url.query).get("q", [""])[0]
            Handler.queries.append(query)
            results = [
                {
                    "title": f"{query} — result {i}",
                    "url": f"http://search.test/{i}",
                    "content": f"What the web says about {query}, part {i}.",
                }
                for i in range(1, 8)
            ]
            self._send(200, json.dumps({"query": query, "results": results}), "application/json")
        else:
            self._send(404, "not found", "text/plain")

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if urlsplit(self.path).path == "/v1/chat/completions":
            asked = body["messages"][-1]["content"]
            Handler.queries.append(asked)
            answer = {
                "choices": [
                    {"message": {"role": "assistant", "content": "The Severn bore is a tidal wave (http://bore.test)."}}
                ]
            }
            self._send(200, json.dumps(answer), "application/json")
        else:
            self._send(404, "not found", "text/plain")


@contextmanager
def world_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", Handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
