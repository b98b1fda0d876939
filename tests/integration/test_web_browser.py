"""The web app in a real browser (Debian's chromium under Playwright) over a real `run.py` loop: a note sent on Talk
shows at once and the persona's reply arrives live; a new tick appears on Thoughts; Pause on Controls is obeyed
between ticks and survives a reload; a page of another origin cannot post a note. One test drives the embedded model
end to end. Every wait is bounded; each test leaves a screenshot in tests/artifacts/."""

from __future__ import annotations

import json
import re
import time
import uuid

import pytest

from tests.integration.browser import other_origin, screenshot, script_thoughts, web_loop

pytestmark = pytest.mark.integration

REPLY_S = 60_000  # a scripted tick takes well under a second; this is a hang guard, not a timing
MAX_TICK_JS = (
    "() => Math.max(0, ...[...document.querySelectorAll('#ticks .tick[data-tick]')].map(e => +e.dataset.tick))"
)


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


def test_controls_choose_the_model_and_change_a_priority(page, loop):
    from playwright.sync_api import expect

    page.goto(loop.url + "/controls")
    row = page.locator('#llm-models tr[data-llm="server"]')
    row.get_by_role("button", name="Think with it").click()
    expect(row.get_by_test_id("selected-llm")).to_have_text("chosen", timeout=5_000)
    row.get_by_role("spinbutton").fill("77")
    # the typed 77 is in the field before the server answers: wait for the save itself, then for its fragment
    with page.expect_response(
        lambda r: r.url == loop.url + "/controls/llms/server" and r.request.method == "POST"
    ) as saved:
        row.get_by_role("button", name="Save").click()
    assert saved.value.ok, saved.value.status
    expect(page.locator('#llm-models tr[data-llm="server"]').get_by_role("spinbutton")).to_have_value("77")
    screenshot(page, "controls-models")
    page.reload()  # saved in the data dir, not in the page
    row = page.locator('#llm-models tr[data-llm="server"]')
    expect(row.get_by_test_id("selected-llm")).to_have_text("chosen")
    expect(row.get_by_role("spinbutton")).to_have_value("77")
    llms = {r["id"]: r for r in loop.api("/api/llms")}
    assert llms["server"]["selected"] and llms["server"]["priority"] == 77
    row.get_by_role("button", name="Unchoose").click()
    expect(page.get_by_test_id("selected-llm")).to_have_count(0, timeout=5_000)
    ticks = loop.status()["ticks"]
    loop.wait_for(lambda: loop.status()["ticks"] > ticks, 60, "a tick after the change")  # the loop thinks on


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
    own = page.evaluate(
        """async (text) => {
        const token = JSON.parse(document.body.getAttribute('hx-headers'))['X-CSRF-Token'];
        const answer = await fetch('/api/notes', {method: 'POST', body: JSON.stringify({text}),
            headers: {'Content-Type': 'application/json', 'X-CSRF-Token': token}});
        return answer.status; }""",
        f"{marker} from the app itself",
    )
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
        print(
            json.dumps(
                {
                    "embedded_ticks": loop.status()["ticks"],
                    "first_card": closed.get_attribute("class"),
                    "replies": replies[:3],
                },
                ensure_ascii=False,
            )
        )
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
                thread_id="main",
                root_thread="main",
                tick=1,
                cmd_key=f"main:1:{uuid.uuid4().hex}",
                cmd_id="c1",
                type="notepad.clear",
                args={},
                effect="modify_self",
                description="clear my notepad",
                reason=f"browser test {uuid.uuid4().hex[:8]}",
            )
    finally:
        db.close()
    card = page.locator("#approvals").get_by_text(approval.reason)
    expect(card).to_be_visible(timeout=REPLY_S)  # the list reloads on the next tick's event, without a reload
    assert not_reloaded(page)
    screenshot(page, "approvals-live")


def _persona_db(loop):
    from memory import Database

    return Database.open(loop.data_dir)


