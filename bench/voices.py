"""The default voice, chosen by measurement (JSON): every embedded model of llm/embedded_model.py, then the
coherence of its free thoughts under the other models (bench/coherence.py), in one table.

Two ways to run each model:
- `--mode probe` (default): the product's two turns called directly on the model through the product's provider
  (llm/providers/llamacpp.py, chat template and letter masks as in a tick) — the reply turn
  (persona/voice.py's few-shot prompt, held to the note's script, parsed by `parse_reply`) for `--notes` notes of
  bench/converse.py's NOTES (English, Russian, Japanese, English… — `SPREAD`), and free thoughts from a short chat
  prompt (the persona's identity and "what are you
  thinking about?"). No tick around them: the tick's ~3,000-token prompt costs minutes per call on a loaded
  2-core machine.
- `--mode ticks`: the whole tick on each model, one model at a time: the reply turn for `--notes` notes as in the
  probe (the tick's reply call, cheap), then bench/converse.py in a subprocess — `--tick-notes` notes through whole
  ticks (reply rate within 2 ticks, calls per tick with a note) and `--thoughts` ticks with no note (free thoughts
  through the real graph: drives, think, reflexes) — at `--context-window`. Kept as `converse-<voice>.json` and
  `replies-<voice>.json` beside `--out` (`--reuse` scores them again). Coherence is scored on every tick's thought.

Coherence (bench/coherence.py) judges each model's thoughts by every other voice (`--judges` narrows them);
`--no-score` only runs the models, for a later `--reuse` run that scores them all.

    python bench/voices.py [--notes 5] [--thoughts 3] [--max-tokens 48] [--voices gemma-3-270m …] [--mode probe]
    python bench/voices.py --mode ticks --notes 12 --tick-notes 3 --thoughts 15 --context-window 2048
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def converse(voice: str, notes: int, free_ticks: int, max_tokens: int, window: int, folder: Path, reuse: bool) -> dict:
    out = folder / f"converse-{voice}.json"
    if reuse and out.exists():
        return json.loads(out.read_text())
    progress(f"{voice}: bench/converse.py --notes {notes} --free-ticks {free_ticks} --max-tokens {max_tokens}…")
    started = time.perf_counter()
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "converse.py"),
            "--voice",
            voice,
            "--notes",
            str(notes),
            "--free-ticks",
            str(free_ticks),
            "--max-tokens",
            str(max_tokens),
            "--context-window",
            str(window),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    if run.returncode:
        raise SystemExit(f"bench/converse.py failed for {voice} (exit {run.returncode})")
    result = json.loads(run.stdout)
    out.write_text(json.dumps(result, indent=2, ensure_ascii=False))
    progress(f"{voice}: done in {time.perf_counter() - started:.0f}s")
    return result


THOUGHT_ASK = "What are you thinking about right now? Answer with one or two sentences of your own thought."


def probe(voice: str, notes: int, thoughts: int, max_tokens: int) -> dict:
    """The reply turn and free thoughts on one model, called as a tick calls them (module doc)."""
    from bench.converse import NOTES, SPREAD, on_topic
    from llm import Sampling
    from llm.embedded_model import assemble_model
    from llm.providers.llamacpp import EmbeddedLlamaCpp
    from nodes.steps.s05_call_llm import reply_stops
    from persona import load_persona
    from persona.prose import PROSE_LETTERS, is_prose, script_of
    from persona.settings import VoiceSettings
    from persona.voice import nature_of, parse_reply, reply_letters, reply_prompt

    persona = load_persona(None)
    name, identity = persona.display_name, persona.file("IDENTITY.md")
    settings = VoiceSettings()
    model = EmbeddedLlamaCpp(voice, model_path=str(assemble_model(voice=voice)), context_window=2048, voice=voice)
    generated, seconds = 0, 0.0
    replies = []
    for text, stems in [NOTES[i] for i in SPREAD[:notes]]:
        reply = None
        for temperature in (settings.reply_temperature, min(1.2, settings.reply_temperature + 0.4)):
            gen = model.complete(
                reply_prompt(name, identity, [text]),
                Sampling(
                    temperature=temperature,
                    top_p=0.9,
                    letters=reply_letters(text),
                    max_tokens=min(max_tokens, settings.reply_max_tokens),
                ),
                stop=reply_stops(),
            )
            generated, seconds = generated + gen.completion_tokens, seconds + gen.latency_ms / 1000
            if reply := parse_reply(gen.text):
                break
        progress(f"{voice}: {text[:40]!r} → {reply!r}")
        replies.append(
            {
                "note": text,
                "reply": reply,
                "on_topic": bool(reply) and on_topic(reply, stems),
                "same_language": bool(reply) and script_of(reply) == script_of(text),
            }
        )
    said = []
    system = f"You are {name}, {nature_of(identity)}. You think to yourself in plain sentences."
    for seed in range(thoughts):
        gen = model.chat(
            [{"role": "system", "content": system}, {"role": "user", "content": THOUGHT_ASK}],
            Sampling(temperature=0.8, top_p=0.9, letters=PROSE_LETTERS, max_tokens=max_tokens),
        )
        generated, seconds = generated + gen.completion_tokens, seconds + gen.latency_ms / 1000
        said.append(" ".join(gen.text.split()))
        progress(f"{voice}: thought {seed + 1}: {said[-1][:90]!r}")
    answered = [r for r in replies if r["reply"]]
    return {
        "notes": len(replies),
        "reply_rate": round(len(answered) / max(1, len(replies)), 2),
        "on_topic": sum(r["on_topic"] for r in replies),
        "same_language": sum(r["same_language"] for r in replies),
        "prose_share": round(sum(is_prose(t) for t in said) / max(1, len(said)), 2),
        "tokens_per_s": round(generated / seconds, 2) if seconds else None,
        "thoughts": said,
        "replies": replies,
        "calls_per_tick": None,
        "ticks": 0,
        "wall_s": round(seconds, 1),
    }


# Whether the installed packages carry a licence one can rely on (checked in their dist-info and the GGUF's
# general.license): the decision below only ever picks a voice listed True.
CLEAR_LICENCE = {
    "gemma-3-270m": True,  # Gemma Terms of Use: the GGUF says general.license=gemma, the package's README names them
    "smollm2-135m": True,  # Apache-2.0: METADATA License and classifier, a LICENSE file, GGUF general.license
    "qwen2.5-coder-0.5b": False,  # upstream Apache-2.0, but the parts' METADATA, files and GGUF declare no licence
}


def noise(a: float, n_a: int, b: float, n_b: int) -> float:
    """The 95% half-width of the difference of two shares measured in independent runs (normal approximation, each
    share kept off 0 and 1 by half a count so that a perfect score still has noise)."""

    def var(p: float, n: int) -> float:
        p = min(max(p, 0.5 / n), 1 - 0.5 / n)
        return p * (1 - p) / n

    return 1.96 * math.sqrt(var(a, max(1, n_a)) + var(b, max(1, n_b)))


def decide(table: list[dict], default: str) -> dict:
    """Switch the default only to a voice with a clear licence that beats it on coherence *and* on topic by more than
    the noise between runs; otherwise keep it, with the margins that fell short."""
    base = next((row for row in table if row["voice"] == default), None)
    if base is None:
        return {"keep": default, "why": "the default was not measured"}
    verdicts = {}
    for row in table:
        if row["voice"] == default:
            continue
        margins = {}
        for field, count in (("coherence", "thoughts"), ("on_topic", "notes")):
            if row[field] is None or base[field] is None:
                margins[field] = None
                continue
            margins[field] = {
                "margin": round(row[field] - base[field], 2),
                "noise": round(noise(row[field], row[count], base[field], base[count]), 2),
            }
        beats = all(m and m["margin"] > m["noise"] for m in margins.values())
        verdicts[row["voice"]] = {
            **margins,
            "clear_licence": CLEAR_LICENCE.get(row["voice"], False),
            "beats_default": beats,
        }
    winners = [v for v, d in verdicts.items() if d["beats_default"] and d["clear_licence"]]
    return {"keep" if not winners else "switch_to": winners[0] if winners else default, "against": verdicts}


def main() -> None:
    from bench.coherence import QUOTE, SANE, load_references, score
    from llm.embedded_model import DEFAULT_VOICE, VOICES, assemble_model

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--voices", nargs="+", default=list(VOICES))
    parser.add_argument("--notes", type=int, default=4)
    parser.add_argument("--thoughts", type=int, default=3)
    parser.add_argument("--mode", choices=("probe", "ticks"), default="probe")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--tick-notes", type=int, default=3, help="--mode ticks: notes sent through whole ticks")
    parser.add_argument("--context-window", type=int, default=4096, help="--mode ticks: the embedded model's window")
    parser.add_argument("--no-score", action="store_true", help="run the models only (score later with --reuse)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "voices.json"))
    parser.add_argument("--reuse", action="store_true", help="reuse converse-<voice>.json files already written")
    parser.add_argument("--judges", nargs="+", help="the models that score coherence (default: every voice compared)")
    args = parser.parse_args()
    folder = Path(args.out).parent
    folder.mkdir(parents=True, exist_ok=True)
    runs = {}
    for voice in args.voices:
        kept = folder / f"{args.mode}-{voice}.json"
        if args.mode == "ticks":
            replies = folder / f"replies-{voice}.json"
            if not (args.reuse and replies.exists()):
                replies.write_text(
                    json.dumps(probe(voice, args.notes, 0, args.max_tokens), indent=2, ensure_ascii=False)
                )
            runs[voice] = {
                **converse(
                    voice, args.tick_notes, args.thoughts, args.max_tokens, args.context_window, folder, args.reuse
                ),
                "reply_turn": json.loads(replies.read_text()),
            }
        elif args.reuse and kept.exists():
            runs[voice] = json.loads(kept.read_text())
        else:
            started = time.perf_counter()
            runs[voice] = probe(voice, args.notes, args.thoughts, args.max_tokens)
            kept.write_text(json.dumps(runs[voice], indent=2, ensure_ascii=False))
            progress(f"{voice}: probed in {time.perf_counter() - started:.0f}s")
    if args.no_score:
        return
    progress("coherence: scoring every model's thoughts under the others…")
    references = load_references(args.judges or list(VOICES))
    table = []
    for voice, run in runs.items():
        spec = VOICES[voice]
        coherence = score(run["thoughts"], voice, references)
        turn = run.get("reply_turn", run)  # ticks mode: the reply turn's notes; the whole ticks' own below
        notes = max(1, turn["notes"])
        ticked = (
            {
                "tick_notes": run["notes"],
                "tick_reply_rate": run["reply_rate"],
                "calls_per_tick_with_note": run.get("calls_per_tick_with_note"),
                "calls_per_tick_without_note": run.get("calls_per_tick_without_note"),
                "free_thoughts": len(run.get("free_thoughts", [])),
                "context_window": run.get("context_window"),
            }
            if "reply_turn" in run
            else {}
        )
        table.append(
            {
                "voice": voice,
                "model": spec.title,
                "licence": spec.licence,
                "size_mb": round(assemble_model(voice=voice).stat().st_size / 1e6),
                "notes": turn["notes"],
                "reply_rate": turn["reply_rate"],
                "on_topic": round(turn["on_topic"] / notes, 2),
                "same_language": round(turn["same_language"] / notes, 2),
                "tokens_per_s": run.get("tokens_per_s"),
                "coherence": coherence["coherence"],
                "salad_score_mean": coherence["salad_score_mean"],
                "salad_score_median": coherence["salad_score_median"],
                "coherent_below": coherence["coherent_below"],
                "load": run.get("load"),
                "prose_share": run["prose_share"],
                "calls_per_tick": run["calls_per_tick"],
                "ticks": run["ticks"],
                "wall_s": run["wall_s"],
                "thoughts": len(run["thoughts"]),
                "judged_by": coherence["judged_by"],
                "salad_scores": coherence["salad_scores"],
                **ticked,
                "thought_samples": run["thoughts"][:2],
                "reply_samples": [r["reply"] for r in turn["replies"]][:3],
            }
        )
    result = {
        "mode": args.mode,
        "notes_per_model": args.notes,
        "max_tokens": args.max_tokens,
        "table": table,
        "decision": decide(table, DEFAULT_VOICE),
        "calibration": {name: r.calibration for name, r in references.items()},
        "quote_salad_score": score([QUOTE], None, references)["salad_score_mean"],
        "sane_salad_score": score([SANE], None, references)["salad_score_mean"],
    }
    Path(args.out).write_text(json.dumps(result, indent=2, ensure_ascii=False))
    print(json.dumps(result, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
