"""What goes wrong in a small model's free thoughts, counted (JSON): the faults coherence (bench/coherence.py) cannot
see, since a copied line reads as predictable text.

For each `converse-<voice>.json` of bench/converse.py (or bench/voices.py --mode ticks), over its `thoughts`:

  tick_marker     thoughts holding a tick marker the prompt once showed — `(tick`, `[tick`, `tick 5`, or `tick`
                  alone on a line
  marker_loop     thoughts holding two or more of them ("I am king (tick my life (tick …")
  echo            thoughts that copy 5+ words in a row from the prompt's fixed text: the shipped persona's files
                  (persona/default/*.md) and every fixed prompt text (i18n/locales/prompts.pot, English), before and
                  after this change's wording (OLD_PROMPT_TEXTS)
  invented_turn   thoughts holding a turn of a human they made up: a line opening with `User:`, `Human:`, `My
                  human:` or the human's name and a colon, or "My human writes/says/said/asks/wrote:" anywhere

    python bench/thought_faults.py /tmp/before/converse-gemma-3-270m.json /tmp/after/converse-gemma-3-270m.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# a marker, not the word: the persona's files say "each tick" and "per tick"
MARKER = re.compile(r"\(tick|\[tick|\btick\s*\d|^\s*tick\s*$", re.IGNORECASE | re.MULTILINE)
OLD_PROMPT_TEXTS = ["## {name}'s thought (tick {tick})"]  # the header before it lost its tick number
WORDS = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
ECHO_WORDS = 5


def turn_pattern(human: str) -> re.Pattern[str]:
    names = "|".join(re.escape(n) for n in dict.fromkeys(["User", "Human", "My human", human]) if n)
    return re.compile(rf"(?:^|\n)\s*(?:{names})\s*:|My human (?:writes|says|said|asks|wrote)\s*:", re.IGNORECASE)


def prompt_texts() -> list[str]:
    texts = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "persona" / "default").glob("*.md"))]
    pot = (ROOT / "i18n" / "locales" / "prompts.pot").read_text(encoding="utf-8")
    msgids = re.findall(r'msgid ((?:"(?:[^"\\]|\\.)*"\s*)+)', pot)
    texts += ["".join(json.loads(part) for part in re.findall(r'"(?:[^"\\]|\\.)*"', m)) for m in msgids]
    return texts + OLD_PROMPT_TEXTS


def grams(text: str, n: int = ECHO_WORDS) -> set[tuple[str, ...]]:
    words = [w.lower() for w in WORDS.findall(text)]
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def faults(thoughts: list[str], human: str = "User") -> dict:
    prompt = set().union(*(grams(t) for t in prompt_texts()))
    turn = turn_pattern(human)
    rows = []
    for thought in thoughts:
        markers = len(MARKER.findall(thought))
        copied = sorted(" ".join(g) for g in grams(thought) & prompt)
        rows.append({"tick_markers": markers, "echo": copied[:3], "invented_turn": bool(turn.search(thought))})
    return {
        "thoughts": len(thoughts),
        "tick_marker": sum(r["tick_markers"] > 0 for r in rows),
        "marker_loop": sum(r["tick_markers"] >= 2 for r in rows),
        "echo": sum(bool(r["echo"]) for r in rows),
        "invented_turn": sum(r["invented_turn"] for r in rows),
        "per_thought": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="converse-<voice>.json files")
    parser.add_argument("--human", default="User", help="the human's name (settings.user_name)")
    args = parser.parse_args()
    out = {}
    for path in args.runs:
        run = json.loads(Path(path).read_text(encoding="utf-8"))
        out[path] = {**faults(run.get("free_thoughts") or run["thoughts"], args.human), "load": run.get("load")}
    print(json.dumps(out, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
