"""What a persona costs while nothing happens (JSON): no human writes, for a fixed wall time.

`run.py` runs as a user starts it (the loop and its web app, the shipped persona, its defaults) against a scripted
OpenAI-compatible server (tests/integration/scripted_llm_server.py) whose every answer takes `--latency` seconds and
whose usage is that of a server with a prefix cache (its `cached_tokens`). Two variants:

  repeat   the same free thought every time (the stagnation reflex may slow the persona down)
  varied   a thought of new words every time, so nothing but the persona's own policy slows it down
  A variant named `…-continuous` (e.g. `varied-continuous`) runs with `cycle.thinking: continuous`: a thought every
  tick, to measure the prefix share of consecutive main prompts when nothing new arrives between them (at the
  defaults a persona alone sends almost no main prompts to compare).

Printed per variant, for the whole run and for its steady state (after `--warmup` seconds): model calls (by
purpose, from the persona's own `llm_calls`), per idle hour; prompt tokens sent (the server's count) and those a
prefix cache could not serve — the characters beyond the opening each request shares with the one before it, / 4
— and the server's own cached-token figure; the prefix share of consecutive main prompts (the free thought's:
median, min); ticks and skipped (quiet) ticks. Goals (issue "the price of a mind", server model, defaults, steady
state): ≤ 6 calls and ≤ 20,000 non-cacheable prompt tokens per idle hour, prefix share ≥ 0.95.

`--embedded` adds the embedded model's side: two consecutive main prompts of the run rendered for the embedded
voice, the second evaluated on the same `Llama` right after the first (its prefix reused) and on a fresh context
(evaluated from its first token), a few tokens generated each time; the seconds of each.

    python bench/idle_cost.py [--seconds 900] [--warmup 600] [--latency 2] [--variants repeat,varied] [--embedded]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.integration.browser import web_loop  # noqa: E402
from tests.integration.scripted_llm_server import prompt_text, shared_opening  # noqa: E402
from tests.integration.servers import ROOT, scripted_llm_server  # noqa: E402

THOUGHT = "I keep thinking about the tides and the gulls over the harbour."
HOUR = 3600.0


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _stamp(value: datetime) -> float:
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()


def persona_records(data_dir: Path, since: float) -> dict[str, object]:
    """What the persona recorded: its model calls (purpose, start), its ticks, its quiet ticks."""
    from sqlalchemy import func, select

    from memory import Database
    from memory.models import LLMCall, ProcessLog, Tick

    db = Database.open(data_dir)
    try:
        with db.reading() as repos:
            calls = [
                (c.purpose, _stamp(c.created_at), c.prompt_tokens) for c in repos.session.scalars(select(LLMCall)).all()
            ]
            ticks = repos.session.scalar(select(func.count(Tick.id))) or 0
            quiet = [
                _stamp(p.created_at)
                for p in repos.session.scalars(select(ProcessLog).where(ProcessLog.name == "cycle.quiet")).all()
            ]
    finally:
        db.close()
    return {"calls": calls, "ticks": int(ticks), "quiet": quiet, "since": since}


def prefix_shares(prompts: list[str]) -> list[float]:
    return [shared_opening(a, b) / max(1, len(b)) for a, b in zip(prompts, prompts[1:])]


def is_main(request: dict) -> bool:
    """The free thought's request: not a JSON answer, and its system message is the tick's (the command guide)."""
    messages = request.get("messages") or []
    return (
        not request.get("json")
        and bool(messages)
        and messages[0].get("role") == "system"
        and "Available commands:" in str(messages[0].get("content"))
    )


def measure(requests: list[dict], records: dict, started: float, ended: float, warmup: float) -> dict[str, object]:
    steady_from = started + warmup
    out: dict[str, object] = {}
    for name, lo in (("whole", started), ("steady", steady_from)):
        span = max(1e-9, ended - lo)
        reqs = [r for r in requests if r["at"] >= lo]
        prompts_all = [prompt_text(r) for r in requests]
        new_chars = 0
        for i, r in enumerate(requests):
            if r["at"] < lo:
                continue
            previous = prompts_all[i - 1] if i else ""
            new_chars += len(prompts_all[i]) - shared_opening(previous, prompts_all[i])
        sent = sum(int((r.get("usage") or {}).get("prompt_tokens") or len(prompt_text(r)) // 4) for r in reqs)
        cached = sum(
            int(((r.get("usage") or {}).get("prompt_tokens_details") or {}).get("cached_tokens") or 0) for r in reqs
        )
        purposes: dict[str, int] = {}
        for purpose, at, _ in records["calls"]:
            if at >= lo:
                purposes[purpose] = purposes.get(purpose, 0) + 1
        mains = [prompt_text(r) for r in reqs if is_main(r)]
        shares = prefix_shares(mains)
        quiet = [q for q in records["quiet"] if q >= lo]
        out[name] = {
            "seconds": round(span, 1),
            "model_calls": len(reqs),
            "model_calls_by_purpose": dict(sorted(purposes.items())),
            "model_calls_per_idle_hour": round(len(reqs) * HOUR / span, 1),
            "prompt_tokens_sent": sent,
            "prompt_tokens_cached_by_server": cached,
            "prompt_tokens_not_cacheable": new_chars // 4,
            "prompt_tokens_per_idle_hour": round(sent * HOUR / span),
            "not_cacheable_tokens_per_idle_hour": round(new_chars / 4 * HOUR / span),
            "main_prompts": len(mains),
            "prefix_share": {"median": round(statistics.median(shares), 3), "min": round(min(shares), 3)}
            if shares
            else None,
            "skipped_ticks": len(quiet),
        }
    out["ticks"] = records["ticks"]
    return out


def run_variant(llm, base: Path, variant: str, args) -> tuple[dict, list[dict]]:
    step = {"do": "stream", "delay_s": args.latency, "text": THOUGHT}
    if variant.startswith("varied"):
        step["vary"] = True
    env = {"ANIMA_CYCLE__THINKING": "continuous"} if variant.endswith("-continuous") else {}
    llm.script(default=step)
    data = base / variant / "data"
    data.mkdir(parents=True)
    persona = base / variant / "persona"
    shutil.copytree(ROOT / "persona" / "default", persona)
    with web_loop(data, llm_url=llm.url, pace_s=None, persona_dir=persona, env=env, thinking=None) as loop:
        started = time.time()
        progress(f"{variant}: the persona runs alone for {args.seconds:g}s")
        while time.time() - started < args.seconds:
            if loop.proc.poll() is not None:
                raise SystemExit(f"run.py exited:\n{loop.tail()}")
            time.sleep(2)
        ended = time.time()
        requests = [r for r in llm.requests() if r["at"] <= ended]
    records = persona_records(data, started)
    result = measure(requests, records, started, ended, args.warmup)
    result["cache_prompt_sent"] = sum(1 for r in requests if r.get("cache_prompt"))
    return result, requests


def embedded_reuse(requests: list[dict], tokens: int) -> dict[str, object]:
    """Two consecutive main prompts on the embedded voice: the second after the first on the same context, and on
    a fresh one."""
    from llm.base import Sampling
    from llm.embedded_model import voice_of
    from llm.providers.llamacpp import EmbeddedLlamaCpp

    mains = [r["messages"] for r in requests if is_main(r) and r.get("messages")]
    if len(mains) < 2:
        return {"error": "fewer than two main prompts recorded"}
    first, second = mains[-2], mains[-1]
    sampling = Sampling(max_tokens=tokens, temperature=0.0)
    model = EmbeddedLlamaCpp(voice=voice_of(None).name)
    model.chat(first, Sampling(max_tokens=1))  # loads the model; its first prompt is in the context now
    started = time.perf_counter()
    model.chat(second, sampling)
    reused = time.perf_counter() - started
    fresh = EmbeddedLlamaCpp(voice=voice_of(None).name)
    fresh.count_tokens("load")
    started = time.perf_counter()
    fresh.chat(second, sampling)
    cold = time.perf_counter() - started
    from llm.base import render_chat_as_text

    prompt = model._templated(second) or render_chat_as_text(second)
    return {
        "voice": voice_of(None).name,
        "prompt_tokens": model.count_tokens(prompt),
        "generated_tokens": tokens,
        "prefix_share_chars": round(
            shared_opening(prompt_text({"messages": first}), prompt_text({"messages": second}))
            / max(1, len(prompt_text({"messages": second}))),
            3,
        ),
        "call_s_with_prefix_reuse": round(reused, 2),
        "call_s_evaluated_from_start": round(cold, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=900.0, help="wall time each variant runs alone")
    parser.add_argument("--warmup", type=float, default=600.0, help="the steady state starts after this")
    parser.add_argument("--latency", type=float, default=2.0, help="seconds every model call takes")
    parser.add_argument("--variants", default="repeat,varied")
    parser.add_argument("--embedded", action="store_true", help="measure the embedded model's prefix reuse")
    parser.add_argument("--embedded-tokens", type=int, default=16)
    args = parser.parse_args()
    out: dict[str, object] = {
        "bench": "idle_cost",
        "seconds": args.seconds,
        "warmup_s": args.warmup,
        "latency_s": args.latency,
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    last: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="anima-idle-cost-") as tmp, scripted_llm_server() as llm:
        for variant in [v.strip() for v in args.variants.split(",") if v.strip()]:
            out[variant], last = run_variant(llm, Path(tmp), variant, args)
    if args.embedded:
        progress("embedded: two consecutive main prompts, with and without prefix reuse")
        out["embedded"] = embedded_reuse(last, args.embedded_tokens)
    out["load"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
