"""The People page and the channels' state on Controls in a real browser (Debian's chromium under Playwright) over
`run.py serve`: the owner is listed; a person added in the form appears; an unknown sender's contact request shows
with its held count and, accepted, turns into a person whose message is a note; a channel's state (as its runner
records it) shows on Controls without a reload. Every wait is bounded."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime

import pytest

from tests.fakes.managers import managers_over
from tests.integration.browser import screenshot

pytestmark = pytest.mark.integration
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from tests.integration.servers import ROOT, served_web_app

    base = tmp_path_factory.mktemp("people-web")
    shutil.copytree(ROOT / "persona" / "default", base / "persona")
    with served_web_app(base / "data", base / "persona") as url:
        yield url, base / "data"


def test_people_page_add_a_person_and_accept_a_contact_request(page, served):
    from playwright.sync_api import expect

    from managers.channels import Arrival
    from memory import Database
    from persona.settings import ChannelEntry

    url, data_dir = served
    page.goto(url + "/people")
    expect(page.get_by_role("heading", name="People", exact=True)).to_be_visible()
    table = page.get_by_test_id("people-table")
    expect(table.get_by_text("owner")).to_be_visible()
    form = page.get_by_test_id("add-person")
    form.get_by_label("Name").fill("Ann")
    form.get_by_label("Channel").fill("matrix")
    form.get_by_label("Address on it").fill("@ann:example.org")
    form.get_by_role("button", name="Add").click()
    expect(table.get_by_text("matrix:@ann:example.org")).to_be_visible()

    db = Database.open(data_dir)
    try:
        with db.unit() as repos:
            managers_over(repos).channels.receive(
                Arrival(
                    channel="matrix",
                    platform_id="$eve1",
                    sender="@eve:example.org",
                    sender_name="Eve",
                    conversation="!r",
                    text="hello, it's Eve",
                    sent_at=NOW,
                ),
                ChannelEntry(kind="matrix", name="matrix"),
                now=NOW,
            )
    finally:
        db.close()
    page.reload()
    request = page.get_by_test_id("contact-request")
    expect(request).to_contain_text("1 message(s) held")
    request.get_by_role("button", name="Accept as guest").click()
    expect(page.get_by_test_id("no-requests")).to_be_visible()
    expect(page.get_by_test_id("people-table").get_by_text("matrix:@eve:example.org")).to_be_visible()
    screenshot(page, "people-accepted")
    db = Database.open(data_dir)
    try:
        with db.unit() as repos:
            eve = repos.people.by_name("Eve")
            assert [(n.text, n.author_id) for n in repos.notes.list() if n.source == "channel"] == [
                ("hello, it's Eve", eve.id)
            ]
    finally:
        db.close()


def test_controls_show_a_channels_state_live(page, served):
    from playwright.sync_api import expect

    from memory import Database

    url, data_dir = served
    page.goto(url + "/controls")
    expect(page.get_by_test_id("no-channels")).to_be_visible()
    db = Database.open(data_dir)
    try:
        with db.unit() as repos:  # what the runner records when its homeserver does not answer
            managers_over(repos).channels.set_status("matrix", "backing_off", error="matrix: connection refused")
    finally:
        db.close()
    row = page.locator("#channel-matrix")
    expect(row).to_contain_text("backing_off", timeout=15_000)  # the fragment refreshes every 3 s, no reload
    expect(row).to_contain_text("connection refused")
    screenshot(page, "controls-channels")


def test_a_guests_document_is_approved_on_the_approvals_page_and_joins_the_knowledge_base(page, served):
    from playwright.sync_api import expect

    from managers import ManagerDeps, Managers
    from managers.channels import Arrival
    from memory import Database
    from persona.settings import ChannelEntry, Settings

    url, data_dir = served
    text = b"# Harbour\n\nThe ferry leaves at 06:40 when the tide allows.\n"
    db = Database.open(data_dir)
    try:
        with db.unit() as repos:  # what the channel runner records when a guest sends a file
            house = Managers(repos, ManagerDeps(settings=Settings(data_dir=str(data_dir)), clock=lambda: NOW))
            bea = house.people.add("Bea", role="guest")
            house.people.add_identity(bea.id, "matrix", "@bea:example.org")
            house.channels.receive(
                Arrival(
                    channel="matrix",
                    platform_id="$doc1",
                    sender="@bea:example.org",
                    sender_name="Bea",
                    conversation="!r",
                    text="the timetable",
                    sent_at=NOW,
                    attachments=(
                        {
                            "kind": "text",
                            "name": "harbour.md",
                            "mime": "text/markdown",
                            "size": len(text),
                            "ref": "mxc://example.org/h",
                            "data": text,
                        },
                    ),
                ),
                ChannelEntry(kind="matrix", name="matrix"),
                now=NOW,
            )
            [waiting] = house.consent.pending()
    finally:
        db.close()
    page.goto(url + "/approvals")
    item = page.locator(f"#approval-{waiting.id}")
    expect(item.get_by_test_id("document-question")).to_have_text(
        f"Bea sent harbour.md ({len(text)} bytes) — add to the knowledge base?"
    )
    item.get_by_role("button", name="Approve").click()
    decided = page.locator(f"#approval-{waiting.id}").get_by_test_id("decision")
    expect(decided).to_contain_text("executed")
    expect(decided).to_contain_text("harbour.md from Bea (guest, via matrix) added to my knowledge base")
    screenshot(page, "approvals-document")
    db = Database.open(data_dir)
    try:
        with db.unit() as repos:
            assert [(d.title, d.source) for d in repos.kb.list()] == [("harbour", "Bea (guest, via matrix)")]
    finally:
        db.close()
