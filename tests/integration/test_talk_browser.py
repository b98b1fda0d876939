"""The Talk page as people expect a chat, in a real browser (Debian's chromium under Playwright) over `run.py` with its
loop on a scripted server (tests/integration/scripted_llm_server.py: it answers whatever note it is shown): one thread
per person with the door's badge and the person's name, the owner opens any; Enter sends and Shift+Enter is a new
line; the composer stays in view; the navigation's badge counts a contact request live and drops after the owner
answers it; every text's contrast is at least WCAG AA (4.5:1), measured in the page; Japanese is drawn with a real
font. Every wait is bounded."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.fakes.managers import managers_over
from tests.integration.browser import screenshot, web_loop

pytestmark = pytest.mark.integration
ANSWER = "Heard you (note {note})."

# The WCAG 2 contrast of every visible text element's colour against the background it is drawn on (the nearest
# ancestor with an opaque one), the lowest first; text inside a control's own styling (inputs) included.
CONTRAST_JS = """
() => {
  const parse = (c) => { const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return null;
    const p = m[1].split(',').map(Number); return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1}; };
  const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, \
2.4); };
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); };
  const background = (el) => { for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor); if (c && c.a > 0.5) return c; }
    return {r: 255, g: 255, b: 255, a: 1}; };
  const out = [];
  for (const el of document.querySelectorAll('body *')) {
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own || el.closest('.visually-hidden,[hidden]') || !el.getClientRects().length) continue;
    const style = getComputedStyle(el); if (style.visibility === 'hidden' || style.display === 'none') continue;
    const fg = parse(style.color), bg = background(el); if (!fg) continue;
    const a = fg.a, mixed = {r: fg.r * a + bg.r * (1 - a), g: fg.g * a + bg.g * (1 - a), b: fg.b * a + bg.b * (1 - a)};
    const [l1, l2] = [lum(mixed), lum(bg)].sort((x, y) => y - x);
    out.push({text: el.textContent.trim().slice(0, 40), tag: el.tagName, cls: el.className, ratio: (l1 + 0.05) / (l2 \
+ 0.05)});
  }
  return out.sort((x, y) => x.ratio - y.ratio);
}
"""

# Whether a character is drawn as a real glyph in the page's font, not as the missing-glyph box every font draws
# the same for an unassigned code point.
GLYPH_JS = """
(text) => {
  const font = getComputedStyle(document.body).fontFamily;
  const draw = (s) => { const c = document.createElement('canvas'); c.width = 64; c.height = 64;
    const x = c.getContext('2d'); x.font = '40px ' + font; x.fillText(s, 4, 48);
    return Array.from(x.getImageData(0, 0, 64, 64).data).join(','); };
  return draw(text) !== draw('\\u{10FFFD}') && draw(text) !== draw('');
}
"""


def _seed(data_dir) -> int:
    """Ann, a guest who wrote by Matrix (through the one way in, as the channel runner would)."""
    from managers.conversation import Words
    from memory import Database
    from memory.note_kinds import Door

    db = Database.open(data_dir)
    try:
        with db.unit() as repos:
            m = managers_over(repos)
            ann = m.people.add("Ann", role="guest")
            m.people.add_identity(ann.id, "matrix", "@ann:example.org")
            m.conversation.hear(
                Words("Hello from the harbour, it's Ann.", door=Door.MATRIX, person_id=ann.id, channel="matrix")
            )
            return ann.id
    finally:
        db.close()


def _stranger_writes(data_dir) -> None:
    from managers.channels import Arrival
    from memory import Database
    from persona.settings import ChannelEntry

    now = datetime.now(UTC)
    db = Database.open(data_dir)
    try:
        with db.unit() as repos:
            managers_over(repos).channels.receive(
                Arrival(
                    channel="matrix",
                    platform_id="$s1",
                    sender="@zed:example.org",
                    sender_name="Zed",
                    conversation="!z",
                    text="hi, I'm Zed",
                    sent_at=now,
                ),
                ChannelEntry(kind="matrix", name="matrix"),
                now=now,
            )
    finally:
        db.close()


def test_threads_enter_sends_badges_update_contrast_and_a_japanese_font(page, scripted_server, tmp_path):
    from playwright.sync_api import expect

    scripted_server.script(
        default={"do": "whole", "text": "A quiet thought, number {n}.", "answer_notes": ANSWER}, record=False
    )
    data = tmp_path / "data"
    data.mkdir()
    ann = _seed(data)
    # the persona's own defaults: quiet until someone writes, and every note wakes it (docs/cost.md)
    with web_loop(data, llm_url=scripted_server.url, pace_s=2.0, thinking=None) as loop:
        page.goto(loop.url + "/")
        threads = page.get_by_role("navigation", name="Conversations")
        expect(threads.get_by_role("link", name="You")).to_be_visible()
        anns = threads.locator(f'a[data-thread="{ann}"]')
        expect(anns).to_contain_text("Ann")
        expect(anns.locator(".badge.door")).to_have_text("Matrix")
        expect(anns.locator(".badge.role")).to_have_text("guest")

        box = page.get_by_label("Message")
        box.fill("first line")
        box.press("Shift+Enter")
        box.press_sequentially("second line")
        assert page.eval_on_selector("#message-text", "el => el.value") == "first line\nsecond line"
        box.press("Enter")  # sends
        mine = page.locator(".bubble.human", has_text="second line")
        expect(mine).to_be_visible()
        expect(box).to_have_value("")  # sent and cleared, ready for the next
        answer = page.locator(".bubble.persona", has_text="Heard you (note")
        expect(answer).to_be_visible(timeout=60_000)  # the persona's answer arrives live
        composer = page.locator("form.composer").bounding_box()
        assert composer is not None and composer["y"] + composer["height"] <= page.viewport_size["height"] + 1

        people_badge = page.locator("#badge-people")
        expect(people_badge).to_be_hidden()
        _stranger_writes(data)
        expect(people_badge).to_have_text("1", timeout=15_000)  # live, no reload
        page.goto(loop.url + "/people")
        page.get_by_test_id("contact-request").get_by_role("button", name="Refuse").click()
        expect(page.get_by_test_id("no-requests")).to_be_visible()
        expect(page.locator("#badge-people")).to_be_hidden(timeout=15_000)  # after the action

        page.goto(loop.url + f"/?person={ann}")
        expect(page.get_by_role("heading", name="Conversation with Ann")).to_be_visible()
        expect(page.locator(".bubble.human", has_text="Hello from the harbour")).to_contain_text("Ann")
        expect(page.locator("#message-text")).to_have_count(0)  # the owner reads Ann's thread; the persona answers her
        expect(page.locator(".bubble.persona", has_text="Heard you")).to_be_visible(timeout=60_000)
        screenshot(page, "talk-threads")

        for url in (loop.url + "/", loop.url + f"/?person={ann}"):
            page.goto(url)
            page.wait_for_selector(".bubble")
            measured = page.evaluate(CONTRAST_JS)
            low = [m for m in measured if m["ratio"] < 4.5]
            assert measured and not low, low[:5]

        page.goto(loop.url + "/language/ja?next=/")
        expect(page.locator("html")).to_have_attribute("lang", "ja")
        assert page.evaluate(GLYPH_JS, "語"), "no Japanese font draws the page's Japanese text"
        screenshot(page, "talk-ja")
