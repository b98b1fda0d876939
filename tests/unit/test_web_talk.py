"""Talk over the API and the page: the human's note is stored and shown at once, the persona's reply (its
messages.send) joins the conversation, and an unprompted message names the drive behind it."""

from __future__ import annotations

from web.pages.live import _talk_fragment, talk_status

SEND = '# Commands:\n[{"cmd_id": "r1", "type": "messages.send", "args": {"text": "I am Lumen; I think about tides."}}]\n# End commands'  # noqa: E501


def test_a_note_posted_on_the_api_reaches_the_next_tick_and_the_reply_joins_the_conversation(web):
    posted = web.client.post("/api/notes", json={"text": "What is your name?", "priority": 2})
    assert posted.status_code == 201 and posted.json()["who"] == "human"
    web.agent.services.llms.providers["fake"].responses = [SEND]
    state = web.agent.tick()
    assert "What is your name?" in state["prompt"]  # the note went into the prompt as data
    items = web.client.get("/api/conversation").json()["items"]
    assert [(i["who"], i["text"]) for i in items] == [
        ("human", "What is your name?"),
        ("persona", "I am Lumen; I think about tides."),
    ]
    assert items[0]["read"] is True and items[1]["unprompted"] is False
    assert web.client.get("/api/conversation").json()["waiting"] == 0


def test_the_talk_page_has_a_message_box_and_shows_a_sent_note_as_a_fragment(web):
    page = web.client.get("/")
    assert page.status_code == 200 and 'aria-label="Message"' in page.text and ">Send</button>" in page.text
    assert 'sse-connect="/live/talk"' in page.text and 'sse-swap="status"' in page.text
    fragment = web.client.post("/talk/notes", data={"text": "Hello <b>there</b>"}, headers=web.csrf)
    assert fragment.status_code == 200 and "Hello &lt;b&gt;there&lt;/b&gt;" in fragment.text  # escaped, never markup
    with web.agent.services.db.unit() as repos:
        assert [n.text for n in repos.notes.list(source="incoming")] == ["Hello <b>there</b>"]
    assert "Hello &lt;b&gt;there&lt;/b&gt;" in web.client.get("/").text


def test_a_bad_note_is_refused_naming_the_field_and_nothing_is_stored(web):
    for body, field in (
        ({"text": ""}, "text"),
        ({"text": "x" * 8001}, "text"),
        ({"text": "hi", "priority": 99}, "priority"),
        ({"text": "hi", "colour": "red"}, "colour"),
    ):
        answer = web.client.post("/api/notes", json=body)
        assert answer.status_code == 422 and answer.json()["field"] == field, answer.json()
    with web.agent.services.db.unit() as repos:
        assert repos.notes.list(source="incoming") == []


def test_an_unprompted_message_names_the_drive_that_moved_the_persona(web):
    web.agent.services.llms.providers["fake"].responses = [SEND]
    web.agent.tick()
    with web.agent.services.db.unit() as repos:
        repos.config.reach_outs = [
            {"at": "2026-11-23T10:00:00+00:00", "tick": 1, "thread": "main", "drive": "boredom", "level": 0.72}
        ]
    reply = web.client.get("/api/conversation").json()["items"][-1]
    assert reply["unprompted"] is True and reply["drive"] == "boredom" and reply["drive_level"] == 0.72
    assert "unprompted: boredom 0.72" in web.client.get("/").text


def test_the_live_talk_fragment_renders_the_message_the_loop_journaled(web):
    web.agent.services.llms.providers["fake"].responses = [SEND]
    web.agent.tick()
    with web.agent.services.db.unit() as repos:
        note_id = repos.notes.list(source="llm")[-1].id

    class Request:
        app = web.app
        scope = {"root_path": ""}

    html = _talk_fragment(Request(), web.services, {"data": {"note_id": note_id}})
    assert f'id="note-{note_id}"' in html and "I am Lumen; I think about tides." in html
    assert _talk_fragment(Request(), web.services, {"data": {}}) is None


def test_the_talk_status_line_says_which_step_the_persona_is_in():
    assert talk_status({"kind": "step", "node": "call_llm", "tick": 4}) == "tick 4 · thinks…"
    assert talk_status({"kind": "tick", "node": "execute_commands", "tick": 4}) == "tick 4 done"
    assert talk_status({"kind": "step", "node": "evaluate_emotion", "tick": 4}) is None
