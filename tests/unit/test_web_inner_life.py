"""Inner life over the API and the page: a drive the human sets is recorded, is what compute_drives returns, reaches
the next prompt and fades back; open questions are resolved and deleted by hand; the plots' series and the last
prompt's layers come from what the ticks stored."""

from __future__ import annotations

from datetime import timedelta

import pytest

from persona.drives import compute_drives
from persona.settings import DriveSettings


def _drive(view: dict, name: str) -> dict:
    return next(d for d in view["drives"] if d["name"] == name)


def test_a_drive_the_human_sets_is_recorded_computed_and_reaches_the_next_prompt(web):
    web.agent.tick()
    assert "boredom 0.8" not in web.agent.tick()["prompt"]
    answer = web.client.put("/api/drives/boredom", json={"level": 0.8})
    assert answer.status_code == 200
    boredom = _drive(answer.json(), "boredom")
    assert boredom["level"] == 0.8 and boredom["computed"] == 0.0 and boredom["in_prompt"] is True
    assert boredom["adjusted"]["by"] == "human" and "my human set it to 0.80" in boredom["context"]
    assert answer.json()["dominant"] == "boredom"
    with web.agent.services.db.unit() as repos:
        assert repos.config.drive_adjustments["boredom"]["level"] == 0.8
        assert [(c["drive"], c["level"], c["by"]) for c in repos.config.drive_adjustment_history] == [
            ("boredom", 0.8, "human")
        ]
        drives = compute_drives(repos, web.services.clock(), web.agent.services.settings.drives)
    assert drives.levels["boredom"] == pytest.approx(0.8, abs=0.01)
    prompt = web.agent.tick()["prompt"]
    assert "boredom 0.80: my human has been quiet" in prompt and "my human set it to 0.80" in prompt
    assert web.client.get("/api/drives").json()["history"][0]["level"] == 0.8


def test_a_set_level_fades_back_to_the_computed_one_with_the_half_life(web):
    web.agent.tick()
    web.client.put("/api/drives/goal", json={"level": 0.6})
    settings = DriveSettings(adjustment_half_life_hours=6)
    now = web.services.clock()
    with web.agent.services.db.unit() as repos:
        half = compute_drives(repos, now + timedelta(hours=6), settings)
        gone = compute_drives(repos, now + timedelta(hours=60), settings)
    assert half.levels["goal"] == pytest.approx(0.3, abs=0.01) and half.details["goal"]["adjusted"]["weight"] == 0.5
    assert gone.levels["goal"] == 0.0 and "adjusted" not in gone.details["goal"]


def test_history_keeps_the_last_fifty_changes_newest_first(web):
    for i in range(53):
        assert web.client.put("/api/drives/devotion", json={"level": round(i / 100, 2)}).status_code == 200
    history = web.client.get("/api/drives").json()["history"]
    assert len(history) == 50 and history[0]["level"] == 0.52 and history[-1]["level"] == 0.03


def test_a_bad_drive_change_names_the_field(web):
    unknown = web.client.put("/api/drives/hunger", json={"level": 0.5})
    assert unknown.status_code == 404 and unknown.json()["field"] == "name" and "hunger" in unknown.json()["error"]
    for body, field in (
        ({"level": 1.5}, "level"),
        ({"level": -0.1}, "level"),
        ({}, "level"),
        ({"level": 0.5, "why": "x"}, "why"),
    ):
        answer = web.client.put("/api/drives/boredom", json=body)
        assert answer.status_code == 422 and answer.json()["field"] == field, answer.json()
    with web.agent.services.db.unit() as repos:
        assert repos.config.drive_adjustments == {}


def test_the_page_shows_the_sliders_and_a_change_persists_across_a_reload(web):
    page = web.client.get("/inner-life")
    assert page.status_code == 200
    for name in ("boredom", "curiosity", "goal", "devotion"):
        assert f'aria-label="{name}"' in page.text and f'hx-put="/inner-life/drives/{name}"' in page.text
    assert 'type="range"' in page.text and 'value="0.00" aria-label="boredom"' in page.text
    fragment = web.client.put("/inner-life/drives/boredom", data={"level": "0.7"}, headers=web.csrf)
    assert fragment.status_code == 200 and fragment.text.startswith('<section id="drives"')
    assert 'value="0.70" aria-label="boredom"' in fragment.text
    assert 'value="0.70" aria-label="boredom"' in web.client.get("/inner-life").text
    refused = web.client.put(
        "/inner-life/drives/boredom", data={"level": "2"}, headers={**web.csrf, "HX-Request": "true"}
    )
    assert refused.status_code == 422 and "<b>level</b>" in refused.text


