"""Controls: the flag the web writes is what the loop obeys; the page says whether a loop runs at all; the LLM
endpoints' health comes from the calls the loop recorded."""

from __future__ import annotations

import os
from datetime import UTC, datetime

from graph.loop import Stopper, run_loop
from tests.fakes.managers import managers_over


def test_pause_and_stop_from_the_api_reach_the_loop(web):
    assert web.client.put("/api/loop", json={"want": "paused"}).json()["want"] == "paused"
    stopper = Stopper()
    ticks_before = web.agent.state().get("tick", 0)
    seen = []

    def listen(mode, data):
        seen.append(mode)

    import threading

    threading.Timer(0.5, stopper.request).start()  # paused: the loop waits, ticking nothing, until stopped
    result = run_loop(web.agent, 3, stopper=stopper, idle_poll_s=0.05, autonomy=False, on_stream=listen)
    assert result.ticks_run == 0 and web.agent.state().get("tick", 0) == ticks_before and seen == []
    assert web.client.get("/api/loop").json()["state"] == "stopped"  # recorded when the run ended

    web.client.put("/api/loop", json={"want": "stopped"})
    result = run_loop(web.agent, 3, stopper=Stopper(), autonomy=False)
    assert result.stopped_by_human and result.ticks_run == 0

    web.client.put("/api/loop", json={"want": "running"})
    result = run_loop(web.agent, 2, stopper=Stopper(), autonomy=False)
    assert result.ticks_run == 2 and not result.stopped_by_human
    status = web.client.get("/api/loop").json()
    assert status["ticks"] == 2 and status["last_tick"]["tick"] == 2 and status["pid"] == os.getpid()
    assert status["alive"] is True


def test_a_bad_control_value_names_the_field(web):
    answer = web.client.put("/api/loop", json={"want": "faster"})
    assert answer.status_code == 422 and answer.json()["field"] == "want"


def test_the_page_says_when_no_loop_runs_and_shows_llm_health(web):
    now = datetime.now(UTC)
    with web.agent.services.db.unit() as repos:
        managers_over(repos).loop.record_status("running", now=now, thread="main", pid=2**22 + 7)  # no such process
    page = web.client.get("/controls").text
    assert 'data-testid="no-loop"' in page
    web.agent.tick()
    llms = web.client.get("/api/llms").json()
    assert [(item["id"], item["healthy"]) for item in llms] == [("fake", True)] and llms[0]["calls"] >= 1
    assert "fake" in web.client.get("/controls").text


def test_the_control_buttons_post_the_wanted_state_from_the_page(web):
    answer = web.client.post("/controls/loop", data={"want": "paused"}, headers=web.csrf)
    assert answer.status_code == 200 and 'data-testid="loop-want">paused' in answer.text
    with web.agent.services.db.unit() as repos:
        assert managers_over(repos).loop.wanted() == "paused"
