"""Thoughts over the API and the page: each tick is a card with its thought, its commands and what came of them (run,
refused, unknown), what the parser could not read, the reflexes' verdicts, tokens, time, the model and its failed
calls; failed ticks show their error; Stelis threads form a tree; a closed tick's card is the live fragment."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi.testclient import TestClient

from persona.settings import Overrides
from tests.fakes.llm import FakeLLM
from web.app import create_app
from web.context import WebServices
from web.pages.live import _thought_fragment

THOUGHT = (
    "The tide comes back twice a day; I want to know why.\n# Commands:\n"
    '[{"cmd_id": "c1", "type": "notes.add", "args": {"text": "ask about tides"}},'
    ' {"cmd_id": "c2", "type": "notes.add", "args": {}},'
    ' {"cmd_id": "c3", "type": "tides.predict", "args": {}}]\n# End commands'
)


class PageRequest:
    def __init__(self, app):
        self.app = app


def test_a_tick_card_has_the_thought_its_commands_and_their_fate_tokens_time_and_the_model(web):
    web.agent.services.llms.providers["fake"].responses = [THOUGHT]
    web.agent.tick()
    card = web.client.get("/api/ticks/main/1").json()
    assert card["thought"].startswith("The tide comes back twice a day") and card["status"] == "ok"
    assert [(c["cmd_id"], c["type"], c["status"], c["ran"]) for c in card["commands"]] == [
        ("c1", "notes.add", "executed", True),
        ("c2", "notes.add", "invalid", False),
        ("c3", "tides.predict", "unknown", False),
    ]
    assert "text" in card["commands"][1]["result"] and "unknown command type" in card["commands"][2]["result"]
    assert card["commands"][0]["args"] == {"text": "ask about tides"}
    with web.agent.services.db.unit() as repos:
        row = repos.ticks.get("main", 1)
        assert (
            card["tokens"]["prompt"] == row.prompt_tokens > 0
            and card["tokens"]["completion"] == row.completion_tokens > 0
        )
    assert card["llm_id"] == "fake" and card["failovers"] == []
    assert card["finished_at"] >= card["started_at"] and card["duration_s"] >= 0
    # a thought that shows no feeling: rated from its novelty (reflexes.emotion_from_signals), no model call
    assert card["reflexes"]["emotions"] == [{"emotion": "curiosity", "strength": 3, "reason": "a new thought"}]
    assert card["reflexes"]["novelty_score"] is not None and card["reflexes"]["stagnation_flag"] is False
    listed = web.client.get("/api/ticks").json()
    assert listed["ticks"][0] == card and listed["next_before"] is None


def test_what_the_parser_could_not_read_is_shown_and_a_repeat_is_flagged_stagnant(web):
    malformed = (
        'Hm.\n# Commands:\n[{"cmd_id": "c1", "type": "notes.add", "args": {"text": "x"}},'
        ' {"cmd_id": "c2" "type": oops}]\n# End commands'
    )
    web.agent.services.llms.providers["fake"].responses = [malformed]
    web.agent.tick()
    web.agent.tick()  # the same answer again
    newest, first = web.client.get("/api/ticks").json()["ticks"]
    assert first["tick"] == 1 and first["parse_errors"] == ["repaired malformed JSON"]
    assert "Not read / refused:" in web.client.get("/thoughts").text
    assert newest["tick"] == 2 and newest["reflexes"]["stagnation_flag"] is True
    assert newest["reflexes"]["stagnation_reason"]


def test_ticks_page_back_in_time_newest_first(web):
    for _ in range(3):
        web.agent.tick()
    first = web.client.get("/api/ticks", params={"limit": 2}).json()
    assert [c["tick"] for c in first["ticks"]] == [3, 2] and first["next_before"] == first["ticks"][-1]["id"]
    second = web.client.get("/api/ticks", params={"limit": 2, "before": first["next_before"]}).json()
    assert [c["tick"] for c in second["ticks"]] == [1] and second["next_before"] is None
    older = web.client.get("/thoughts/ticks", params={"before": first["next_before"]})
    assert older.status_code == 200 and 'data-tick="1"' in older.text and 'data-tick="2"' not in older.text


def test_an_unknown_tick_is_a_404_naming_the_field(web):
    answer = web.client.get("/api/ticks/main/99")
    assert answer.status_code == 404 and answer.json()["field"] == "tick"


def test_failed_model_calls_and_a_degraded_tick_are_shown_not_hidden(agent_factory, tmp_path):
    agent = agent_factory(FakeLLM("first", down=True), FakeLLM("second"))
    services = WebServices(
        db=agent.services.db, overrides=Overrides.of(data_dir=str(tmp_path)), clock=agent.services.clock
    )
    with TestClient(create_app(services=services), base_url="http://127.0.0.1") as client:
        agent.tick()
        card = client.get("/api/ticks/main/1").json()
        assert card["llm_id"] == "second" and card["status"] == "ok"
        assert [(f["llm_id"], f["purpose"]) for f in card["failovers"]] == [("first", "think")]
        assert "connection refused" in card["failovers"][0]["error"]
        agent.services.llms.providers["second"].down = True
        agent.tick()
        degraded = client.get("/api/ticks/main/2").json()
        assert degraded["status"] == "degraded" and degraded["thought"] is None
        assert "no LLM answered" in degraded["error"] and degraded["failovers"]
        page = client.get("/thoughts").text
        assert "no LLM answered" in page and "connection refused" in page


def test_a_quarantined_tick_shows_its_error_and_the_answer_set_aside(web):
    web.agent.tick()  # the thread exists
    with web.agent.services.db.unit() as repos:
        repos.ticks.start("main", 7, "chat")
        repos.ticks.keep_answer("main", 7, {"response": "half a thought", "llm": {"llm_id": "fake"}})
        repos.ticks.fail("main", 7, step="reflect", error="RuntimeError: the reflex broke")
    card = web.client.get("/api/ticks/main/7").json()
    assert card["status"] == "failed" and card["error"] == "RuntimeError: the reflex broke"
    assert card["failed_step"] == "reflect" and card["quarantined"] == "half a thought" and card["thought"] is None
    page = web.client.get("/thoughts").text
    assert "failed in reflect (quarantined): RuntimeError: the reflex broke" in page and "half a thought" in page


def test_stelis_threads_form_a_tree_with_their_window_budgets_and_chronicles(web):
    web.agent.tick()
    with web.agent.services.db.unit() as repos:
        root = repos.threads.get("main")
        child = repos.threads.create_child(
            "main/research", root, label="research tides", window_ratio=0.5, origin="command", owner="test"
        )
        repos.threads.create_child(
            "main/research/deep", child, label="deeper", window_ratio=0.5, origin="command", owner="test"
        )
        repos.threads.finish(
            "main/research",
            status="completed",
            chronicle="Tides follow the moon.",
            now=datetime(2026, 1, 1, tzinfo=UTC),
        )
    tree = web.client.get("/api/threads").json()
    assert tree["count"] == 3 and [r["id"] for r in tree["roots"]] == ["main"]
    main = tree["roots"][0]
    assert main["window_tokens"] and main["budget_tokens"] and main["effective_ratio"] == 1.0
    research = main["children"][0]
    assert (research["id"], research["status"], research["chronicle"]) == (
        "main/research",
        "completed",
        "Tides follow the moon.",
    )
    assert research["window_ratio"] == 0.5 and research["children"][0]["effective_ratio"] == 0.25
    page = web.client.get("/thoughts").text
    assert "research tides" in page and "Tides follow the moon." in page and "25% of the model" in page


def test_the_page_streams_cards_and_the_live_fragment_renders_the_closed_tick(web):
    page = web.client.get("/thoughts")
    assert page.status_code == 200 and 'sse-connect="/live/thoughts"' in page.text
    assert 'sse-swap="tick" hx-swap="afterbegin"' in page.text and 'sse-swap="step"' in page.text
    web.agent.services.llms.providers["fake"].responses = [THOUGHT]
    web.agent.tick()
    request = PageRequest(web.app)
    fragment = _thought_fragment(
        request, web.services, {"id": 41, "kind": "tick", "thread_id": "main", "tick": 1, "data": {"executed": 3}}
    )
    assert fragment["event"] == "tick" and fragment["id"] == "41"
    assert 'data-tick="1"' in fragment["data"] and "The tide comes back twice a day" in fragment["data"]
    assert "tides.predict" in fragment["data"] and "\n" not in fragment["data"]  # one SSE data line
    failed = _thought_fragment(
        request,
        web.services,
        {"id": 42, "kind": "tick_failed", "thread_id": "main", "tick": None, "data": {"tick": 1, "error": "x"}},
    )
    assert failed["event"] == "tick" and 'data-tick="1"' in failed["data"]
    step = _thought_fragment(
        request,
        web.services,
        {"id": 43, "kind": "step", "thread_id": "main", "tick": 2, "node": "prepare_context", "data": {}},
    )
    assert step["event"] == "step" and "tick 2: prepare_context" in step["data"]
