"""Poison never persists: a tick that fails on some output is closed as failed, with its reason, and the model's
answer is set aside (stored, never replayed), so the next tick starts clean instead of re-crashing on the same data.

Two ways in: a step raised (graph/agent.py catches it and calls `quarantine_tick`), or the process died inside the
tick again and again before it could finish (s01 counts a tick's starts and gives up after `MAX_TICK_STARTS`).
"""

from __future__ import annotations

from managers import Managers

MAX_TICK_STARTS = 5  # kills at random moments restart a tick once or twice; five deaths in one tick are the tick's


def quarantine_tick(
    house: Managers, thread_id: str, tick: int, *, step: str | None, error: str, trace: str = ""
) -> None:
    house.loop.quarantine(thread_id, tick, step=step, error=error, trace=trace)
