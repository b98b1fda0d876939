"""How long a human waits for the persona's answer (JSON), on the web door and on Matrix.

`run.py` runs as a user starts it (the loop and its web app in one process) against a scripted OpenAI-compatible
server (tests/integration/scripted_llm_server.py) whose every answer takes `--latency` seconds: a free thought
otherwise, and, to a prompt that shows the persona a note, a thought that answers it with `messages.send` (a model
that answers whoever wrote at once). Notes are posted at random moments — a random pause of up to `--spread`
model calls after the last answer — so they land at every phase of the persona's own work: a thought in flight,
the reflexes' side calls, a stagnation pause, a dream.

  web     `POST /api/notes`, then `GET /api/conversation` until the answer to that note is there
  matrix  the owner writes in a direct room on a real Synapse (tests/integration/synapse_server.py), then reads
          the room until the persona's answer arrives (both through matrix-nio, as a person's client would)

Printed per door: the wait in seconds (median, max, each note's) and in model calls (the wait over `--latency`:
how many model calls' time the human waited); the model calls that started while a human waited, before the answer
was stored, by purpose (from the persona's own `llm_calls` accounting: `think` and `reply` are the thought and the
reply turn; every other purpose is a side call), with the number of waits a side call started in; and the wait
split in two: the persona's part (`persona_calls`: from the note stored to the answer stored, in model calls) and
the door's (`door_s`: the rest — the page's poll, or Matrix's way in and out); and the seconds each tick step took
while a human waited, on average per wait (`steps_s_per_wait`, from the loop's journal). The goal (DESIGN.md §9): median
≤
1.2 model calls, max ≤ 2. The machine's load average is printed: other work on it lengthens every part.

At the defaults on a server model the persona thinks only when something is new (`cycle.thinking`, docs/cost.md):
between notes it is quiet and a note wakes it; `--thinking continuous` has it think all the time, so the notes land
during its own thoughts.

    python bench/answer_wait.py [--notes 12] [--latency 3] [--spread 3] [--doors web,matrix] [--seed 7]
                                [--thinking continuous]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.integration.browser import http_json, web_loop  # noqa: E402
from tests.integration.servers import ROOT, scripted_llm_server  # noqa: E402

ANSWER = "I read what you wrote (note {note})."
THOUGHT = "I keep thinking about the tides and the gulls over the harbour, thought {n}."
MATRIX_PASSWORD = "anima-bench-pw"


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def persona_dir(base: Path, homeserver: str | None, user_id: str | None) -> Path:
    """The shipped persona, with a Matrix channel when the Matrix door is measured."""
    target = base / "persona"
    shutil.copytree(ROOT / "persona" / "default", target)
    if homeserver:
        with open(target / "config.yaml", "a") as config:
            config.write(
                f"\nchannels:\n  poll_wait_s: 5\n  entries:\n    - kind: matrix\n      name: matrix\n"
                f"      options: {{homeserver: '{homeserver}', user_id: '{user_id}'}}\n"
                f"      secret_env: {{password: MATRIX_BENCH_PASSWORD}}\n"
            )
    return target


def owner_on_matrix(data_dir: Path, matrix_id: str) -> None:
    from managers import ManagerDeps, Managers
    from memory import Database
    from persona.settings import stored_settings

    db = Database.open(data_dir)
    try:
        with db.unit() as repos:
            people = Managers(repos, ManagerDeps(settings=stored_settings(db))).people
            people.add_identity(people.owner().id, "matrix", matrix_id)
    finally:
        db.close()


def _stamp(value: datetime) -> float:
    return value.replace(tzinfo=value.tzinfo or UTC).timestamp()


def inside_the_persona(data_dir: Path, waits: list[tuple[float, float, str]], latency: float) -> dict[str, object]:
    """Where each wait went, from the persona's own records: the model calls that started while a human waited
    (by purpose; `think` and `reply` answer, anything else is a side call), and the persona's part of the wait — from
    the note stored to the answer stored, in model calls — apart from the door's (in and out)."""
    from sqlalchemy import select

    from memory import Database
    from memory.models import LiveEvent, LLMCall, Note

    db = Database.open(data_dir)
    try:
        with db.unit() as repos:
            calls = [
                (c.purpose, _stamp(c.created_at) - c.latency_ms / 1000)
                for c in repos.session.scalars(select(LLMCall)).all()
            ]
            notes = list(repos.session.scalars(select(Note).order_by(Note.id)).all())
            steps = [
                (_stamp(e.at), e.node or e.kind)
                for e in repos.session.scalars(
                    select(LiveEvent).where(LiveEvent.kind.in_(("step", "tick"))).order_by(LiveEvent.id)
                ).all()
            ]
    finally:
        db.close()
    asked = {n.text: n for n in notes if n.source != "llm"}
    answers = {n.text: n for n in notes if n.source == "llm"}
    by_purpose: dict[str, int] = {}
    with_side, persona_part, door_part = 0, [], []
    spent: dict[str, list[float]] = {}
    for start, end, question in waits:
        note = asked.get(question)
        answer = answers.get(ANSWER.replace("{note}", str(note.id))) if note is not None else None
        stored = _stamp(answer.created_at) if answer is not None else end
        started = [purpose for purpose, at in calls if start <= at < stored]
        for purpose in started:
            by_purpose[purpose] = by_purpose.get(purpose, 0) + 1
        with_side += any(p not in ("think", "reply") for p in started)
        if note is not None and answer is not None:
            persona_part.append((stored - _stamp(note.created_at)) / latency)
            door_part.append((end - start) - (stored - _stamp(note.created_at)))
            for (before, _), (at, node) in zip(steps, steps[1:]):  # a step's time: since the step before it ended
                if _stamp(note.created_at) < at <= stored + 0.5:
                    spent.setdefault(node, []).append(at - max(before, _stamp(note.created_at)))
    return {
        "started_while_waiting": dict(sorted(by_purpose.items())),
        "waits_with_a_side_call": with_side,
        "persona_calls": {"median": round(statistics.median(persona_part), 2), "max": round(max(persona_part), 2)}
        if persona_part
        else None,
        "door_s": {"median": round(statistics.median(door_part), 2), "max": round(max(door_part), 2)}
        if door_part
        else None,
        "steps_s_per_wait": {node: round(sum(times) / len(waits), 2) for node, times in sorted(spent.items())},
    }


