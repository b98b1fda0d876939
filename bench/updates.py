"""Knowledge-update detection accuracy (memory/updates.py) on a set built from LoCoMo-format conversations.

The set, per conversation and speaker:
- updates (positives): a speaker's statement of a fact and a later change of it, written from templates whose
  values are names that conversation really uses ("I live in Sweden." → "I moved to Boston, I live there now.");
- the same templates said by the other speaker (negatives: another author's statement updates nothing);
- real pairs of one speaker's turns from different sessions that share at least two content words (negatives:
  LoCoMo's talk repeats its subjects — painting, camping, the kids — without changing a fact; a few may really be
  changes, so the false-positive rate is an upper bound).
Prints JSON: accuracy, precision, recall, false-positive rate on the real pairs, counts, and a few errors — for the
whole set (`all`, in sample: the rules were tuned on it) and apart for two splits: `in_sample` (the tuning templates
on the even-numbered conversations) and `held_out` (templates of other facts and other wording, written after the
rules were frozen and never tuned on, `HELD_OUT_TEMPLATES`, on the odd-numbered conversations, with those
conversations' own real pairs).

    python bench/updates.py --data ../shared/data/locomo/locomo_dev.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.locomo import sessions  # noqa: E402
from memory.retrieval.entities import extract  # noqa: E402
from memory.updates import Statement, supersedes  # noqa: E402

TEMPLATES = [
    ("I live in {a} these days.", "I moved to {b} last month, so I live there now."),
    ("My favourite place is {a}.", "My favourite place is {b} now."),
    ("I work at {a} as a volunteer.", "I quit {a}, I work at {b} instead."),
    ("My best friend is {a}.", "My best friend is {b} - we got really close."),
    ("I'm planning a trip to {a} in the summer.", "I changed my plan: the summer trip is to {b}."),
    ("Our team is called {a}.", "Our team has a new name, it's called {b}."),
]


# Written after memory/updates.py's rules were frozen; the rules were never changed to fit them.
HELD_OUT_TEMPLATES = [
    ("I drive a car my uncle {a} gave me.", "I sold the car from {a}; I drive one I bought from {b} now."),
    ("My dog is named {a}.", "We renamed the dog, he is called {b} now."),
    ("I'm studying at {a} college.", "I switched schools, I study at {b} now."),
    ("My phone plan is with {a}.", "I changed my phone plan to {b}."),
    ("My partner is {a}.", "{a} and I split up; my partner is {b} now."),
    ("My home is near {a} park.", "We moved, and our home is near {b} park now."),
]


def build(
    samples: list[dict], seed: int = 7, templates: list[tuple[str, str]] | None = None
) -> list[tuple[Statement, Statement, bool, str]]:
    rng = random.Random(seed)
    templates = TEMPLATES if templates is None else templates
    cases: list[tuple[Statement, Statement, bool, str]] = []
    for sample in samples:
        conversation = sample["conversation"]
        turns = [(s, t) for s, _, ts in sessions(conversation) for t in ts]
        counts: dict[str, int] = {}
        for _, t in turns:
            for e in extract(t.get("text", "")):
                if e.startswith("n:") and " " not in e and len(e) > 4:
                    counts[e[2:].title()] = counts.get(e[2:].title(), 0) + 1
        names = sorted(n for n, c in counts.items() if c >= 3)  # names the talk uses, not a sentence's first word
        speakers = [conversation.get("speaker_a", "A"), conversation.get("speaker_b", "B")]
        for old, new in templates:
            for speaker in speakers:
                a, b = rng.sample(names, 2)
                other = speakers[1] if speaker == speakers[0] else speakers[0]
                first = Statement(1, speaker, old.format(a=a))
                cases.append((Statement(2, speaker, new.format(a=a, b=b)), first, True, "template"))
                cases.append((Statement(2, other, new.format(a=a, b=b)), first, False, "other speaker"))
        by_speaker: dict[str, list[tuple[int, str]]] = {}
        for session, turn in turns:
            by_speaker.setdefault(turn.get("speaker", ""), []).append((session, turn.get("text", "")))
        for speaker, said in by_speaker.items():
            pairs = []
            for i, (s1, t1) in enumerate(said):
                w1 = {e for e in extract(t1) if e.startswith("w:")}
                for s2, t2 in said[i + 1 :]:
                    if s2 != s1 and len(w1 & {e for e in extract(t2) if e.startswith("w:")}) >= 2:
                        pairs.append((t1, t2))
            for t1, t2 in rng.sample(pairs, min(60, len(pairs))):
                cases.append((Statement(2, speaker, t2), Statement(1, speaker, t1), False, "real pair"))
    return cases


def score(cases: list[tuple[Statement, Statement, bool, str]]) -> dict:
    tp = fp = tn = fn = 0
    real_fp = real = 0
    errors = []
    for newer, older, expected, kind in cases:
        got = supersedes(newer, older) is not None
        tp += got and expected
        fp += got and not expected
        tn += (not got) and (not expected)
        fn += (not got) and expected
        if kind == "real pair":
            real += 1
            real_fp += got
        if got != expected and len(errors) < 8:
            errors.append({"kind": kind, "older": older.text[:120], "newer": newer.text[:120], "expected": expected})
    total = len(cases)
    return {
        "cases": total,
        "positives": tp + fn,
        "negatives": tn + fp,
        "real_pairs": real,
        "accuracy": round((tp + tn) / total, 4) if total else None,
        "precision": round(tp / (tp + fp), 4) if tp + fp else None,
        "recall": round(tp / (tp + fn), 4) if tp + fn else None,
        "false_positive_rate_real_pairs": round(real_fp / real, 4) if real else None,
        "errors": errors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"
    )
    args = parser.parse_args()
    samples = json.loads(args.data.read_text())
    whole = score(build(samples))
    in_sample = score(build(samples[0::2]))
    held_out = score(build(samples[1::2], seed=11, templates=HELD_OUT_TEMPLATES))
    print(
        json.dumps(
            {
                "benchmark": "knowledge-update-detection",
                "data": str(args.data),
                **whole,
                "in_sample": {k: v for k, v in in_sample.items() if k != "errors"},
                "held_out": held_out,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
