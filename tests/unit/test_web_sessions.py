"""Sessions over the API and the page: the list, an export as JSON and as a Markdown transcript (downloads), a
revival in a new thread, and a revival from an uploaded export (type and size checked)."""

from __future__ import annotations

import json

from nodes.context import utcnow
from tests.fakes.managers import managers_over


def run_session(web, thought: str = "I think of tides and of the moon.") -> int:
    web.agent.services.llms.providers["fake"].responses = [thought]
    with web.agent.services.db.unit() as repos:
        session_id, _ = managers_over(repos).sessions.open("main", playbook="repl", persona="Lumen", now=utcnow())
        repos.notes.add("Hello, Lumen.", source="user")
    web.agent.tick()
    with web.agent.services.db.unit() as repos:
        managers_over(repos).sessions.close(session_id, utcnow())
    return session_id


def test_sessions_are_listed_and_exported_as_json_and_markdown(web):
    session_id = run_session(web)
    rows = web.client.get("/api/sessions").json()["items"]
    assert [(r["id"], r["thread_id"], r["status"]) for r in rows] == [(session_id, "main", "stopped")]
    detail = web.client.get(f"/api/sessions/{session_id}").json()
    assert detail["last_thoughts"] and "I think of tides" in detail["last_thoughts"][-1]

    exported = web.client.get(f"/api/sessions/{session_id}/export?format=json")
    assert exported.status_code == 200 and exported.headers["content-type"].startswith("application/json")
    assert exported.headers["content-disposition"] == f'attachment; filename="session-{session_id}.json"'
    data = exported.json()
    assert data["session"]["id"] == session_id and data["session"]["thread_id"] == "main"
    assert any("I think of tides" in m["content"] for m in data["messages"] if m["kind"] == "response")
    assert [n["text"] for n in data["notes"]] == ["Hello, Lumen."]

    markdown = web.client.get(f"/api/sessions/{session_id}/export?format=md")
    assert markdown.headers["content-disposition"] == f'attachment; filename="session-{session_id}.md"'
    assert markdown.headers["content-type"].startswith("text/markdown")
    assert markdown.text.startswith(f"# Session {session_id} — Lumen on thread main")
    assert "I think of tides and of the moon." in markdown.text and "> **Human:** Hello, Lumen." in markdown.text
    assert web.client.get(f"/api/sessions/{session_id}/export?format=pdf").json()["field"] == "format"
    assert web.client.get("/api/sessions/99/export").status_code == 404


def test_a_session_is_revived_in_a_new_thread(web):
    session_id = run_session(web)
    revived = web.client.post(f"/api/sessions/{session_id}/revive")
    assert revived.status_code == 201, revived.json()
    body = revived.json()
    assert body["thread_id"] == f"main~r{session_id}" and body["command"].endswith(f"--thread main~r{session_id}")
    with web.agent.services.db.unit() as repos:
        seeded = [m.content for m in repos.messages.log(body["thread_id"])]
    assert seeded[0].startswith(f"[I was revived from session {session_id}")
    assert any("I think of tides" in text for text in seeded)
    assert web.client.get(f"/api/sessions/{session_id}").json()["revived_as"] == [body["thread_id"]]


