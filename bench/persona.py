"""Persona benchmark (JSON): an hour-equivalent of simulated time on the embedded model.

A fake clock starts at 23:20 UTC and advances `--minutes-per-tick` after every tick. The persona starts with
three open questions (curiosity ≈ 0.70) and one goal; the human writes once (at tick 5, a sad message). The
run crosses midnight, so it dreams (quiet hours). Reported: LLM calls and tokens by purpose (what drives and
dreaming add to thinking), the drives over time, the reach-out offers and whether the persona wrote, the
dream, and the wall time. Then the run stops and resumes, as after a restart. Last, `--dream-trials` more
dreams on the same material (as `run.py dream` would) measure how often the model's dream passes the prose
gate and is applied: the figure that decides whether a small model's dreams reach the prompt.

    python bench/persona.py [--ticks 30] [--minutes-per-tick 2] [--max-tokens 48] [--dream-trials 6]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from graph.agent import build_agent  # noqa: E402
from graph.loop import Stopper, run_loop  # noqa: E402
from llm.embedded_model import assemble_model  # noqa: E402


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Clock:
    def __init__(self, start: datetime):
        self.now = start

    def __call__(self) -> datetime:
        return self.now


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ticks", type=int, default=30)
    parser.add_argument("--minutes-per-tick", type=float, default=2.0)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--dream-trials", type=int, default=6)
    args = parser.parse_args()
    progress("assembling the embedded model (once)…")
    assemble_model()
    clock = Clock(datetime(2026, 11, 20, 23, 20, tzinfo=UTC))
    data = Path(tempfile.mkdtemp(prefix="anima-persona-bench-"))

    def open_agent():
        return build_agent(
            "repl",
            data_dir=str(data),
            embedded_context_window=4096,
            checkpointer="sqlite",
            clock=clock,
            sampling={"max_tokens": args.max_tokens},
            timezone="UTC",
        )

    agent = open_agent()
    with agent.services.db.unit() as repos:
        for topic, priority in (
            ("Why do tides rise twice a day?", 0.9),
            ("What lives in the tide pools?", 0.8),
            ("Where does the sea foam come from?", 0.7),
        ):
            repos.questions.add(topic, priority=priority, created_at=clock())
        repos.goals.add("Understand the sea my human loves", priority=2)
    ticks_seen = {"n": 0}
    started = time.perf_counter()

    def on_stream(mode, data_):
        if mode == "updates" and "execute_commands" in data_:
            ticks_seen["n"] += 1
            clock.now += timedelta(minutes=args.minutes_per_tick)
            if ticks_seen["n"] == 4:  # the human writes during the run
                with agent.services.db.unit() as repos:
                    repos.notes.add(
                        "I'm so tired and sad tonight, the day went badly.", source="user", created_at=clock()
                    )
            progress(
                f"tick {ticks_seen['n']}/{args.ticks} · simulated {clock():%H:%M} · "
                f"{time.perf_counter() - started:.0f}s"
            )
        elif mode == "custom" and data_.get("event") == "dream":
            progress(f"  dream: {data_.get('phase')} (level {data_.get('level')})")

    result = run_loop(agent, ticks=args.ticks, stopper=Stopper(), on_stream=on_stream, idle_poll_s=0)
    wall = time.perf_counter() - started
    with agent.services.db.unit() as repos:
        ticks = sorted(repos.ticks.recent(args.ticks + 5, thread_id="main"), key=lambda t: t.tick)
        calls = defaultdict(lambda: {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "ms": 0.0})
        for c in repos.llm_calls.recent(10_000):
            slot = calls[c.purpose]
            slot["calls"] += 1
            slot["prompt_tokens"] += c.prompt_tokens or 0
            slot["completion_tokens"] += c.completion_tokens or 0
            slot["ms"] += c.latency_ms or 0.0
        sent = {
            (c.thread_id, c.tick)
            for c in repos.commands.recent(1000)
            if c.type == "messages.send" and c.status == "executed"
        }
        offers = [
            {"tick": t.tick, **t.summary["drives"]["reach_out"], "sent": ("main", t.tick) in sent}
            for t in ticks
            if (t.summary.get("drives") or {}).get("reach_out")
        ]
        trajectory = [
            {
                "tick": t.tick,
                **{k: v for k, v in (t.summary["drives"]["levels"]).items()},
                "dominant": t.summary["drives"]["dominant"],
            }
            for t in ticks
            if t.summary.get("drives") and (t.tick % 5 == 1 or t.tick == ticks[-1].tick)
        ]
        insight = repos.insights.latest()
        dream = {
            "count": len(repos.insights.recent(10)),
            "level": insight.level if insight else None,
            "insight": insight.insight if insight else None,
            "strategy": insight.strategy if insight else None,
            "questions_open": len(repos.questions.open()),
            "goals": [g.title for g in repos.goals.list()],
        }
        user_emotions = [(e.emotion, e.strength) for e in repos.emotion_log.recent("user")]
    agent.close()
    progress("stopping and resuming, as after a restart…")
    resumed = open_agent()
    again = run_loop(resumed, ticks=2, stopper=Stopper(), idle_poll_s=0)
    with resumed.services.db.unit() as repos:
        sessions = [
            {"id": s.id, "status": s.status, "ticks": [s.first_tick + 1, s.last_tick]} for s in repos.sessions.list()
        ]
        strategy_in_prompt = bool(
            insight and insight.strategy and insight.strategy in (again.last_state.get("prompt") or "")
        )
    trials = dream_trials(resumed, args.dream_trials)
    resumed.close()
    think = calls.get("think", {"calls": 0})
    extra = {p: v["calls"] for p, v in calls.items() if p in ("drives", "dream", "episode", "chronicle")}
    print(
        json.dumps(
            {
                "simulated_minutes": args.ticks * args.minutes_per_tick,
                "ticks": result.ticks_run,
                "wall_s": round(wall, 1),
                "wall_s_per_tick": round(wall / max(1, result.ticks_run), 2),
                "llm_by_purpose": {p: {**v, "ms": round(v["ms"])} for p, v in sorted(calls.items())},
                "calls_per_tick": round(sum(v["calls"] for v in calls.values()) / max(1, result.ticks_run), 2),
                "think_calls": think["calls"],
                "autonomy_calls": extra,
                "drives": trajectory,
                "reach_out_offers": offers,
                "user_emotions": user_emotions,
                "dreams_in_run": len(result.dreams),
                "dream_outcomes": [
                    {"status": d.get("status"), "dropped": (d.get("dropped") or [])[:2]} for d in result.dreams
                ],
                "dream": dream,
                "resumed": {
                    "ticks": again.ticks_run,
                    "tick_after_resume": again.last_state.get("tick"),
                    "strategy_in_prompt": strategy_in_prompt,
                    "sessions": sessions,
                },
                "dream_trials": trials,
            },
            indent=2,
            ensure_ascii=False,
        )
    )


def dream_trials(agent, n: int) -> dict:
    """n level-1 dreams in a row on the run's material: how many are applied, how long each takes."""
    from graph.agent import Agent
    from graph.playbook import load_playbook, resolve_playbook_path

    outcomes = []
    for i in range(n):
        progress(f"dream trial {i + 1}/{n}...")
        dreamer = Agent(
            load_playbook(resolve_playbook_path("dream")),
            agent.services,
            agent.checkpointer,
            thread_id=f"dream-trial-{i}",
        )
        started = time.perf_counter()
        dreamer.run(inputs={"level": 1, "reason": "trial"})
        result = dreamer.outputs().get("dream") or {}
        applied = result.get("status") == "applied"
        outcomes.append(
            {
                "status": result.get("status"),
                "s": round(time.perf_counter() - started, 1),
                "strategy": (result.get("strategy") or "")[:160] if applied else None,
                "rejected": None if applied else (result.get("dropped") or [None])[0],
            }
        )
    applied = sum(o["status"] == "applied" for o in outcomes)
    return {
        "n": n,
        "applied": applied,
        "pass_rate": round(applied / n, 2) if n else None,
        "mean_s": round(sum(o["s"] for o in outcomes) / n, 1) if n else None,
        "outcomes": outcomes,
    }


if __name__ == "__main__":
    main()
