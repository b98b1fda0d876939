"""A web page read in a real browser (Debian's Chromium through Playwright), behind consent: the persona asks, the
owner approves, the page's own script writes the text the persona reads — proof it is a browser, not an HTTP
fetch —, the text is bounded, and the next prompt holds it fenced as data with its address."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from nodes.context import utcnow
from reach.browser import BrowserError, read_page
from tests.fakes.llm import FakeLLM
from tests.fakes.managers import answer

pytestmark = pytest.mark.integration

PAGE = b"""<!doctype html><html><head><title>Harbour tides</title></head><body>
<p id="tide">Loading the tide table...</p>
<script>
  setTimeout(function () {
    document.getElementById("tide").textContent = "High water at " + (3 * 4) + ":12 on Sunday, rendered by script";
  }, 30);
</script></body></html>"""
LONG = b"<html><body><script>document.body.textContent = 'wave '.repeat(5000);</script></body></html>"


@pytest.fixture
def site():
    pages = {"/tides": PAGE, "/long": LONG}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            body = pages.get(self.path)
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_chromium_runs_the_pages_script_and_the_text_is_bounded(site):
    page = read_page(f"{site}/tides", timeout_s=30)
    assert page.title == "Harbour tides"
    assert page.text == "High water at 12:12 on Sunday, rendered by script"  # only a browser runs the script
    long = read_page(f"{site}/long", timeout_s=30, max_chars=300)
    assert len(long.text) == 300 and long.truncated
    with pytest.raises(BrowserError, match="not an http"):
        read_page("file:///etc/passwd")


def test_the_persona_reads_a_page_after_approval_and_the_next_prompt_fences_it(agent_factory, site):
    ask = (
        "I want the tide table.\n# Commands:\n"
        + json.dumps([{"type": "web.read", "args": {"url": f"{site}/tides"}}])
        + "\n# End commands"
    )
    fake = FakeLLM("fake", responses=[ask, "Waiting for my human.", "Read it.", "Thinking about the tide."])
    agent = agent_factory(fake, tools={"page_timeout_s": 30})
    first = agent.tick()
    assert [e["status"] for e in first["executed"]] == ["pending_approval"]  # external: the owner decides
    with agent.services.db.unit() as repos:
        [approval] = repos.approvals.pending()
        assert (approval.type, approval.effect) == ("web.read", "external")
    answer(agent.services.db, approval.id, approve=True, by="human", now=utcnow())
    second = agent.tick()
    [ran] = [e for e in second["executed"] if e.get("approval_id") == approval.id]
    assert ran["status"] == "executed" and "High water at 12:12 on Sunday" in ran["result"], ran
    third = agent.tick()
    prompt = [c["prompt"] for c in fake.calls if c["json_schema"] is None][-1]
    fenced = [m.group(1) for m in re.finditer(r'<data id="[^"]+" from="[^"]*">\n(.*?)\n</data', prompt, re.DOTALL)]
    assert any("High water at 12:12 on Sunday" in body for body in fenced)  # inside a data fence, never loose
    assert "High water" not in re.sub(r'<data id="[^"]+".*?</data id="[^"]+">', "", prompt, flags=re.DOTALL)
    # the tick that read it knows where it came from: a web page, by its address (it gates what the tick may do)
    assert {"origin": "web", "ref": f"{site}/tides"}.items() <= next(
        s for s in third["untrusted"] if s["origin"] == "web"
    ).items()
