"""Conversation benchmark (JSON): does the persona answer its human on the embedded model, and do its thoughts read
as prose?

Twelve varied notes (seven in English, three in Russian, two in Japanese; `--notes N`: the first N of SPREAD, which
reaches Russian and Japanese early) are sent one at a time; after each the
persona ticks until an executed `messages.send` appears or two ticks pass; then `--free-ticks` ticks with no note
(free thoughts only). Reported:

  reply_rate          notes answered within 2 ticks / notes sent (goal ≥ 0.9)
  ticks_to_reply      per note: 1, 2, or null (no reply in 2 ticks)
  on_topic            per note: the reply names what was asked — at least one of the note's keywords (its stems,
                      listed in NOTES below, matched as word prefixes in the lower-cased reply). A rough content-word
                      overlap check, not a judgement of quality
  same_language       per note: the reply is in the note's script (persona/prose.py script_of)
  prose_share         free thoughts that pass the prose gate (persona/prose.py is_prose) / free thoughts (goal ≥ 0.95)
  calls_per_tick      LLM calls / ticks, overall and on ticks with and without a waiting note
  tokens_per_s        generated tokens / generation seconds of the think and reply calls (llm_calls rows)
  thoughts            every tick's thought (bench/voices.py scores their coherence under the other models);
                      free_thoughts: those of the ticks with no note
  model, wall_s       the model that answered; the run's wall time; load: the 1-minute load average at start and end

    python bench/converse.py [--max-tokens 64] [--notes 4] [--free-ticks 0] [--context-window 4096] [--voice
    qwen2.5-coder-0.5b] [--model-path some.gguf]
                             [--llm-url http://127.0.0.1:1234/v1 --model m]

`--voice` runs another embedded model of llm/embedded_model.py (assembled from its PyPI packages); `--model-path`
any GGUF; `--llm-url` a real OpenAI-compatible server (the embedded model stays as fallback). Progress goes to
stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from graph.agent import build_agent
from graph.services import open_services, registry_entries
from persona.prose import is_prose, script_of

# (note, keyword stems: the reply is on topic if it contains a word starting with one of them)
NOTES = [
    ("Hello! What is your name, and what are you thinking about?", ["name", "lumen", "think", "thought"]),
    ("What is your favourite colour?", ["colo", "blue", "red", "green", "yellow", "white", "black", "purple"]),
    ("I feel tired today. Any advice?", ["tired", "rest", "sleep", "advice", "break", "relax", "walk"]),
    ("Can you tell me something about the sea?", ["sea", "ocean", "wave", "water", "tide", "fish"]),
    ("Do you like music? Which kind?", ["music", "song", "like", "jazz", "rock", "classic", "piano"]),
    ("Привет! Как тебя зовут и о чём ты думаешь?", ["зов", "имя", "lumen", "люмен", "дума", "мысл"]),
    ("What did you learn today?", ["learn", "today", "read", "found", "know"]),
    ("Расскажи, что ты любишь больше всего?", ["люб", "нрав", "больш"]),
    ("こんにちは！あなたの名前は何ですか？", ["名前", "lumen", "ルーメン", "私"]),
    ("Should I go for a walk or read a book tonight?", ["walk", "read", "book", "tonight"]),
    ("Что ты знаешь о море?", ["мор", "волн", "вод", "океан", "рыб"]),
    ("海について何か教えてください。", ["海", "波", "水", "魚"]),
]

SPREAD = (0, 5, 8, 3, 10, 11, 7, 1, 9, 2, 4, 6)  # NOTES in an order that reaches Russian and Japanese early


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def on_topic(reply: str, stems: list[str]) -> bool:
    words = reply.lower().replace("、", " ").replace("。", " ")
    tokens = [w.strip(".,;:!?'()！？") for w in words.split()]
    return any(t.startswith(s) for t in tokens for s in stems) or any(s in words for s in stems if not s.isascii())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--max-ticks", type=int, default=2)
    parser.add_argument("--model-path", help="another GGUF as the embedded model")
    parser.add_argument("--voice", help="an embedded model of llm/embedded_model.py (default: the setting's)")
    parser.add_argument("--llm-url")
    parser.add_argument("--model")
    parser.add_argument("--notes", type=int, default=len(NOTES))
    parser.add_argument("--context-window", type=int, default=4096, help="the embedded model's window")
    parser.add_argument("--free-ticks", type=int, default=0, help="ticks with no note after the notes")
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="anima-converse-bench-"))
    flags = {
        "data_dir": str(data),
        "embedded_context_window": args.context_window,
        "sampling": {"max_tokens": args.max_tokens},
        "timezone": "UTC",
        "llm_url": args.llm_url,
        "model": args.model,
        "embedded_model": args.voice,
    }
    flags = {k: v for k, v in flags.items() if v is not None}
    if args.model_path:
        from persona.settings import load_settings

        entries = registry_entries(load_settings(**flags))
        for entry in entries:
            if entry["id"] == "embedded":
                entry["model"] = Path(args.model_path).name
                entry["config"]["model_path"] = args.model_path
        services = open_services(entries=entries, **flags)
    else:
        from llm.embedded_model import assemble_model

        progress("assembling the embedded model (once)…")
        assemble_model(voice=args.voice)
        services = open_services(**flags)
    agent = build_agent("repl", services=services, checkpointer="memory")
    started, load_at_start = time.perf_counter(), os.getloadavg()[0]
    results, note_ticks, quiet_ticks = [], [], []
    thoughts: list[str] = []
    free_thoughts: list[str] = []
    for index, (text, stems) in enumerate([NOTES[i] for i in SPREAD][: args.notes]):
        with agent.services.db.unit() as repos:
            note_id = repos.notes.add(text, source="user").id
        reply, ticks = None, None
        for attempt in range(1, args.max_ticks + 1):
            t0 = time.perf_counter()
            state = agent.tick()
            (note_ticks if note_id in state.get("incoming_note_ids", []) else quiet_ticks).append(state["tick"])
            thought = (state.get("thought") or state.get("response") or "").strip()
            if thought:
                thoughts.append(thought)
            sent = [c for c in state.get("executed", []) if c["type"] == "messages.send" and c["status"] == "executed"]
            progress(
                f"note {index + 1}/{args.notes} tick {state['tick']} ({time.perf_counter() - t0:.0f}s): "
                f"thought {thought[:70]!r} · sent {len(sent)}"
            )
            if sent:
                with agent.services.db.unit() as repos:
                    out = max(repos.notes.list(source="llm"), key=lambda n: n.id, default=None)
                reply, ticks = (out.text if out else ""), attempt
                break
        results.append(
            {
                "note": text,
                "ticks_to_reply": ticks,
                "reply": reply,
                "on_topic": bool(reply) and on_topic(reply, stems),
                "same_language": bool(reply) and script_of(reply) == script_of(text),
            }
        )
        progress(f"  → {reply!r}")
    for index in range(args.free_ticks):
        t0 = time.perf_counter()
        state = agent.tick()
        quiet_ticks.append(state["tick"])
        thought = (state.get("thought") or state.get("response") or "").strip()
        if thought:
            thoughts.append(thought)
            free_thoughts.append(thought)
        progress(f"free tick {index + 1}/{args.free_ticks} ({time.perf_counter() - t0:.0f}s): {thought[:90]!r}")
    wall = time.perf_counter() - started
    with agent.services.db.unit() as repos:
        ticks = {t.tick: t.llm_calls for t in repos.ticks.recent(1000, thread_id="main")}
        model = next((c["model"] for c in repos.llm_calls.by_model() if c["provider"] != "fake"), None)
        spoken = [c for c in repos.llm_calls.recent(10_000) if c.purpose in ("think", "reply") and c.ok]
    agent.close()
    answered = [r for r in results if r["ticks_to_reply"]]
    prose = sum(is_prose(t) for t in thoughts)
    seconds = sum(c.latency_ms for c in spoken) / 1000

    def per_tick(which: list[int]) -> float | None:
        return round(sum(ticks.get(t, 0) for t in which) / len(which), 2) if which else None

    print(
        json.dumps(
            {
                "model": model,
                "notes": len(results),
                "replied_within_2_ticks": len(answered),
                "reply_rate": round(len(answered) / max(1, len(results)), 2),
                "ticks_to_reply": [r["ticks_to_reply"] for r in results],
                "on_topic": sum(r["on_topic"] for r in results),
                "same_language": sum(r["same_language"] for r in results),
                "prose_share": round(prose / max(1, len(thoughts)), 2),
                "thought_count": len(thoughts),
                "calls_per_tick": per_tick(list(ticks)),
                "calls_per_tick_with_note": per_tick(note_ticks),
                "calls_per_tick_without_note": per_tick(quiet_ticks),
                "ticks": len(ticks),
                "wall_s": round(wall, 1),
                "tokens_per_s": round(sum(c.completion_tokens for c in spoken) / seconds, 2) if seconds else None,
                "max_tokens": args.max_tokens,
                "context_window": args.context_window,
                "load": [round(load_at_start, 2), round(os.getloadavg()[0], 2)],
                "free_ticks": args.free_ticks,
                "replies": results,
                "thoughts": thoughts,
                "free_thoughts": free_thoughts,
            },
            indent=2,
            ensure_ascii=False,
        )
    )


if __name__ == "__main__":
    main()
