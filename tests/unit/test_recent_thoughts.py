"""The prompt's recent thoughts in meditation mode: the wider window is read for its ids only, and the K chosen
messages are rendered whole, oldest first, as they were when the window was read whole."""

from __future__ import annotations

from managers.loop import ThreadCycle
from memory.db import Database
from memory.models import Thread
from nodes.steps.s04_prepare_context.memory_lines import recent_thoughts
from tests.fakes.managers import managers_over


class ChoosingMemory:
    """A memory index whose farthest-first choice is given (the refs it was offered are kept)."""

    def __init__(self, chosen: list[str]):
        self.chosen, self.offered = chosen, []

    def diverse(self, refs: list[str], k: int) -> list[str]:
        self.offered.append(list(refs))
        return self.chosen[:k]


def _thoughts(db: Database, n: int) -> list[int]:
    with db.unit() as repos:
        repos.session.add(Thread(id="main"))
        repos.session.flush()
        return [
            repos.messages.add_keyed(
                f"main:{i}",
                thread_id="main",
                tick=i,
                kind="response",
                content=f"thought {i}",
                emotions=[f"calm:{i % 3 + 1}"],
                novelty_score=float(i),
            )
            for i in range(1, n + 1)
        ]


def test_meditation_renders_the_chosen_messages_whole_oldest_first(tmp_path):
    db = Database.open(tmp_path)
    ids = _thoughts(db, 12)
    memory = ChoosingMemory([f"msg:{ids[9]}", f"msg:{ids[1]}", f"msg:{ids[5]}"])
    with db.unit() as repos:
        lines, shown = recent_thoughts(managers_over(repos), "main", 3, ThreadCycle(context_mode="meditation"), memory)
    assert memory.offered == [[f"msg:{i}" for i in ids]]  # the window (k × 5 ≥ 12): every message, oldest first
    assert shown == [ids[1], ids[5], ids[9]]
    assert lines == [
        "[tick 2] thought 2  (emotions calm:3; novelty 2)",
        "[tick 6] thought 6  (emotions calm:1; novelty 6)",
        "[tick 10] thought 10  (emotions calm:2; novelty 10)",
    ]
    db.close()


def test_meditation_without_an_index_shows_the_last_k(tmp_path):
    db = Database.open(tmp_path)
    ids = _thoughts(db, 5)
    with db.unit() as repos:
        lines, shown = recent_thoughts(managers_over(repos), "main", 2, ThreadCycle(context_mode="meditation"), None)
    assert shown == ids[-2:]
    assert lines == [
        "[tick 4] thought 4  (emotions calm:2; novelty 4)",
        "[tick 5] thought 5  (emotions calm:3; novelty 5)",
    ]
    db.close()


def test_the_plain_list_shows_only_the_words_and_no_tick_numbers(tmp_path):
    """voice.plain_recent (a small model): no `[tick N]`, no scores; a stagnation record names no tick either."""
    db = Database.open(tmp_path)
    _thoughts(db, 2)
    with db.unit() as repos:
        repos.messages.add_keyed(
            "main:3",
            thread_id="main",
            tick=3,
            kind="stagnation_record",
            content="[output identical to tick 2 not stored again; reflex_lite]",
        )
        lines, _ = recent_thoughts(managers_over(repos), "main", 3, ThreadCycle(), None, plain=True)
    assert lines == [
        "- thought 1",
        "- thought 2",
        "- [output identical to an earlier thought not stored again; reflex_lite]",
    ]
    assert not any("tick" in line for line in lines)
    db.close()


def test_the_standard_window_moves_in_steps_so_each_prompt_extends_the_last(tmp_path):
    """Given the tick, the last K thoughts are shown from a tick that stays for K/2 ticks: K to 3K/2 − 1 thoughts, and
    the next tick's list is this one's with the new thought added — the prompt's opening stays (a prompt cache)."""
    db = Database.open(tmp_path)
    _thoughts(db, 12)
    shown = {}
    for tick in (13, 14, 15):
        with db.unit() as repos:
            shown[tick] = recent_thoughts(managers_over(repos), "main", 4, ThreadCycle(), None, plain=True, tick=tick)[
                0
            ]
            repos.messages.add_keyed(
                f"main:{tick}", thread_id="main", tick=tick, kind="response", content=f"thought {tick}"
            )
    assert shown[13] == [f"- thought {i}" for i in (9, 10, 11, 12)]
    assert shown[14] == shown[13] + ["- thought 13"]  # the window stayed: one more at its end
    assert shown[15] == [f"- thought {i}" for i in (11, 12, 13, 14)]  # then it moved by a step
    with db.unit() as repos:  # without the tick: the last K, as before
        assert recent_thoughts(managers_over(repos), "main", 4, ThreadCycle(), None, plain=True)[0] == [
            f"- thought {i}" for i in (12, 13, 14, 15)
        ]
    db.close()