def test_inner_life_a_drive_slider_moved_persists_after_a_reload(page, loop):
    from playwright.sync_api import expect

    page.goto(loop.url + "/inner-life")
    slider = page.get_by_role("slider", name="curiosity")
    expect(slider).to_be_visible()
    with page.expect_response(
        lambda r: r.url == loop.url + "/inner-life/drives/curiosity" and r.request.method == "PUT"
    ) as saved:
        slider.fill("0.83")  # a range input: Playwright sets its value and fires input and change, as a drag does
    assert saved.value.status == 200
    expect(page.locator("#drives details summary")).to_contain_text("Your changes")
    page.reload()
    level = float(page.get_by_role("slider", name="curiosity").input_value())
    assert abs(level - 0.83) <= 0.02, level  # what the human set, fading back over hours (not seconds)
    drives = {d["name"]: d for d in loop.api("/api/drives")["drives"]}
    assert (
        drives["curiosity"]["adjusted"]["by"] == "human" and abs(drives["curiosity"]["adjusted"]["level"] - 0.83) < 1e-6
    )
    assert [(c["drive"], c["level"]) for c in loop.api("/api/drives")["history"]][:1] == [("curiosity", 0.83)]
    screenshot(page, "inner-life-drive-set")


def test_inner_life_an_open_question_is_resolved_then_another_deleted(page, loop):
    from playwright.sync_api import expect

    token = uuid.uuid4().hex[:8]
    db = _persona_db(loop)
    try:
        with db.unit() as repos:
            tides = repos.questions.add(f"Why do tides rise twice a day? ({token})", priority=0.9).id
            eels = repos.questions.add(f"Where do eels go? ({token})", priority=0.8).id
    finally:
        db.close()
    page.on("dialog", lambda dialog: dialog.accept())  # "Delete this question for good?"
    page.goto(loop.url + "/inner-life")
    row = page.locator(f"#question-{tides}")
    row.get_by_role("textbox", name=f"resolution of question {tides}").fill("The moon and the sun.")
    row.get_by_role("button", name="Resolve").click()
    expect(page.locator(f"#question-{tides}")).to_contain_text("resolved: The moon and the sun.")
    page.get_by_role("button", name=f"delete question {eels}").click()
    expect(page.locator(f"#question-{eels}")).to_have_count(0)
    screenshot(page, "inner-life-questions")
    page.reload()
    expect(page.locator(f"#question-{tides}")).to_contain_text("resolved: The moon and the sun.")
    expect(page.locator(f"#question-{eels}")).to_have_count(0)
    listed = {q["id"]: q for q in loop.api("/api/questions")["questions"]}
    assert listed[tides]["status"] == "resolved" and eels not in listed


def test_memory_a_diary_entry_edited_on_the_page_shows_in_its_history(page, loop):
    from playwright.sync_api import expect

    token = uuid.uuid4().hex[:8]
    db = _persona_db(loop)
    try:
        with db.unit() as repos:  # the persona's own entry, as its diary.add writes it
            ref = str(repos.diary.add(f"The lighthouse keeper waved at dawn ({token}).").id)
    finally:
        db.close()
    page.goto(loop.url + "/memory?tier=diary")
    row = page.locator(f"#row-diary-{ref}")
    row.get_by_role("button", name="Edit").click()
    editing = page.locator(f"#row-diary-{ref}.editing")
    editing.get_by_role("textbox", name="Text").fill(f"The keeper waved twice ({token}).")
    editing.get_by_role("button", name="Save").click()
    expect(page.locator(f"#row-diary-{ref}")).to_contain_text(f"The keeper waved twice ({token}).")
    page.locator(f"#row-diary-{ref}").get_by_role("button", name="History").click()
    history = page.locator("#history")
    expect(history.get_by_role("heading", name=f"History of diary {ref}")).to_be_visible()
    newest = history.locator("tr.change").first
    expect(newest).to_contain_text("human")
    expect(newest).to_contain_text(f"update diary {ref}")
    expect(newest.locator("td").nth(3)).to_contain_text(f"waved at dawn ({token})")  # before
    expect(newest.locator("td").nth(4)).to_contain_text(f"waved twice ({token})")  # after
    expect(history.locator("tr.change.create")).to_contain_text("persona")
    screenshot(page, "memory-edit-history")
    changes = loop.api(f"/api/memory/diary/{ref}/history")["changes"]
    assert [(c["actor"], c["action"]) for c in changes] == [("human", "update"), ("persona", "create")]