def summary(seconds: list[float], latency: float) -> dict[str, object]:
    calls = [s / latency for s in seconds]
    return {
        "median_s": round(statistics.median(seconds), 2),
        "max_s": round(max(seconds), 2),
        "median_calls": round(statistics.median(calls), 2),
        "max_calls": round(max(calls), 2),
        "waits_s": [round(s, 2) for s in seconds],
    }


def web_door(loop, args, rng: random.Random) -> list[tuple[float, float, str]]:
    waits = []
    for i in range(args.notes):
        time.sleep(rng.uniform(0, args.spread * args.latency))
        started = time.time()
        question = f"Question {i}: what do you see now?"
        status, note = http_json(loop.url + "/api/notes", "POST", {"text": question})
        assert status == 201, (status, note)
        wanted = ANSWER.replace("{note}", str(note["id"]))

        def answered(after: int = note["id"]) -> bool:
            items = http_json(loop.url + f"/api/conversation?after_id={after}&limit=100")[1]["items"]
            return any(item["who"] == "persona" and item["text"] == wanted for item in items)  # noqa: B023 - called within this iteration

        loop.wait_for(answered, args.guard, f"the answer to web note {note['id']}", every=0.05)
        waits.append((started, time.time(), question))
        progress(f"web note {i + 1}/{args.notes}: {waits[-1][1] - started:.1f} s")
    return waits


