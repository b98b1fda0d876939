"""The terminal's live view (cli/live.py) and the journal the web app shows (graph/loop/journal.py) say the truth: how
much of a long thought they leave out and where the whole of it is, and which tick runs when an interrupted one
resumes. In process, with the fake LLMs."""

from __future__ import annotations

import io
import logging
import random
import string

from fastapi.testclient import TestClient
from rich.console import Console

from cli.live import LiveView
from graph.loop import Stopper, run_loop
from graph.loop.journal import LiveJournal
from llm import LLMUnavailable
from persona.settings import Overrides
from tests.fakes.llm import FakeLLM
from tests.unit.test_llm_failures import HangsUntilCancelled
from web.services import events


def screen() -> Console:
    return Console(file=io.StringIO(), width=100_000, color_system=None)  # one printed line is one line


def said(out: Console) -> str:
    return out.file.getvalue()  # type: ignore[attr-defined]


def test_a_long_thought_says_how_many_characters_it_leaves_out_and_links_to_the_whole(agent_factory, tmp_path):
    from web.app import create_app
    from web.context import WebServices

    rng = random.Random(27)  # varied prose: a repetitive answer would be set aside as degenerate
    answer = " ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(6_000))
    answer = answer[:31_999].strip() + "."
    assert len(answer) == 32_000
    out = screen()
    with LiveView("Lumen", out=out) as view:  # no web app beside the loop: the database has it
        view("updates", {"update_process_log": {"tick": 2, "thread_id": "main"}})
        view("updates", {"call_llm": {"response": answer, "llm": {"llm_id": "fake"}}})
        view("updates", {"call_llm": {"response": "short", "llm": {"llm_id": "fake"}}})
    assert f"{answer[:400]}… (31,600 more characters) — full text: run.py inspect --json\n" in said(out)
    assert "\nshort\n" in said(out)  # nothing left out, nothing added

    agent = agent_factory(FakeLLM("fake", responses=[answer]))
    out = screen()
    with LiveView("Lumen", out=out, web_url="http://127.0.0.1:8765") as view:
        assert run_loop(agent, 1, on_stream=view, autonomy=False, idle_poll_s=0).ticks_run == 1
    (line,) = [line for line in said(out).splitlines() if line.startswith(answer[:40])]
    assert line == f"{answer[:400]}… (31,600 more characters) — full text: http://127.0.0.1:8765/api/ticks/main/1"
    services = WebServices(
        db=agent.services.db,
        overrides=Overrides.of(data_dir=str(tmp_path)),
        clock=agent.services.clock,
        _memory=agent.services.memory,
    )
    with TestClient(create_app(services=services), base_url="http://127.0.0.1") as client:
        card = client.get(line.split("full text: http://127.0.0.1:8765")[1])
    assert card.status_code == 200 and card.json()["thought"] == answer  # the link gives the whole thought


class HangsThenFails(HangsUntilCancelled):
    """A model that hangs (the run is stopped during its call, as Ctrl-C would), then, after the restart, is down."""

    def complete(self, prompt, sampling, *, cancel=None, **kwargs):
        if self.hang and kwargs.get("json_schema") is None:
            return super().complete(prompt, sampling, cancel=cancel, **kwargs)
        raise LLMUnavailable(f"{self.id}: connection refused")


def test_a_resumed_tick_is_named_by_its_own_number_everywhere(agent_factory, caplog):
    stopper = Stopper()
    model = HangsThenFails("main", stopper)
    agent = agent_factory(model)
    assert run_loop(agent, ticks=1, stopper=stopper, idle_poll_s=0).interrupted
    assert agent.interrupted and agent.state()["tick"] == 1
    model.hang = False
    out = screen()
    journal = LiveJournal(agent.services.db, "main")  # a new process: neither has seen the tick open
    try:
        with caplog.at_level(logging.WARNING), LiveView("Lumen", out=out) as view:
            result = run_loop(
                agent,
                ticks=1,
                stopper=Stopper(),
                idle_poll_s=0,
                on_stream=lambda mode, data: (view(mode, data), journal(mode, data)),
            )
    finally:
        journal.close()
    assert result.ticks_run == 1 and result.last_state["degraded"]
    assert any(r.getMessage().startswith("tick 1 degraded") for r in caplog.records)  # the warning …
    printed = said(out)
    assert "tick 1 resumes where it was interrupted" in printed
    assert "tick 1: no LLM answered" in printed and "tick 0" not in printed  # … and the console agree
    assert [line for line in printed.splitlines() if " │ " in line][0].startswith("tick 1 │")  # the tick's summary
    rows = events.read_after(agent.services.managers, 0)
    assert rows and {r["tick"] for r in rows} == {1}  # the web app's live lines too (they said "tick None")