def test_approvals_an_approved_command_runs_once_at_the_next_tick(page, loop):
    from playwright.sync_api import expect

    token = uuid.uuid4().hex[:8]
    loop.api("/api/memory/notepad/notepad", "PATCH", {"content": f"buy ink ({token})"})
    db = _persona_db(loop)
    try:
        with db.unit() as repos:  # what the gate parks when the persona asks (tests/unit/test_consent.py: the gate)
            approval, _ = repos.approvals.request(
                thread_id="main",
                root_thread="main",
                tick=1,
                cmd_key=f"main:1:{token}",
                cmd_id="c1",
                type="notepad.clear",
                args={},
                effect="modify_self",
                description="a clean page",
                reason=f"modify_self needs your approval ({token})",
            )
    finally:
        db.close()
    page.goto(loop.url + "/approvals")
    mark_page(page)
    card = page.locator(f"#approval-{approval.id}")
    card.get_by_role("button", name="Approve").click()
    # the card says it is approved — unless the loop's next tick already ran it and the list reloaded to the decided
    decided = page.locator(f"#approval-{approval.id} [data-testid='decision'], #decided-{approval.id}").first
    expect(decided).to_contain_text(re.compile("approved|executed"))
    # the loop runs it at its next tick, and the list reloads on that tick's event: it moves to the decided ones
    expect(page.locator(f"#decided-{approval.id}")).to_contain_text("executed", timeout=REPLY_S)
    expect(page.locator(f"#approval-{approval.id}")).to_have_count(0)
    assert not_reloaded(page)
    screenshot(page, "approvals-executed")
    ticks_then = loop.status()["ticks"]
    loop.wait_for(lambda: loop.status()["ticks"] >= ticks_then + 2, 60, "two more ticks")
    db = _persona_db(loop)
    try:
        with db.unit() as repos:
            row = repos.approvals.get(approval.id)
            assert row.status == "executed" and row.executed_at is not None
            assert [e.decision for e in repos.audit.for_approval(approval.id)].count("executed") == 1
            assert repos.blocks.get("notepad").content == ""
    finally:
        db.close()


def test_persona_a_broken_config_is_refused_with_its_error_and_the_file_kept(page, loop):
    from playwright.sync_api import expect

    page.goto(loop.url + "/persona")
    page.get_by_role("link", name="config.yaml").click()
    editor = page.get_by_role("textbox", name="config.yaml")
    expect(editor).to_be_visible()
    before = editor.input_value()
    editor.fill(before + "\nmemory:\n  recall_k: [unclosed\n")
    page.get_by_role("button", name="Save config.yaml").click()
    flash = page.locator("#flash")
    expect(flash).to_contain_text("config.yaml:")
    expect(flash).to_contain_text("(yaml)")
    editor.fill(before + "\nmemory:\n  recall_k: -3\n")  # a second refusal shows too, with the key
    page.get_by_role("button", name="Save config.yaml").click()
    expect(flash).to_contain_text("memory.recall_k")
    screenshot(page, "persona-config-refused")
    assert loop.api("/api/persona/config")["text"] == before  # the last good version is kept
    page.reload()
    page.get_by_role("link", name="config.yaml").click()
    expect(page.get_by_role("textbox", name="config.yaml")).to_have_value(before)
