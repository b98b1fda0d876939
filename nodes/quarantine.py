"""Poison never persists: a tick that fails on some output is closed as failed, with its reason, and the model's
answer is set aside (stored, never replayed), so the next tick starts clean instead of re-crashing on the same data.

Two ways in: a step raised (graph/agent.py catches it and calls `quarantine_tick`), or the process died inside the
tick again and again before it could finish (s01 counts a tick's starts and gives up after `MAX_TICK_STARTS`).
"""

from __future__ import annotations

from memory import Repos

MAX_TICK_STARTS = 5  # kills at random moments restart a tick once or twice; five deaths in one tick are the tick's


def quarantine_tick(repos: Repos, thread_id: str, tick: int, *, step: str | None, error: str, trace: str = "") -> None:
    repos.ticks.fail(thread_id, tick, step=step, error=error[:2000], trace=trace)
    where = f" in step {step}" if step else ""
    repos.processes.add("tick.failed", f"tick {tick} failed{where}: {error[:600]}. My answer of that tick was set "
                        "aside and will not be run again; this tick starts clean.", status="error", thread_id=thread_id)
