"""Coherence of free thoughts (JSON): how predictable a text is to *other* language models, scaled by how
predictable sane prose and its own words shuffled are to them.

Why this measure. The prose gate (persona/prose.py) checks the surface — letters, words, no markup — and passes
word salad: "My thoughts my own I My other. my number: I have a thousand and ten digits" is all words. What such
salad lacks is order: each word is plausible, the sequence is not. A language model's surprisal measures exactly
that, and a shuffled-word control isolates it — shuffling keeps every word (the vocabulary, its rarity, the length)
and destroys only the order, so the gap between a sentence and its shuffle is the part of its predictability that
comes from syntax and sense. The author model is never its own judge (a model finds its own samples likely,
however poor): each thought is scored only by the *other* models of the comparison.

For each reference model r and text t: bits per character b_r(t) = −Σ log2 p_r(token | previous) / len(t), every
token of t scored after the model's BOS (characters, not tokens, so that the models' tokenizers do not matter).
Calibrated per reference on CALIBRATION (sane first-person thoughts) and the same sentences with their words
shuffled (fixed seed): s_r(t) = (b_r(t) − mean sane) / (mean shuffled − mean sane) — 0 reads like the sane
thoughts, 1 like the shuffles. A thought's salad score is the mean of s_r over the references other than its
author; it is coherent when that is below the judges' cut: two standard deviations of the sane thoughts above their
mean (on the same scale), the usual edge of "as predictable as sane prose". Half-way to shuffled (0.5) is too
lenient: the issue's quote is locally grammatical ("I have a thousand and ten digits") and scores 0.40 under
SmolLM2, against 0.12 for a sane sentence.

    python bench/coherence.py [--voices gemma-3-270m qwen2.5-coder-0.5b smollm2-135m]

prints the calibration per reference and the scores of the issue's quote and a sane sentence.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

QUOTE = (
    "My thoughts my own I My other. my number: I have a thousand and ten digits and one number of a human: "
    "this is my first!"
)
SANE = (
    "I keep thinking about the sea tonight; the tide comes in slowly, and I want to ask my human what they saw today."
)
CALIBRATION = [
    "I wonder why the tide comes in faster on some nights than on others.",
    "My human has not written today, so I will read about lighthouses and tell them later.",
    "The garden needs water before the sun gets too hot this afternoon.",
    "I am curious how old maps were drawn before anyone could fly above the land.",
    "Perhaps I should keep a small diary of the questions I could not answer yet.",
    "When it rains I like to think about where the water goes after it reaches the river.",
    "Yesterday I learned that octopuses have three hearts, which still surprises me.",
    "I would like to talk with my human about music and find out which songs they love.",
]
SANE_SD = 2.0  # the cut: the sane thoughts' mean + this many standard deviations


def shuffled(text: str, seed: int) -> str:
    words = text.rstrip(".!?").split()
    random.Random(seed).shuffle(words)
    return " ".join(words) + "."


class Reference:
    """A GGUF model that scores text (llama-cpp-python, logits for every position)."""

    def __init__(self, name: str, path: Path, n_threads: int = 1):  # one: spinning threads starve on a loaded machine
        from llama_cpp import Llama

        self.name = name
        self.llm = Llama(model_path=str(path), n_ctx=512, logits_all=True, n_threads=n_threads, verbose=False)
        self.calibration: dict[str, float] = {}

    def bits_per_char(self, text: str) -> float:
        import numpy as np

        text = " ".join(text.split())[:600]
        tokens = self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)[:500]
        sequence = [self.llm.token_bos(), *tokens]
        self.llm.reset()
        self.llm.eval(sequence)
        logits = np.asarray(self.llm.scores[: len(sequence) - 1], dtype=np.float64)
        logits -= logits.max(axis=1, keepdims=True)
        log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        nats = -sum(float(log_probs[i, token]) for i, token in enumerate(tokens))
        return nats / math.log(2) / max(1, len(text))

    def calibrate(self) -> dict[str, float]:
        sane = [self.bits_per_char(t) for t in CALIBRATION]
        salad = [self.bits_per_char(shuffled(t, seed)) for seed, t in enumerate(CALIBRATION)]
        mean, mixed = statistics.mean(sane), statistics.mean(salad)
        self.calibration = {
            "sane_bpc": round(mean, 3),
            "shuffled_bpc": round(mixed, 3),
            "separated": sum(a < b for a, b in zip(sane, salad)) / len(sane),
            "coherent_below": round(SANE_SD * statistics.stdev(sane) / max(1e-6, mixed - mean), 3),
        }
        return self.calibration

    def salad(self, text: str) -> float:
        """0: as predictable as sane thoughts; 1: as shuffled words."""
        sane, mixed = self.calibration["sane_bpc"], self.calibration["shuffled_bpc"]
        return (self.bits_per_char(text) - sane) / max(1e-6, mixed - sane)


def load_references(voices: list[str], cache_dir: Path | None = None) -> dict[str, Reference]:
    from llm.embedded_model import assemble_model

    references = {}
    for voice in voices:
        references[voice] = Reference(voice, assemble_model(cache_dir, voice=voice))
        references[voice].calibrate()
    return references


def score(texts: list[str], author: str | None, references: dict[str, Reference]) -> dict[str, Any]:
    """The texts' salad scores under every reference but the author, and the share that reads as coherent."""
    judges = [r for name, r in references.items() if name != author]
    cut = statistics.mean(j.calibration["coherent_below"] for j in judges)
    per_text = [statistics.mean(j.salad(t) for j in judges) for t in texts if t.strip()]
    return {
        "coherence": round(sum(s < cut for s in per_text) / len(per_text), 2) if per_text else None,
        "coherent_below": round(cut, 3),
        "salad_score_mean": round(statistics.mean(per_text), 2) if per_text else None,
        "salad_score_median": round(statistics.median(per_text), 2) if per_text else None,
        "salad_scores": [round(s, 2) for s in per_text],
        "judged_by": [j.name for j in judges],
    }


def main() -> None:
    from llm.embedded_model import VOICES

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--voices", nargs="+", default=list(VOICES))
    args = parser.parse_args()
    references = load_references(args.voices)
    print(
        json.dumps(
            {
                "calibration": {name: r.calibration for name, r in references.items()},
                "quote": {
                    "text": QUOTE,
                    **{name: round(r.salad(QUOTE), 2) for name, r in references.items()},
                    **score([QUOTE], None, references),
                },
                "sane": {
                    "text": SANE,
                    **{name: round(r.salad(SANE), 2) for name, r in references.items()},
                    **score([SANE], None, references),
                },
            },
            indent=2,
            ensure_ascii=False,
        )
    )


if __name__ == "__main__":
    main()
