"""The memory page and /api/memory: every tier browsed, searched with the persona's own retrieval, edited by the
human (the history names the human, before and after), archived and restored (the lists follow), deleted for good,
and knowledge-base uploads checked by size and content."""

from __future__ import annotations

DIARY = (
    '# Commands:\n[{"cmd_id": "d1", "type": "diary.add", '
    '"args": {"text": "The lighthouse keeper waved at dawn."}}]\n# End commands'
)


def persona_writes_a_diary_entry(web) -> str:
    web.agent.services.llms.providers["fake"].responses = [DIARY]
    web.agent.tick()
    items = web.client.get("/api/memory/diary").json()["items"]
    return next(i["ref"] for i in items if "lighthouse" in i["text"])


def test_tiers_name_every_tier_with_its_size(web):
    persona_writes_a_diary_entry(web)
    tiers = {t["name"]: t for t in web.client.get("/api/memory/tiers").json()["tiers"]}
    assert {
        "core",
        "notepad",
        "llm_memory",
        "diary",
        "concept",
        "link",
        "goal",
        "task",
        "episode",
        "entity",
        "insight",
        "fact",
        "question",
        "kb",
    } <= set(tiers)
    assert tiers["diary"]["count"] == 1 and tiers["diary"]["searchable"] and tiers["diary"]["archivable"]
    assert not tiers["fact"]["archivable"] and not tiers["kb"]["editable"] and tiers["kb"]["deletable"]
    answer = web.client.get("/api/memory/dreams")
    assert answer.status_code == 404 and answer.json()["field"] == "tier"
    assert web.client.get("/api/memory/diary/999").json()["field"] == "ref"


def test_a_human_edit_is_history_named_human_with_before_and_after(web):
    ref = persona_writes_a_diary_entry(web)
    edited = web.client.patch(f"/api/memory/diary/{ref}", json={"text": "The keeper waved twice.", "tags": ["sea"]})
    assert edited.status_code == 200 and edited.json()["changed"] is True
    assert edited.json()["record"]["fields"]["text"] == "The keeper waved twice."
    changes = web.client.get("/api/memory/history", params={"tier": "diary", "ref": ref}).json()["changes"]
    assert [(c["actor"], c["action"]) for c in changes] == [("human", "update"), ("persona", "create")]
    assert changes[0]["before"] == {"text": "The lighthouse keeper waved at dawn.", "tags": []}
    assert changes[0]["after"] == {"text": "The keeper waved twice.", "tags": ["sea"]}
    assert web.client.get(f"/api/memory/diary/{ref}/history").json()["changes"] == changes


def test_a_bad_edit_names_the_field_and_changes_nothing(web):
    ref = persona_writes_a_diary_entry(web)
    for body, field in (({"text": ""}, "text"), ({"priority": 99}, "priority"), ({"colour": "red"}, "colour")):
        answer = web.client.patch(f"/api/memory/diary/{ref}", json=body)
        assert answer.status_code == 422 and answer.json()["field"] == field, answer.json()
    too_long = web.client.patch("/api/memory/core/core", json={"content": "x" * 2001})
    assert too_long.status_code == 422 and too_long.json()["field"] == "content"
    assert [c["action"] for c in web.client.get("/api/memory/history?tier=diary").json()["changes"]] == ["create"]


def test_core_memory_edits_keep_versions_that_restore(web):
    web.client.patch("/api/memory/core/core", json={"content": "I am Lumen."})
    web.client.patch("/api/memory/core/core", json={"content": "I am Lumen, of the sea."})
    versions = web.client.get("/api/memory/core", params={"archived": True}).json()["items"]
    assert versions[0]["text"] == "I am Lumen." and versions[0]["actions"] == ["restore"]
    restored = web.client.post(f"/api/memory/core/{versions[0]['ref']}/restore").json()
    assert restored["record"]["text"] == "I am Lumen." and restored["ref"] == "core"
    assert web.client.delete("/api/memory/core/core").json()["field"] == "tier"


