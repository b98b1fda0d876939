"""Episodic memory: day summaries after the day ends, weekly and monthly roll-ups, local days, injection."""

from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest

from memory import Database
from memory.store import record_turn
from memory.upkeep.episodes import Period, next_due, zone_of
from tests.fakes.llm import FakeLLM

NOW = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)  # a Saturday


def said(repos, ref: str, text: str, when: datetime, author: str = "User"):
    record_turn(repos, ref=ref, text=text, author=author, episode="main", thread_id="main", created_at=when)


def episode_answer(prompt: str) -> dict:
    what = prompt.split("Summarise ")[1].split(" from your memory")[0]
    return {"summary": f"SUMMARY of {what}", "key_events": ["an event"], "emotional_tone": "calm"}


def test_days_then_weeks_are_summarised_one_per_tick_and_injected(agent_factory):
    fake = FakeLLM(
        "fake",
        json_answer=lambda p: (
            episode_answer(p)
            if "Summarise " in p
            else {"emotions": [{"emotion": "calm", "strength": 2, "reason": "quiet"}]}
        ),
    )
    agent = agent_factory(fake)
    services = agent.services
    services.clock = lambda: NOW
    services.settings.timezone = "UTC"
    services.settings.memory.episode_backfill_days = 14
    with services.db.unit() as repos:
        said(repos, "note:1", "We planned the boat trip to the island.", datetime(2026, 11, 10, 15, tzinfo=UTC))
        said(
            repos,
            "msg:901",
            "I will pack the map and the compass.",
            datetime(2026, 11, 10, 15, 5, tzinfo=UTC),
            "Lumen",
        )
        said(
            repos,
            "note:2",
            "The trip was cancelled because of the storm.",
            datetime(2026, 11, 11, 8, tzinfo=UTC),
        )
        said(repos, "note:3", "My sister visits next week.", datetime(2026, 11, 18, 19, tzinfo=UTC))
    built = [agent.tick()["memory_upkeep"].get("episode") for _ in range(5)]
    assert built == ["day 2026-11-10", "day 2026-11-11", "day 2026-11-18", "week 2026-11-09", None]
    prompts = [c["prompt"] for c in fake.calls if c["json_schema"] and "Summarise " in c["prompt"]]
    assert "the day Tuesday 2026-11-10" in prompts[0] and "User: We planned the boat trip" in prompts[0]
    assert "15:05 [message] Lumen: I will pack the map" in prompts[0] and "storm" not in prompts[0]
    assert "the week 2026-11-09 to 2026-11-15" in prompts[3]
    assert "2026-11-10: SUMMARY of the day Tuesday 2026-11-10" in prompts[3] and "sister" not in prompts[3]
    with services.db.unit() as repos:
        day = repos.episodes.get("day", "2026-11-11")
        week = repos.episodes.get("week", "2026-11-09")
        assert day.sources == ["message:note:2"] and day.emotional_tone == "calm" and day.key_events == ["an event"]
        assert week.sources == ["day:2026-11-10", "day:2026-11-11"]
        assert repos.items.find("episode", day.id).text == "SUMMARY of the day Wednesday 2026-11-11"
    think = [c["prompt"] for c in fake.calls if c["json_schema"] is None][-1]
    recent_days = think.split("Recent days")[1]
    assert recent_days.index("[2026-11-11] SUMMARY") < recent_days.index("[2026-11-18] SUMMARY")
    assert "[week of 2026-11-09]" not in recent_days  # its days are shown themselves
    services.settings.memory.episode_days = 1
    agent.tick()
    think = [c["prompt"] for c in fake.calls if c["json_schema"] is None][-1]
    assert "[week of 2026-11-09] SUMMARY of the week" in think and "[2026-11-11]" not in think


def test_local_days_month_rollup_and_backfill_window(tmp_path):
    db = Database.open(tmp_path)
    tokyo = ZoneInfo("Asia/Tokyo")
    with db.unit() as repos:
        said(repos, "note:1", "late evening in Tokyo", datetime(2026, 10, 30, 20, tzinfo=UTC))  # Oct 31 in Tokyo
    with db.unit() as repos:
        assert next_due(repos, date(2026, 11, 3), tokyo) == Period("day", date(2026, 10, 31))
        assert next_due(repos, date(2026, 11, 3), ZoneInfo("UTC")) == Period("day", date(2026, 10, 30))
        assert next_due(repos, date(2026, 11, 30), tokyo) is None  # beyond the backfill window, no day summaries
        repos.episodes.upsert("day", "2026-10-31", "a day")
        assert next_due(repos, date(2026, 11, 3), tokyo) == Period("week", date(2026, 10, 26))
        repos.episodes.upsert("week", "2026-10-26", "a week")
        assert next_due(repos, date(2026, 11, 3), tokyo) == Period("month", date(2026, 10, 1))
        assert Period("month", date(2026, 12, 1)).end == date(2027, 1, 1)
    db.close()


def test_a_dead_model_postpones_the_summary(agent_factory):
    from llm import AllLLMsUnavailable
    from nodes.upkeep import write_episode

    def down(prompt, schema):
        raise AllLLMsUnavailable("no LLM answered")

    agent = agent_factory(FakeLLM("fake"))
    services = agent.services
    services.clock = lambda: NOW
    services.settings.timezone = "Europe/Berlin"
    with services.db.unit() as repos:
        said(repos, "note:1", "Yesterday we talked about whales.", datetime(2026, 11, 20, 12, tzinfo=UTC))
    assert write_episode(services, "main", down) == {"episode": "postponed"}
    with services.db.unit() as repos:
        assert (
            repos.episodes.get("day", "2026-11-20") is None and repos.config.get("memory/episodes_checked_on") is None
        )
    answer = {"summary": "Whales.", "key_events": [], "emotional_tone": "curious"}
    assert write_episode(services, "main", lambda prompt, schema: answer) == {"episode": "day 2026-11-20"}
    assert write_episode(services, "main", down) == {}  # nothing more is missing today: no model call at all
    with services.db.unit() as repos:
        assert repos.episodes.get("day", "2026-11-20").summary == "Whales."
        assert repos.config.get("memory/episodes_checked_on") == "2026-11-21"


def test_a_bad_timezone_is_refused_with_its_file_and_line(tmp_path):
    import shutil

    from persona import default_persona_dir
    from persona.settings import SettingsError, load_settings

    persona = tmp_path / "persona"
    shutil.copytree(default_persona_dir(), persona)
    config = (persona / "config.yaml").read_text()
    (persona / "config.yaml").write_text(config + "timezone: Mars/Olympus\n")
    line = len(config.splitlines()) + 1
    with pytest.raises(SettingsError) as refused:
        load_settings(persona)
    assert str(refused.value) == f"config.yaml:{line} timezone: Value error, 'Mars/Olympus' is not a known IANA zone"


def test_zone_of_a_name_or_the_machines():
    assert zone_of("Asia/Tokyo") == ZoneInfo("Asia/Tokyo")
    assert zone_of(None) == datetime.now().astimezone().tzinfo
    with pytest.raises(ValueError, match="'Mars/Olympus' is not a known IANA zone"):
        zone_of("Mars/Olympus")