def test_open_questions_are_resolved_and_deleted_by_hand(web):
    with web.agent.services.db.unit() as repos:
        tides = repos.questions.add("Why do tides rise twice a day?", priority=0.8).id
        book = repos.questions.add("What is my human's favourite book?", priority=0.4).id
    listed = web.client.get("/api/questions").json()
    assert listed["open"] == 2 and [q["id"] for q in listed["questions"]] == [tides, book]
    before = _drive(web.client.get("/api/drives").json(), "curiosity")["level"]
    resolved = web.client.post(f"/api/questions/{tides}/resolve", json={"resolution": "The moon and the sun."})
    assert resolved.status_code == 200 and resolved.json()["status"] == "resolved"
    again = web.client.post(f"/api/questions/{tides}/resolve", json={"resolution": "again"})
    assert again.status_code == 409 and again.json()["field"] == "id"
    empty = web.client.post(f"/api/questions/{book}/resolve", json={"resolution": ""})
    assert empty.status_code == 422 and empty.json()["field"] == "resolution"
    with web.agent.services.db.unit() as repos:
        row = repos.questions.get(tides)
        assert (row.status, row.resolution) == ("resolved", "The moon and the sun.") and row.resolved_at is not None
        assert repos.questions.get(book).status == "open"
    assert _drive(web.client.get("/api/drives").json(), "curiosity")["level"] < before  # one question less
    assert web.client.delete(f"/api/questions/{book}").status_code == 204
    missing = web.client.delete(f"/api/questions/{book}")
    assert missing.status_code == 404 and missing.json()["field"] == "id"
    with web.agent.services.db.unit() as repos:
        assert [q.id for q in repos.questions.list()] == [tides]
    assert web.client.get("/api/questions").json()["open"] == 0


def test_the_page_resolves_and_deletes_questions_and_asks_the_drives_to_reload(web):
    with web.agent.services.db.unit() as repos:
        first = repos.questions.add("Where do eels go?", priority=0.5).id
        second = repos.questions.add("Why is the sea salty?", priority=0.5).id
    page = web.client.get("/inner-life").text
    assert "Where do eels go?" in page and f'hx-post="/inner-life/questions/{first}/resolve"' in page
    table = web.client.post(
        f"/inner-life/questions/{first}/resolve", data={"resolution": "the Sargasso Sea"}, headers=web.csrf
    )
    assert table.status_code == 200 and "resolved: the Sargasso Sea" in table.text
    assert table.headers["hx-trigger"] == "drives-changed"
    table = web.client.delete(f"/inner-life/questions/{second}", headers=web.csrf)
    assert table.status_code == 200 and "Why is the sea salty?" not in table.text
    with web.agent.services.db.unit() as repos:
        assert [q.id for q in repos.questions.list()] == [first]


def test_the_charts_have_emotions_novelty_and_tokens_per_tick(web):
    web.agent.tick()
    web.agent.tick()
    with web.agent.services.db.unit() as repos:
        repos.emotion_log.add("sadness", 4, subject="user", snippet="a grey day")
        ticks = repos.ticks.recent(10)
    charts = web.client.get("/api/charts").json()
    tokens = {s["label"]: s["values"] for s in charts["tokens"]["series"]}
    assert len(charts["tokens"]["x"]) == 2 and tokens["prompt"] == [t.prompt_tokens for t in ticks]
    assert tokens["completion"] == [t.completion_tokens for t in ticks]
    emotions = {s["label"]: [v for v in s["values"] if v is not None] for s in charts["emotions"]["series"]}
    assert emotions["persona"] == [0.5] and emotions["human"] == [-0.6]  # curiosity 0.5, sadness −0.6
    assert charts["valence"]["joy"] == 1.0 and charts["valence"]["anger"] == -1.0
    novelty = {s["label"]: s["values"] for s in charts["novelty"]["series"]}
    assert novelty["novelty"][0] == 100.0 and novelty["stagnant"] == [None, novelty["novelty"][1]]  # tick 2 repeats
    page = web.client.get("/inner-life").text
    assert (
        'data-chart="chart-tokens-data"' in page and '<script type="application/json" id="chart-tokens-data">' in page
    )
    assert "uPlot" in web.client.get("/static/app.js").text


def test_the_last_prompts_layers_with_the_budget_and_what_was_dropped(web):
    assert web.client.get("/api/prompt-layers").json()["tick"] is None
    web.agent.tick()
    layers = web.client.get("/api/prompt-layers").json()
    with web.agent.services.db.unit() as repos:
        context = repos.ticks.get("main", 1).summary["context"]
    assert layers["tick"] == 1 and layers["budget_tokens"] == context["budget_tokens"]
    assert [layer["layer"] for layer in layers["layers"]] == [layer["layer"] for layer in context["layers"]]
    assert "identity" in [layer["layer"] for layer in layers["layers"]]
    assert layers["used_tokens"] == sum(layer["tokens"] for layer in context["layers"])
    # nothing left out whole: at this window the command guide only takes its smaller form, and the page says so
    assert layers["dropped"] == context["dropped"] and [d.split(":")[0] for d in layers["dropped"]] == ["commands"]
    assert "shrunk to a smaller form" in layers["dropped"][0] and "commands" in [
        layer["layer"] for layer in layers["layers"]
    ]
    with web.agent.services.db.unit() as repos:
        row = repos.ticks.get("main", 1)
        row.summary = {**row.summary, "context": {**context, "dropped": ["recent: oldest item (120 tokens)"]}}
    layers = web.client.get("/api/prompt-layers").json()
    assert layers["dropped"] == ["recent: oldest item (120 tokens)"]
    assert "recent: oldest item (120 tokens)" in web.client.get("/inner-life").text