def test_archive_and_restore_change_what_the_lists_show(web):
    ref = persona_writes_a_diary_entry(web)
    archived = web.client.post(f"/api/memory/diary/{ref}/archive")
    assert archived.status_code == 200 and archived.json()["record"]["status"] == "archived"
    assert web.client.get("/api/memory/diary").json()["items"] == []
    assert [i["ref"] for i in web.client.get("/api/memory/diary?archived=true").json()["items"]] == [ref]
    hits = web.client.get("/api/memory/search", params={"q": "lighthouse keeper"}).json()["hits"]
    assert [h for h in hits if h["tier"] == "diary"] == []  # out of retrieval (the tick's own message stays)
    assert web.client.post(f"/api/memory/diary/{ref}/restore").json()["changed"] is True
    assert [i["ref"] for i in web.client.get("/api/memory/diary").json()["items"]] == [ref]
    actions = [c["action"] for c in web.client.get(f"/api/memory/diary/{ref}/history").json()["changes"]]
    assert actions == ["restore", "archive", "create"]
    refused = web.client.post("/api/memory/fact/1/archive")
    assert refused.status_code == 409 and refused.json()["field"] == "tier"


def test_a_human_delete_purges_for_good_and_keeps_the_history(web):
    ref = persona_writes_a_diary_entry(web)
    assert web.client.delete(f"/api/memory/diary/{ref}").status_code == 200
    assert web.client.get(f"/api/memory/diary/{ref}").status_code == 404
    assert web.client.get("/api/memory/diary?archived=true").json()["items"] == []
    with web.agent.services.db.unit() as repos:
        assert repos.items.find("diary", ref).status == "deleted"
    last = web.client.get(f"/api/memory/diary/{ref}/history").json()["changes"][0]
    assert (last["actor"], last["action"], last["after"]) == ("human", "delete", None)
    assert last["before"]["text"] == "The lighthouse keeper waved at dawn."


def test_search_finds_what_the_human_wrote_through_the_api(web):
    with web.agent.services.db.unit() as repos:
        entity = repos.entities.merge("Ada")
    web.client.patch(
        f"/api/memory/entity/{entity.id}", json={"description": "Ada keeps bees on the cliff above the harbour."}
    )
    hits = web.client.get("/api/memory/search", params={"q": "bees cliff harbour"}).json()["hits"]
    assert hits and (hits[0]["tier"], hits[0]["ref"]) == ("entity", str(entity.id)) and hits[0]["browsable"]
    within = web.client.get("/api/memory/entity", params={"q": "bees"}).json()["items"]
    assert [i["ref"] for i in within] == [str(entity.id)]
    assert web.client.get("/api/memory/search", params={"q": "bees", "tiers": ["goal"]}).json()["field"] == "tiers"


def test_a_small_text_file_is_ingested_into_the_knowledge_base(web):
    text = "\n\n".join(f"Chapter {i}. The harbour master logs every ship that enters. " * 12 for i in range(4))
    answer = web.client.post("/api/memory/kb", files={"file": ("harbour.md", text.encode(), "text/markdown")})
    assert answer.status_code == 201, answer.json()
    doc = answer.json()
    assert doc["title"] == "harbour" and doc["chunks"] >= 2 and doc["indexed"] >= doc["chunks"]
    hits = web.client.get("/api/memory/search", params={"q": "harbour master ships", "tiers": ["kb"]}).json()["hits"]
    assert hits and hits[0]["tier"] == "kb" and hits[0]["ref"] == str(doc["doc_id"])
    assert [d["title"] for d in web.client.get("/api/memory/kb").json()["items"]] == ["harbour"]
    again = web.client.post("/api/memory/kb", files={"file": ("copy.txt", text.encode(), "text/plain")})
    assert again.status_code == 200 and again.json()["skipped"]
    archived = web.client.post(f"/api/memory/kb/{doc['doc_id']}/archive").json()
    assert archived["record"]["status"] == "archived"
    assert web.client.get("/api/memory/search", params={"q": "harbour master", "tiers": ["kb"]}).json()["hits"] == []


def test_an_oversized_or_binary_upload_is_refused_naming_the_file(web):
    big = web.client.post("/api/memory/kb", files={"file": ("big.txt", b"a" * (21 * 1024 * 1024), "text/plain")})
    assert big.status_code == 413 and big.json()["field"] == "file" and "20 MB" in big.json()["error"]
    png = b"\x89PNG\r\n\x1a\n\x00\x00\xff"
    binary = web.client.post("/api/memory/kb", files={"file": ("photo.txt", png, "text/plain")})
    assert binary.status_code == 415 and binary.json()["field"] == "file"
    fake_pdf = web.client.post("/api/memory/kb", files={"file": ("x.pdf", b"%PDF-1.4 not really", "application/pdf")})
    assert fake_pdf.status_code == 422 and fake_pdf.json()["field"] == "file"
    assert web.client.get("/api/memory/kb").json()["items"] == []