def test_an_uploaded_export_is_revived_as_an_imported_session(web):
    session_id = run_session(web, "The lighthouse keeper taught me knots.")
    export = web.client.get(f"/api/sessions/{session_id}/export?format=json").content

    uploaded = web.client.post("/api/sessions/revive", files={"file": ("session-1.json", export, "application/json")})
    assert uploaded.status_code == 201, uploaded.json()
    revived = uploaded.json()
    imported = web.client.get(f"/api/sessions/{revived['session_id']}").json()
    assert imported["status"] == "imported" and imported["thread_id"] == "main~imported"
    assert revived["thread_id"] == f"main~r{revived['session_id']}"
    with web.agent.services.db.unit() as repos:
        seeded = [m.content for m in repos.messages.log(revived["thread_id"])]
    assert any("The lighthouse keeper taught me knots." in text for text in seeded)

    as_body = web.client.post("/api/sessions/revive", content=export, headers={"content-type": "application/json"})
    assert as_body.status_code == 201 and as_body.json()["thread_id"] != revived["thread_id"]

    wrong_type = web.client.post("/api/sessions/revive", files={"file": ("notes.txt", b"hello", "text/plain")})
    assert wrong_type.status_code == 415 and wrong_type.json()["field"] == "file"
    not_json = web.client.post("/api/sessions/revive", files={"file": ("s.json", b"{nope", "application/json")})
    assert not_json.status_code == 422 and not_json.json()["field"] == "file"
    not_export = web.client.post(
        "/api/sessions/revive", files={"file": ("s.json", json.dumps({"a": 1}).encode(), "application/json")}
    )
    assert not_export.status_code == 422 and "session" in not_export.json()["error"]
    too_big = web.client.post(
        "/api/sessions/revive", files={"file": ("s.json", b" " * (20 * 1024 * 1024 + 1), "application/json")}
    )
    assert too_big.status_code == 413 and too_big.json()["field"] == "file"


def test_the_sessions_page_lists_downloads_and_revives(web):
    session_id = run_session(web)
    page = web.client.get("/sessions")
    assert page.status_code == 200
    assert f'href="/api/sessions/{session_id}/export?format=md"' in page.text
    assert f'hx-post="/sessions/{session_id}/revive"' in page.text and 'hx-encoding="multipart/form-data"' in page.text
    revived = web.client.post(f"/sessions/{session_id}/revive", headers=web.csrf)
    assert revived.status_code == 200 and f"main~r{session_id}" in revived.text and "python run.py" in revived.text
    export = web.client.get(f"/api/sessions/{session_id}/export").content
    uploaded = web.client.post(
        "/sessions/revive", files={"file": ("s.json", export, "application/json")}, headers=web.csrf
    )
    assert uploaded.status_code == 200 and "~r" in uploaded.text


def test_the_thought_log_is_exported_as_csv_and_jsonl_with_debug_diary_entries_marked(web):
    import csv
    import io

    cmds = (
        "# Commands:\n"
        + json.dumps(
            [
                {
                    "cmd_id": "c1",
                    "type": "diary.add",
                    "args": {"text": "I keep circling the same tide.", "tags": ["debug:stagnation_loop"]},
                },
                {"cmd_id": "c2", "type": "diary.add", "args": {"text": "The moon pulls the sea.", "tags": ["sea"]}},
            ]
        )
        + "\n# End commands"
    )
    session_id = run_session(web, "I think of tides, again.\n" + cmds)
    jsonl = web.client.get(f"/api/sessions/{session_id}/export?format=jsonl")
    assert jsonl.status_code == 200 and jsonl.headers["content-type"].startswith("application/x-ndjson")
    assert jsonl.headers["content-disposition"] == f'attachment; filename="session-{session_id}.jsonl"'
    records = [json.loads(line) for line in jsonl.text.splitlines()]
    assert [(r["record"], r["kind"], r["text"]) for r in records if r["record"] != "message"] == [
        ("note", "note", "Hello, Lumen."),
        ("diary", "debug", "I keep circling the same tide."),
        ("diary", "diary", "The moon pulls the sea."),
    ]
    assert any(
        r["record"] == "message" and r["kind"] == "response" and "I think of tides, again." in r["text"]
        for r in records
    )
    table = web.client.get(f"/api/sessions/{session_id}/export?format=csv")
    assert table.status_code == 200 and table.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(table.text)))
    assert [(r["record"], r["kind"], r["tags"]) for r in rows] == [
        (r["record"], r["kind"], ";".join(r["tags"])) for r in records
    ]  # the same log, as a table
    assert next(r for r in rows if r["kind"] == "debug")["tags"] == "debug:stagnation_loop"