def matrix_door(loop, args, rng: random.Random, server, anima: str, owner: str) -> list[tuple[float, float, str]]:
    from tests.integration.matrix_human import MatrixHuman

    async def converse() -> list[tuple[float, float, str]]:
        waits = []
        async with MatrixHuman(server.url, owner, "ada-pw") as ada:
            room = await ada.room_with(anima)
            await ada.wait_member(room, anima, timeout_s=args.guard)
            for i in range(args.notes):
                await asyncio.sleep(rng.uniform(0, args.spread * args.latency))
                before = len(await ada.messages_from(room, anima))
                started = time.time()
                question = f"Question {i}: what do you see now?"
                await ada.say(room, question)
                deadline = time.monotonic() + args.guard
                while len(await ada.messages_from(room, anima)) <= before:
                    if time.monotonic() > deadline or loop.proc.poll() is not None:
                        raise AssertionError(f"no answer on Matrix within {args.guard:.0f} s\n{loop.tail()}")
                    await asyncio.sleep(0.05)
                waits.append((started, time.time(), question))
                progress(f"matrix message {i + 1}/{args.notes}: {waits[-1][1] - started:.1f} s")
        return waits

    return asyncio.run(converse())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notes", type=int, default=12, help="notes per door")
    parser.add_argument("--latency", type=float, default=3.0, help="seconds every model call takes")
    parser.add_argument("--spread", type=float, default=3.0, help="the pause before a note: up to this many calls")
    parser.add_argument("--doors", default="web,matrix")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--thinking",
        default=None,
        help="cycle.thinking for the run (default: the persona's: auto, "
        "eventful on this server — the persona is quiet between notes; continuous: notes land during "
        "its own thoughts)",
    )
    parser.add_argument("--guard", type=float, default=300.0, help="a hang guard per note (seconds), not a timing")
    args = parser.parse_args()
    doors = [d.strip() for d in args.doors.split(",") if d.strip()]
    rng = random.Random(args.seed)
    out: dict[str, object] = {
        "bench": "answer_wait",
        "latency_s": args.latency,
        "notes": args.notes,
        "thinking": args.thinking or "the persona's (auto)",
        "spread_calls": args.spread,
        "seed": args.seed,
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    with tempfile.TemporaryDirectory(prefix="anima-answer-wait-") as tmp, scripted_llm_server() as llm:
        base = Path(tmp)
        llm.script(
            default={"do": "stream", "delay_s": args.latency, "text": THOUGHT, "answer_notes": ANSWER}, record=False
        )
        for door in doors:
            data = base / door / "data"
            data.mkdir(parents=True)
            env = {"ANIMA_CYCLE__THINKING": args.thinking} if args.thinking else {}
            if door == "matrix":
                from tests.integration.synapse_server import synapse_server

                synapse_cm = synapse_server(base / "synapse")
                server = synapse_cm.__enter__()
                anima, owner = server.register("anima", MATRIX_PASSWORD), server.register("ada", "ada-pw")
                owner_on_matrix(data, owner)
                env["MATRIX_BENCH_PASSWORD"] = MATRIX_PASSWORD
                persona = persona_dir(base / door, server.url, anima)
            else:
                synapse_cm = None
                persona = persona_dir(base / door, None, None)
            try:
                with web_loop(data, llm_url=llm.url, pace_s=None, persona_dir=persona, env=env, thinking=None) as loop:
                    first = 2 if args.thinking == "continuous" else 1  # a quiet persona thinks once, then waits
                    loop.wait_for(
                        lambda: loop.status().get("ticks", 0) >= first,  # noqa: B023 - called within this iteration
                        args.guard,
                        "the first ticks before the first note",
                    )
                    progress(f"{door}: the persona runs; posting {args.notes} notes")
                    waits = (
                        web_door(loop, args, rng)
                        if door == "web"
                        else matrix_door(loop, args, rng, server, anima, owner)
                    )
                result = summary([end - start for start, end, _ in waits], args.latency)
                result.update(inside_the_persona(data, waits, args.latency))
                out[door] = result
            finally:
                if synapse_cm is not None:
                    synapse_cm.__exit__(None, None, None)
    out["load"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