def test_the_page_shows_an_edited_value_and_its_history(web):
    ref = persona_writes_a_diary_entry(web)
    page = web.client.get("/memory", params={"tier": "diary"})
    assert page.status_code == 200 and "The lighthouse keeper waved at dawn." in page.text
    assert 'hx-confirm="Delete diary' in page.text and ">History</button>" in page.text
    form = web.client.get(f"/memory/diary/{ref}/edit")
    assert form.status_code == 200 and 'name="text"' in form.text
    row = web.client.post(
        f"/memory/diary/{ref}/edit",
        headers=web.csrf,
        data={"text": "The keeper <b>waved</b> twice.", "tags": "sea, dawn", "priority": "2", "pinned": "true"},
    )
    assert row.status_code == 200 and "The keeper &lt;b&gt;waved&lt;/b&gt; twice." in row.text and "saved" in row.text
    page = web.client.get("/memory", params={"tier": "diary"}).text
    assert "The keeper &lt;b&gt;waved&lt;/b&gt; twice." in page
    assert "update diary " + ref in page and "<td>human</td>" in page
    history = web.client.get("/memory/history", params={"tier": "diary", "ref": ref}).text
    assert f"History of diary {ref}" in history and "The lighthouse keeper waved at dawn." in history
    with web.agent.services.db.unit() as repos:
        entry = repos.diary.get(int(ref))
        assert (entry.tags, entry.priority, entry.pinned) == (["sea", "dawn"], 2, True)


def test_the_page_archives_and_deletes_rows_as_fragments(web):
    ref = persona_writes_a_diary_entry(web)
    row = web.client.post(f"/memory/diary/{ref}/archive", headers=web.csrf)
    assert row.status_code == 200 and "archived" in row.text and ">Restore</button>" in row.text
    gone = web.client.delete(f"/memory/diary/{ref}", headers=web.csrf)
    assert gone.status_code == 200 and gone.text == ""
    error = web.client.post("/memory/fact/1/archive", headers={**web.csrf, "HX-Request": "true"})
    assert error.status_code == 409 and 'class="error"' in error.text
    panel = web.client.get("/memory/tier/kb")
    assert panel.status_code == 200 and 'hx-post="/memory/kb"' in panel.text and 'name="file"' in panel.text
    found = web.client.get("/memory/search", params={"q": "anything"})
    assert found.status_code == 200


def test_a_human_closing_a_goal_closes_it_for_the_persona_too(web):
    from memory.upkeep.abstracts import pending_request

    with web.agent.services.db.unit() as repos:
        goal_id = repos.goals.add("Map the harbour").id
    failed = web.client.patch(f"/api/memory/goal/{goal_id}", json={"status": "failed", "reason": "the fog"})
    assert failed.status_code == 200 and failed.json()["record"]["fields"]["status"] == "failed"
    with web.agent.services.db.unit() as repos:  # the same rule as the persona's own goals.update
        warnings = [(p.value, p.status) for p in repos.processes.of_thread("main") if p.name == "goals.failed"]
        assert warnings == [(f"goal {goal_id} failed: the fog", "warning")]
        assert pending_request(repos, "main") == {"trigger": "goal_closed", "what": f"goal {goal_id}"}


def test_search_shows_the_chain_of_a_knowledge_update(web):
    from memory.store import record_turn
    from memory.updates import supersede_older

    with web.agent.services.db.unit() as repos:
        old = record_turn(repos, ref="upd:1", text="My favourite colour is blue.", author="Ann", episode="upd").id
        new = record_turn(repos, ref="upd:2", text="My favourite colour is green now.", author="Ann", episode="upd").id
    index = web.agent.services.memory
    index.sync()
    assert [(s.older, s.newer) for s in supersede_older(index, new)] == [(old, new)]
    hits = {
        h["text"]: h for h in web.client.get("/api/memory/search", params={"q": "Ann favourite colour"}).json()["hits"]
    }
    newer, older = hits["My favourite colour is green now."], hits["My favourite colour is blue."]
    assert newer["replaced"] == ["My favourite colour is blue."] and newer["superseded_by"] is None
    assert older["status"] == "superseded" and older["superseded_by"] == "My favourite colour is green now."
    page = web.client.get("/memory/search", params={"q": "Ann favourite colour"}).text
    assert "replaces: My favourite colour is blue." in page and "updated by: My favourite colour is green now." in page
