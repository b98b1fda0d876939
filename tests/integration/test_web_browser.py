"""The web app in a real browser (Debian's chromium under Playwright) over a real `run.py` loop: a note sent on Talk
shows at once and the persona's reply arrives live; a new tick appears on Thoughts; Pause on Controls is obeyed
between ticks and survives a reload; a page of another origin cannot post a note. One test drives the embedded model
end to end. Every wait is bounded; each test leaves a screenshot in tests/artifacts/."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from tests.integration.browser import other_origin, screenshot, script_thoughts, web_loop

pytestmark = pytest.mark.integration

REPLY_S = 60_000  # a scripted tick takes well under a second; this is a hang guard, not a timing
MAX_TICK_JS = "() => Math.max(0, ...[...document.querySelectorAll('#ticks .tick[data-tick]')].map(e => +e.dataset.tick))"


@pytest.fixture(scope="module")
def loop(scripted_server, tmp_path_factory):
    """One `run.py` loop for the module, thinking on the scripted server (varied thoughts, 1.5 s between ticks)."""
    script_thoughts(scripted_server)
    with web_loop(tmp_path_factory.mktemp("browser-loop"), llm_url=scripted_server.url) as running:
        running.wait_for(lambda: running.status()["ticks"] >= 1, 60, "the first tick")
        yield running


def mark_page(page) -> None:
    """A marker that a reload would wipe: a test that still sees it saw the change arrive live."""
    page.evaluate("window.__no_reload = 'still here'")


def not_reloaded(page) -> bool:
    return page.evaluate("window.__no_reload") == "still here"


def test_talk_a_note_shows_at_once_and_the_reply_arrives_live(page, loop, scripted_server):
    from playwright.sync_api import expect

    with page.expect_response(lambda r: r.url == loop.url + "/live/talk") as stream:  # the live stream is open
        page.goto(loop.url + "/")
    assert stream.value.status == 200
    expect(page.get_by_role("heading", name="Talk")).to_be_visible()
    mark_page(page)
    token = uuid.uuid4().hex[:8]
    reply = f"Hello, human. I heard you ({token})."
    note = f"Hello Lumen, this is the browser test {token}."
    page.get_by_role("textbox", name="Message").fill(note)
    script_thoughts(scripted_server, replies=6, reply=reply, seed=11)  # the next ticks answer
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#conversation .bubble.human", has_text=note)).to_be_visible(timeout=5_000)  # at once
    expect(page.get_by_role("textbox", name="Message")).to_have_value("")  # the form was reset
    expect(page.locator("#conversation .bubble.persona", has_text=token).first).to_be_visible(timeout=REPLY_S)
    assert not_reloaded(page)
    screenshot(page, "talk-reply")
    script_thoughts(scripted_server, seed=12)
    assert any(i["who"] == "human" and i["text"] == note for i in loop.conversation())


def test_thoughts_a_new_tick_card_appears_live(page, loop):
    from playwright.sync_api import expect

    page.goto(loop.url + "/thoughts")
    expect(page.get_by_role("heading", name="Thoughts")).to_be_visible()
    expect(page.locator("#ticks .tick[data-tick]").first).to_be_visible(timeout=REPLY_S)
    mark_page(page)
    before = page.evaluate(MAX_TICK_JS)
    page.wait_for_function(f"(n) => ({MAX_TICK_JS})() > n", arg=before, timeout=REPLY_S)
    assert not_reloaded(page)
    newest = page.locator("#ticks .tick[data-tick]").first
    assert int(newest.get_attribute("data-tick")) > before
    page.wait_for_function(f"(n) => ({MAX_TICK_JS})() > n + 1", arg=before, timeout=REPLY_S)  # and another
    ids = page.eval_on_selector_all("#ticks article.tick", "cards => cards.map(c => c.id)")
    assert len(ids) == len(set(ids))  # a tick shown while running is replaced by its closed card, never shown twice
    screenshot(page, "thoughts-new-tick")


def test_controls_pause_is_obeyed_survives_a_reload_and_start_resumes(page, loop):
    from playwright.sync_api import expect

    page.goto(loop.url + "/controls")
    state, want = page.get_by_test_id("loop-state"), page.get_by_test_id("loop-want")
    expect(state).to_have_text("running")
    page.get_by_role("button", name="Pause").click()
    expect(want).to_have_text("paused", timeout=5_000)  # the flag is written at once
    expect(state).to_have_text("paused", timeout=REPLY_S)  # the loop obeys between ticks (the page polls every 3 s)
    paused_at = loop.status()["ticks"]
    time.sleep(4)  # longer than a tick and its pause: a loop that ignored the flag would have ticked
    assert loop.status()["ticks"] == paused_at
    screenshot(page, "controls-paused")
    page.reload()
    expect(state).to_have_text("paused")
    expect(want).to_have_text("paused")
    expect(page.get_by_role("button", name="Pause")).to_have_attribute("aria-pressed", "true")
    page.get_by_role("button", name="Start").click()
    expect(state).to_have_text("running", timeout=REPLY_S)
    loop.wait_for(lambda: loop.status()["ticks"] > paused_at, 60, "a tick after Start")
    screenshot(page, "controls-started-again")


FORGED = """<!doctype html><html><head><title>not anima</title></head><body>
<h1>A page of another origin</h1>
<form id="forged-form" method="post" action="{app}/talk/notes"><input name="text" value="{marker} via a form">
<button type="submit">Win a prize</button></form>
<script>
async function forgeFetch() {{
  // a "simple" request (no preflight): the browser does send it, with this page's Origin
  await fetch("{app}/api/notes", {{method: "POST", mode: "no-cors", credentials: "include",
    headers: {{"Content-Type": "text/plain"}}, body: JSON.stringify({{text: "{marker} via fetch"}})}});
  return "sent";
}}
</script></body></html>"""


def test_a_page_of_another_origin_cannot_post_a_note(page, loop):
    marker = f"forged-{uuid.uuid4().hex[:8]}"
    with other_origin(FORGED.format(app=loop.url, marker=marker)) as evil:
        page.goto(evil)
        with page.expect_response(lambda r: r.url == loop.url + "/api/notes" and r.request.method == "POST") as fetched:
            assert page.evaluate("forgeFetch()") == "sent"
        assert fetched.value.status == 403
        sent = fetched.value.request.all_headers()  # what Playwright sees of it (Chromium adds Origin below that)
        assert (sent.get("origin") or sent.get("referer") or "").startswith(evil.rstrip("/"))
        with page.expect_response(lambda r: r.url == loop.url + "/talk/notes") as submitted:
            page.get_by_role("button", name="Win a prize").click()
        assert submitted.value.status == 403
        page.wait_for_load_state()
        assert "cross-site request refused" in page.content()
        screenshot(page, "csrf-refused")
    assert not [i for i in loop.conversation() if marker in i["text"]]  # nothing stored

    # the app's own page, with its CSRF header, may (the same fetch, same origin)
    page.goto(loop.url + "/")
    own = page.evaluate("""async (text) => {
        const token = JSON.parse(document.body.getAttribute('hx-headers'))['X-CSRF-Token'];
        const answer = await fetch('/api/notes', {method: 'POST', body: JSON.stringify({text}),
            headers: {'Content-Type': 'application/json', 'X-CSRF-Token': token}});
        return answer.status; }""", f"{marker} from the app itself")
    assert own == 201
    without = page.evaluate("""async () => (await fetch('/api/notes', {method: 'POST', body: '{"text": "no header"}',
        headers: {'Content-Type': 'application/json'}})).status""")
    assert without == 403
    texts = [i["text"] for i in loop.conversation()]
    assert f"{marker} from the app itself" in texts and "no header" not in texts


EMBEDDED_TICK_S = 600  # Gemma 3 270M on the CPU, reflexes included (minutes on a busy 2-core machine): bounded
BONUS_S = 90


def test_the_embedded_model_end_to_end_a_note_on_talk_and_a_new_tick(page, tmp_path):
    """`run.py --ticks forever --port …` with no --llm-url: the persona thinks on the embedded model; a note sent on
    Talk shows, and a closed tick appears on Thoughts (a reply soon after is a bonus, printed, not asserted)."""
    from playwright.sync_api import expect

    with web_loop(tmp_path / "embedded", llm_url=None, pace_s=None, start_s=240) as loop:
        page.goto(loop.url + "/")
        note = "Hello! What are you thinking about right now?"
        page.get_by_role("textbox", name="Message").fill(note)
        page.get_by_role("button", name="Send").click()
        expect(page.locator("#conversation .bubble.human", has_text=note)).to_be_visible(timeout=5_000)
        page.goto(loop.url + "/thoughts")
        expect(page.get_by_role("heading", name="Thoughts")).to_be_visible()
        closed = page.locator("#ticks .tick[data-tick]:not(.tick-running)").first  # a fresh data dir: a new tick
        expect(closed).to_be_visible(timeout=EMBEDDED_TICK_S * 1000)
        screenshot(page, "embedded-thoughts")
        status = loop.status()
        assert status["ticks"] >= 1 and status["last_tick"] is not None, status
        try:  # the bonus: a reply soon after
            loop.wait_for(lambda: any(i["who"] == "persona" for i in loop.conversation()), BONUS_S, "a reply")
        except AssertionError:
            pass
        replies = [i["text"] for i in loop.conversation() if i["who"] == "persona"]
        print(json.dumps({"embedded_ticks": loop.status()["ticks"], "first_card": closed.get_attribute("class"),
                          "replies": replies[:3]}, ensure_ascii=False))
        page.goto(loop.url + "/")
        screenshot(page, "embedded-talk")


def test_approvals_a_new_request_appears_live(page, loop):
    from playwright.sync_api import expect

    from memory import Database

    page.goto(loop.url + "/approvals")
    mark_page(page)
    db = Database.open(loop.data_dir)
    try:
        with db.unit() as repos:  # what the gate writes when the persona asks; the loop's next tick journals it
            approval, _ = repos.approvals.request(
                thread_id="main", root_thread="main", tick=1, cmd_key=f"main:1:{uuid.uuid4().hex}", cmd_id="c1",
                type="notepad.clear", args={}, effect="modify_self", description="clear my notepad",
                reason=f"browser test {uuid.uuid4().hex[:8]}")
    finally:
        db.close()
    card = page.locator("#approvals").get_by_text(approval.reason)
    expect(card).to_be_visible(timeout=REPLY_S)  # the list reloads on the next tick's event, without a reload
    assert not_reloaded(page)
    screenshot(page, "approvals-live")
