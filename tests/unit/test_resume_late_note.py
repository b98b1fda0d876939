"""A tick killed after its model answered, while a note arrived after that call (issue 27, item 2): the resume reuses
the kept answer with the notes that answer saw — only those are shown and marked read; the later note stays unread
and the next tick answers it. The kill is simulated in-process and deterministically: a BaseException (no step's
handler, no quarantine sees it) at the exact point, from an agent whose checkpointer dies with it, as a loop tick's
(`durability="exit"`) dies with a `kill -9`; the real kill -9 is tests/integration/test_kill_after_answer.py."""

from __future__ import annotations

import itertools

import pytest

from nodes.steps import s05_call_llm
from tests.conftest import make_agent
from tests.fakes.llm import FakeLLM

FIRST = "What is the tide doing tonight?"
LATE = "And where did the gulls go?"


class Killed(BaseException):
    """The process dies here."""


def persona_model() -> FakeLLM:
    """Thoughts that differ each tick (no repeat for the novelty reflex to set aside); the reply turn's few-shot
    conversation (persona/voice.py) gets a reply in words."""
    count = itertools.count(1)

    def answer(prompt: str) -> str:
        if "'s new thought" in prompt:
            return f"Thought {next(count)}: the water keeps its own time, and I keep mine."
        return "The tide is coming in, slowly."

    return FakeLLM("fake", responses=answer)


def thinking(fake: FakeLLM) -> list[str]:
    return [c["prompt"] for c in fake.calls if c["json_schema"] is None and "'s new thought" in c["prompt"]]


def notes_in(prompt: str) -> list[str]:
    """Which of the two notes the prompt's "Incoming notes" block shows (one read earlier may still come to mind as a
    memory elsewhere in the prompt)."""
    block = prompt.partition("# Incoming notes\n")[2].partition("\n# ")[0]
    return [text for text in (FIRST, LATE) if text in block]


def replies(fake: FakeLLM) -> list[str]:
    return [c["prompt"] for c in fake.calls if c["json_schema"] is None and "Human:" in (c["stop"] or [])]


def closed(agent) -> None:
    agent.close()
    agent.services.db.close()


def unread(agent, *note_ids: int) -> list[bool]:
    with agent.services.db.unit() as repos:
        return [not repos.notes.get(i).read for i in note_ids]


@pytest.mark.parametrize("reply_turn", ["off", "always"])
@pytest.mark.parametrize("kill_point", ["answer_kept", "notes_marked_read"])
def test_a_note_that_came_after_the_model_call_survives_a_kill_and_is_answered_next_tick(
    tmp_path, monkeypatch, kill_point, reply_turn
):
    fake = persona_model()
    voice = {"reply_turn": reply_turn}
    agent = make_agent(tmp_path, fake, checkpointer="sqlite", voice=voice)
    agent.tick()  # tick 1: nothing waits
    with agent.services.db.unit() as repos:
        first = repos.notes.add(FIRST, source="user").id
    closed(agent)

    # tick 2 in a process that dies: its checkpoint goes with it (memory), what it committed stays
    dying = make_agent(tmp_path, fake, checkpointer="memory", voice=voice)
    late: list[int] = []

    def die(*args, **kwargs) -> None:
        with dying.services.db.unit() as repos:
            if kill_point == "notes_marked_read" and not repos.notes.get(first).read:
                return  # sync_memory of another step: not yet the point
            late.append(repos.notes.add(LATE, source="user").id)  # the human writes after the model answered…
        raise Killed  # …and the process dies before the tick ends

    if kill_point == "answer_kept":
        answer = s05_call_llm._answer

        def answer_then_die(*args, **kwargs):  # the answer is kept with the tick's row, then the process dies
            answer(*args, **kwargs)
            die()

        monkeypatch.setattr(s05_call_llm, "_answer", answer_then_die)
    else:
        dying.services.sync_memory = die  # write_memory's next call after marking the notes read
    with pytest.raises(Killed):
        dying.tick()
    assert late and len(thinking(fake)) == 2 and notes_in(thinking(fake)[-1]) == [FIRST]
    monkeypatch.undo()
    dying.services.db.close()

    resumed = make_agent(tmp_path, fake, checkpointer="sqlite", voice=voice)
    state = resumed.tick()  # tick 2 again: the kept answer, with the notes it saw
    assert state["tick"] == 2 and len(thinking(fake)) == 2  # not generated twice
    assert state["incoming_note_ids"] == [first]
    assert notes_in(state["prompt"]) == [FIRST]  # the rebuilt prompt is the one answered: without LATE
    assert unread(resumed, first, late[0]) == [False, True]  # the late note is not lost
    if reply_turn == "always":
        assert state["reply"]["notes"] == [first] and LATE not in replies(fake)[-1]

    state = resumed.tick()  # tick 3: the late note is seen and answered
    assert state["tick"] == 3 and state["incoming_note_ids"] == late
    assert notes_in(thinking(fake)[-1]) == [LATE]
    if reply_turn == "always":
        assert state["reply"]["notes"] == late and LATE in replies(fake)[-1]
    assert unread(resumed, first, late[0]) == [False, False]
    with resumed.services.db.unit() as repos:
        assert [t.status for t in repos.ticks.recent(5)] == ["ok", "ok", "ok"]
    closed(resumed)
