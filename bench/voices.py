"""The default voice, chosen by measurement (JSON): every embedded model of llm/embedded_model.py through
bench/converse.py (reply rate, on topic, same language, tokens/s, calls per tick), each in its own process, then
the coherence of its free thoughts under the other models (bench/coherence.py), in one table.

    python bench/voices.py [--notes 4] [--max-tokens 48] [--voices gemma-3-270m smollm2-135m …] [--out result.json]

Small on purpose (a loaded 2-core machine): a handful of notes per model, short answers. Each model's converse run
is kept in `--out`'s folder as `converse-<voice>.json`, so a run cut short can be scored again with `--reuse`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def converse(voice: str, notes: int, max_tokens: int, folder: Path, reuse: bool) -> dict:
    out = folder / f"converse-{voice}.json"
    if reuse and out.exists():
        return json.loads(out.read_text())
    progress(f"{voice}: bench/converse.py --notes {notes} --max-tokens {max_tokens}…")
    started = time.perf_counter()
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "converse.py"), "--voice", voice, "--notes", str(notes),
                          "--max-tokens", str(max_tokens)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if run.returncode:
        raise SystemExit(f"bench/converse.py failed for {voice} (exit {run.returncode})")
    result = json.loads(run.stdout)
    out.write_text(json.dumps(result, indent=2, ensure_ascii=False))
    progress(f"{voice}: done in {time.perf_counter() - started:.0f}s")
    return result


def main() -> None:
    from bench.coherence import QUOTE, SANE, load_references, score
    from llm.embedded_model import VOICES, assemble_model

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--voices", nargs="+", default=list(VOICES))
    parser.add_argument("--notes", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "voices.json"))
    parser.add_argument("--reuse", action="store_true", help="reuse converse-<voice>.json files already written")
    args = parser.parse_args()
    folder = Path(args.out).parent
    folder.mkdir(parents=True, exist_ok=True)
    runs = {voice: converse(voice, args.notes, args.max_tokens, folder, args.reuse) for voice in args.voices}
    progress("coherence: scoring every model's thoughts under the others…")
    references = load_references(args.voices)
    table = []
    for voice, run in runs.items():
        spec = VOICES[voice]
        coherence = score(run["thoughts"], voice, references)
        notes = max(1, run["notes"])
        table.append({
            "voice": voice, "model": spec.title, "licence": spec.licence,
            "size_mb": round(assemble_model(voice=voice).stat().st_size / 1e6),
            "reply_rate": run["reply_rate"], "on_topic": round(run["on_topic"] / notes, 2),
            "same_language": round(run["same_language"] / notes, 2), "tokens_per_s": run.get("tokens_per_s"),
            "coherence": coherence["coherence"], "salad_score_mean": coherence["salad_score_mean"],
            "prose_share": run["prose_share"], "calls_per_tick": run["calls_per_tick"], "ticks": run["ticks"],
            "wall_s": run["wall_s"], "thoughts": len(run["thoughts"]), "judged_by": coherence["judged_by"],
            "thought_samples": run["thoughts"][:2], "reply_samples": [r["reply"] for r in run["replies"]][:3],
        })
    result = {"notes_per_model": args.notes, "max_tokens": args.max_tokens, "table": table,
              "calibration": {name: r.calibration for name, r in references.items()},
              "quote_salad_score": score([QUOTE], None, references)["salad_score_mean"],
              "sane_salad_score": score([SANE], None, references)["salad_score_mean"]}
    Path(args.out).write_text(json.dumps(result, indent=2, ensure_ascii=False))
    print(json.dumps(result, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
