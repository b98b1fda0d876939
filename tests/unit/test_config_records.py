"""The config table's values as typed records (managers/records.py): each is read through one accessor of the
manager that owns it and written back through the same record; what was stored comes back as it was written, and a
stored value the record cannot take gives the defaults for what is bad — logged with its key — and never stops a
tick."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from managers.loop import IdleState, LoopError, LoopReport, PlaybookRun, ThreadCycle
from managers.thinking import ThinkingState
from memory import Database
from persona.settings import NotesFilter, Settings
from tests.fakes.managers import managers_over

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def db(tmp_path: Path):
    database = Database.open(tmp_path)
    yield database
    database.close()


def test_a_threads_cycle_comes_back_as_it_was_written(db: Database) -> None:
    with db.unit() as repos:
        loop = managers_over(repos).loop
        loop.set_pause("main", 12.5)
        loop.set_responses("main", 4)
        loop.set_notes_mode("main", "auto", None, note_filter={"tags": ["tides"], "sources": ["peer"]})
        loop.set_context_mode("main", "concentration", focus_tags=["sea"], focus_logic="and")
        loop.load_skill("main", "check-in", tick=3, ticks=2)
        loop.idle_on(
            "main",
            tick=3,
            now=NOW,
            timeout_s=60,
            wake_on_note=False,
            note_filter={},
            process=None,
            task=None,
        )
    with db.unit() as repos:
        cycle = managers_over(repos).loop.cycle("main")
        stored = repos.config.cycle("main")
    assert (cycle.pause_s, cycle.responses, cycle.notes_mode) == (12.5, 4, "auto")
    assert cycle.notes_filter == NotesFilter(tags=["tides"], sources=["peer"])
    assert (cycle.context_mode, cycle.focus_tags, cycle.focus_logic) == ("concentration", ["sea"], "and")
    assert [(s.name, s.until_tick) for s in cycle.skills_loaded] == [("check-in", 5)]
    assert cycle.idle is not None and (cycle.idle.since, cycle.idle.timeout_s, cycle.idle.since_tick) == (NOW, 60, 3)
    # what is stored is JSON of what was set, read back into the same record
    assert datetime.fromisoformat(stored["idle"]["since"]) == NOW
    assert stored["notes_filter"] == {"tags": ["tides"], "sources": ["peer"]} and "abstracts_mode" not in stored
    assert ThreadCycle.model_validate(stored) == cycle


def test_the_idle_record_wakes_the_thread_at_its_timeout(db: Database) -> None:
    with db.unit() as repos:
        loop = managers_over(repos).loop
        loop.idle_on("main", tick=1, now=NOW, timeout_s=30, wake_on_note=False, note_filter={}, process=None, task=None)
        idle = loop.cycle("main").idle
        assert isinstance(idle, IdleState)
        assert loop.wake_reason(idle, NOW + timedelta(seconds=10)) is None
        assert loop.wake_reason(idle, NOW + timedelta(seconds=30)) == "timeout of 30s"
        assert loop.wake_if_due("main", NOW + timedelta(seconds=31)) and loop.cycle("main").idle is None


def test_a_change_the_record_cannot_take_is_refused_and_nothing_is_stored(db: Database) -> None:
    with db.unit() as repos:
        loop = managers_over(repos).loop
        loop.set_pause("main", 5)
        with pytest.raises(LoopError, match="pause_s"):
            loop.update_cycle("main", pause_s=-1)
        with pytest.raises(LoopError, match="context_mode"):
            loop.update_cycle("main", context_mode="trance")
        assert repos.config.cycle("main") == {"pause_s": 5.0}


def test_a_malformed_field_falls_back_alone_and_the_key_is_logged(db: Database, caplog) -> None:
    with db.unit() as repos:
        repos.config.set_cycle(
            "main", {"pause_s": "soon", "responses": 3, "idle": {"since": "yesterday-ish"}, "notes_mode": "auto"}
        )
    with caplog.at_level(logging.WARNING, logger="managers.records"), db.unit() as repos:
        cycle = managers_over(repos).loop.cycle("main")
    assert (cycle.pause_s, cycle.idle, cycle.responses, cycle.notes_mode) == (None, None, 3, "auto")
    [warning] = [r.getMessage() for r in caplog.records]
    assert "cycle/main" in warning and "idle, pause_s" in warning


@pytest.mark.parametrize("blob", [[1, 2, 3], "paused", 42, True])
def test_a_value_that_is_no_json_object_gives_the_defaults(db: Database, caplog, blob) -> None:
    with db.unit() as repos:
        repos.config.set_cycle("main", blob)
    with caplog.at_level(logging.WARNING, logger="managers.records"), db.unit() as repos:
        loop = managers_over(repos).loop
        assert loop.cycle("main") == ThreadCycle()
        assert loop.wake_if_due("main", NOW)  # not idle: it thinks
        loop.set_pause("main", 2)  # a write replaces what could not be read
        assert repos.config.cycle("main") == {"pause_s": 2.0}
    assert any("cycle/main" in r.getMessage() and "not a JSON object" in r.getMessage() for r in caplog.records)


def test_a_malformed_cycle_does_not_stop_a_tick(agent_factory) -> None:
    agent = agent_factory(cycle={"pause_s": 2.5})
    with agent.services.db.unit() as repos:
        repos.config.set_cycle(agent.thread_id, {"pause_s": {"not": "a number"}, "skills_loaded": "all of them"})
    state = agent.tick()
    assert state["pause_s"] == 2.5 and not state.get("error")  # config.yaml's pause holds
    with agent.services.db.unit() as repos:
        assert repos.ticks.get(agent.thread_id, state["tick"]).status == "ok"


def test_the_thinking_state_comes_back_and_a_bad_one_is_as_if_it_never_thought(db: Database, caplog) -> None:
    with db.unit() as repos:
        thinking = managers_over(repos).thinking
        thinking.thought("main", NOW)
        state = thinking.state("main")
        assert (state.since, state.streak, state.quiet_since) == (NOW, 0, None)
        assert thinking.arrived("main") is None  # nothing new since it thought
        repos.config.set_thinking_state("main", {"since": "a while ago", "streak": "many"})
    with caplog.at_level(logging.WARNING, logger="managers.records"), db.unit() as repos:
        thinking = managers_over(repos).thinking
        assert thinking.state("main") == ThinkingState()
        assert thinking.arrived("main") == "no thought yet"  # it thinks: the tick goes on
    assert any("thinking:main" in r.getMessage() and "since, streak" in r.getMessage() for r in caplog.records)


def test_the_loops_control_report_and_wake_come_back_and_a_bad_one_gives_their_defaults(db: Database, caplog) -> None:
    with db.unit() as repos:
        loop = managers_over(repos).loop
        loop.request_state("paused", by="owner (web)", now=NOW)
        loop.record_status("paused", now=NOW, thread="main", tick=7, pid=4242)
        loop.request_wake(by="owner (web)", now=NOW)
    with db.unit() as repos:
        loop = managers_over(repos).loop
        state = loop.status()
        assert (state.control.want, state.control.by, state.control.at) == ("paused", "owner (web)", NOW)
        assert (state.loop.state, state.loop.thread, state.loop.tick, state.loop.pid) == ("paused", "main", 7, 4242)
        assert loop.running_thread() == "main" and loop.woken_since(NOW, 0) == "woken up by owner (web)"
        repos.config.loop_control = {"want": "dancing"}
        repos.config.loop_status = {"tick": "seven", "thread": "side"}
        repos.config.wake_request = {"at": "at noon", "by": "someone"}
    with caplog.at_level(logging.WARNING, logger="managers.records"), db.unit() as repos:
        loop = managers_over(repos).loop
        assert loop.wanted() == "running"  # what cannot be read asks for nothing
        assert loop.report() == LoopReport(thread="side") and loop.running_thread() == "side"
        assert loop.woken_since(NOW, 0) is None
    bad = " ".join(r.getMessage() for r in caplog.records)
    assert "run/control" in bad and "run/status" in bad and "run/wake" in bad


def test_the_mesh_connectivity_comes_back_and_a_bad_one_is_not_isolated(db: Database, caplog) -> None:
    settings = Settings(mesh={"enabled": True})
    with db.unit() as repos:
        mesh = managers_over(repos, settings, clock=lambda: NOW).mesh
        assert mesh.connectivity().door is None and not mesh.isolated()  # the door never said
        assert mesh.record_connectivity(isolated=True, door="not_started")
        assert not mesh.record_connectivity(isolated=True, door="not_started")  # no change: nothing stored
        state = mesh.connectivity()
        assert (state.isolated, state.door, state.since, state.isolated_since) == (True, "not_started", NOW, NOW)
        assert mesh.isolated()
        repos.config.mesh_connectivity = {"isolated": "perhaps", "door": "running"}
    with caplog.at_level(logging.WARNING, logger="managers.records"), db.unit() as repos:
        mesh = managers_over(repos, settings, clock=lambda: NOW).mesh
        assert not mesh.isolated() and mesh.connectivity().door == "running"
    assert any("mesh/connectivity" in r.getMessage() and "isolated" in r.getMessage() for r in caplog.records)


def test_the_persona_edits_come_back_newest_first_and_a_bad_entry_is_left_out(db: Database, caplog) -> None:
    with db.unit() as repos:
        persona = managers_over(repos).persona
        persona.record_edit("SOUL.md", by="owner (web)", now=NOW)
        persona.record_edit("ethics.yaml", by="owner (cli)", now=NOW + timedelta(minutes=1))
        assert [(e.what, e.by) for e in persona.edits()] == [("ethics.yaml", "owner (cli)"), ("SOUL.md", "owner (web)")]
        repos.config.persona_edits = [*repos.config.persona_edits, {"what": "no time, no author"}, "a string"]
    with caplog.at_level(logging.WARNING, logger="managers.records"), db.unit() as repos:
        persona = managers_over(repos).persona
        assert [e.what for e in persona.edits()] == ["ethics.yaml", "SOUL.md"]
        persona.record_edit("IDENTITY.md", by="owner (web)", now=NOW)  # what could not be read is not written back
        assert [e["what"] for e in repos.config.persona_edits] == ["SOUL.md", "ethics.yaml", "IDENTITY.md"]
    assert any("human/persona_edits" in r.getMessage() and "2, 3" in r.getMessage() for r in caplog.records)


def test_a_playbook_run_comes_back_and_a_bad_one_resumes_nothing(db: Database, caplog) -> None:
    with db.unit() as repos:
        loop = managers_over(repos).loop
        assert loop.playbook_run("main", "summarise") == PlaybookRun()
        loop.set_playbook_run("main", "summarise", PlaybookRun(run_id="r1", status="running", inputs={"n": 3}))
        assert loop.playbook_run("main", "summarise") == PlaybookRun(run_id="r1", status="running", inputs={"n": 3})
        assert repos.config.playbook_run("main", "summarise") == {
            "run_id": "r1",
            "status": "running",
            "inputs": {"n": 3},
        }
        repos.config.set_playbook_run("main", "summarise", {"run_id": ["r", 1], "status": "running", "inputs": "n=3"})
    with caplog.at_level(logging.WARNING, logger="managers.records"), db.unit() as repos:
        assert managers_over(repos).loop.playbook_run("main", "summarise") == PlaybookRun(status="running")
    assert any("run/main/summarise" in r.getMessage() for r in caplog.records)


def test_the_lineage_children_come_back_and_one_that_cannot_be_read_is_left_out(db: Database, caplog) -> None:
    born = {"name": "Kit", "mode": "clone", "persona_dir": "/p/kit", "spawned_at": NOW.isoformat()}
    with db.unit() as repos:
        repos.config.lineage_children = [
            {**born, "did": "did:key:z6Mk", "port": 8801, "data_dir": "/d/kit"},
            {"mode": "trained"},  # no name
            {"name": "Bo", "port": "eighty"},
        ]
    with caplog.at_level(logging.WARNING, logger="managers.records"), db.unit() as repos:
        [kit] = managers_over(repos).loop.lineage_children()
    assert (kit.name, kit.port, kit.data_dir, kit.db_name) == ("Kit", 8801, "/d/kit", None)
    assert any("lineage/children" in r.getMessage() and "1, 2" in r.getMessage() for r in caplog.records)
