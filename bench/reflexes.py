"""Reflex benchmark (JSON): what the reflexes cost per tick, and how well anti-stagnation detects loops.

cost: the REPL loop on the embedded model for --ticks ticks in three configurations — reflexes off (no
emotional rating, no LLM comparison, no validators), on with 0 validators, on with 2 validators (two more
llama.cpp instances of the same model flagged as validators) — LLM calls and tokens per tick by purpose.
Target: ≤ 1.5 calls per tick on average with reflexes on and no validators.

detection: the labelled sequences of bench/data/stagnation_set.py (novel, loop, paraphrase) fed output by
output to the same novelty code the tick uses, with the real sentence model: cheap signals only, and cheap
signals plus the embedded model's comparison in the uncertain band. Per label: sequences detected (recall),
flag precision, ticks from the first repeat to the flag, false alarms on novel sequences.
Target: recall ≥ 0.95 on loops, no false alarms on the novel sequences.

    python bench/reflexes.py [--ticks 8] [--skip-cost] [--skip-detection] [--max-tokens 64]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "data"))

from stagnation_set import sequences  # noqa: E402


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---- cost ------------------------------------------------------------------------------------------------

def run_config(name: str, ticks: int, max_tokens: int, validators: int, reflexes: bool) -> dict:
    from graph.agent import build_agent
    from graph.services import open_services, registry_entries
    from persona.settings import load_settings

    with tempfile.TemporaryDirectory(prefix=f"anima-reflex-{name}-") as tmp:
        flags = {"data_dir": tmp, "embedded_context_window": 4096, "sampling": {"max_tokens": max_tokens},
                 "reflexes": {"emotion": reflexes, "compare_with_llm": reflexes}}
        entries = registry_entries(load_settings(**flags))
        main = entries[0]
        for i in range(validators):
            entries.append({**main, "id": f"validator-{i + 1}", "priority": -1 - i, "is_validator": True})
        services = open_services(entries=entries, **flags)
        agent = build_agent("repl", services=services, data_dir=tmp, checkpointer="memory")
        with services.db.unit() as repos:
            repos.notes.add("Good morning, Lumen. What will you think about today?", source="user")
        started = time.perf_counter()
        for i in range(ticks):
            state = agent.tick()
            progress(f"  {name}: tick {i + 1}/{ticks} ({state['llm'].get('completion_tokens', 0)} tokens"
                     f"{', stagnant' if state['novelty'].get('stagnation_flag') else ''})")
        wall = time.perf_counter() - started
        with services.db.unit() as repos:
            calls = repos.llm_calls.recent(10_000)
            ticks_rows = repos.ticks.recent(10_000)
            flags = sum(1 for r in repos.stagnation.recent(10_000) if r.stagnation_flag)
        agent.close()
    by_purpose = Counter(c.purpose for c in calls)
    tokens = sum(c.prompt_tokens + c.completion_tokens for c in calls)
    return {"ticks": len(ticks_rows), "llm_calls_per_tick": round(len(calls) / ticks, 3),
            "tokens_per_tick": round(tokens / ticks, 1),
            "prompt_tokens_per_tick": round(sum(c.prompt_tokens for c in calls) / ticks, 1),
            "calls_by_purpose": dict(by_purpose),
            "tokens_by_purpose": {p: sum(c.prompt_tokens + c.completion_tokens for c in calls if c.purpose == p)
                                  for p in by_purpose},
            "stagnant_ticks": flags, "wall_s_per_tick": round(wall / ticks, 2)}


def cost(ticks: int, max_tokens: int) -> dict:
    result = {}
    for name, validators, reflexes in (("reflexes_off", 0, False), ("reflexes_on_0_validators", 0, True),
                                       ("reflexes_on_2_validators", 2, True)):
        progress(f"cost: {name} ({ticks} ticks on the embedded model)…")
        result[name] = run_config(name, ticks, max_tokens, validators, reflexes)
    result["target_calls_per_tick_on_0_validators"] = 1.5
    result["target_met"] = result["reflexes_on_0_validators"]["llm_calls_per_tick"] <= 1.5
    return result


# ---- detection --------------------------------------------------------------------------------------------

@dataclass
class Row:
    id: int
    tick: int
    content: str


class SentenceMemory:
    def __init__(self):
        from memory.retrieval.embeddings import LocalEmbedder

        self.embedder = LocalEmbedder()

    def embed_texts(self, texts):
        return self.embedder.embed(texts)


def detect(seqs: list[dict], memory, settings, responses: int, llms=None) -> dict:
    from nodes.reflexes.anti_stagnation.verdict import decide
    from nodes.reflexes.anti_stagnation.novelty import measure
    from nodes.reflexes.evaluation import evaluate, parse_comparison

    per_label: dict[str, dict] = {}
    comparisons = 0
    for n, seq in enumerate(seqs, 1):
        flags = []
        history: list[Row] = []
        for t, text in enumerate(seq["outputs"]):
            signals = measure(text, history[-responses:], memory, stagnant_at=settings.stagnation_threshold,
                              novel_below=settings.novel_below)
            if llms is not None and signals["band"] == "uncertain":
                previous = next(r.content for r in history if r.id == signals["similar_to_id"])
                _, answer = evaluate(llms, text, vocabulary=None, previous=previous, prefer=None, tags={})
                signals["comparison"] = parse_comparison(answer.get("comparison"))
                comparisons += 1
            flag, _, _ = decide(signals, settings)
            flags.append(flag)
            history.append(Row(t, t, text))
        start = seq["loop_start"]
        stats = per_label.setdefault(seq["label"], {"sequences": 0, "detected": 0, "true_flags": 0, "false_flags": 0,
                                                    "ticks_to_detection": [], "false_alarm_sequences": 0})
        stats["sequences"] += 1
        positives = [i for i, f in enumerate(flags) if f and start is not None and i >= start]
        negatives = [i for i, f in enumerate(flags) if f and (start is None or i < start)]
        stats["true_flags"] += len(positives)
        stats["false_flags"] += len(negatives)
        stats["false_alarm_sequences"] += bool(negatives)
        if positives:
            stats["detected"] += 1
            stats["ticks_to_detection"].append(positives[0] - start + 1)
        if n % 10 == 0:
            progress(f"  {n}/{len(seqs)} sequences")
    out = {}
    for label, s in per_label.items():
        flagged = s["true_flags"] + s["false_flags"]
        ttd = s.pop("ticks_to_detection")
        out[label] = {**s,
                      "recall": round(s["detected"] / s["sequences"], 3) if label != "novel" else None,
                      "flag_precision": round(s["true_flags"] / flagged, 3) if flagged else None,
                      "ticks_to_detection_mean": round(statistics.mean(ttd), 2) if ttd else None,
                      "ticks_to_detection_max": max(ttd) if ttd else None}
    out["llm_comparisons"] = comparisons
    return out


def detection(with_llm: bool) -> dict:
    from persona.settings import load_settings

    loaded = load_settings()
    settings, responses = loaded.reflexes, loaded.cycle.responses
    seqs = sequences()
    progress(f"detection: {len(seqs)} labelled sequences, cheap signals (n-grams + all-MiniLM-L6-v2)…")
    memory = SentenceMemory()
    result = {"set": dict(Counter(s["label"] for s in seqs)),
              "thresholds": {"stagnant_at": settings.stagnation_threshold, "novel_below": settings.novel_below,
                             "flag_at": settings.stagnation_soft_threshold},
              "cheap": detect(seqs, memory, settings, responses)}
    if with_llm:
        from graph.services import open_services

        with tempfile.TemporaryDirectory(prefix="anima-reflex-detect-") as tmp:
            services = open_services(data_dir=tmp, embedded_context_window=4096)
            progress("detection: cheap signals + the embedded model's comparison in the uncertain band…")
            result["cheap_plus_llm"] = detect(seqs, memory, settings, responses, services.llms)
            services.db.close()
    loops = result["cheap"]["loop"]
    result["target_met"] = loops["recall"] >= 0.95 and result["cheap"]["novel"]["false_alarm_sequences"] == 0
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ticks", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64, help="answer length of the main call")
    parser.add_argument("--skip-cost", action="store_true")
    parser.add_argument("--skip-detection", action="store_true")
    parser.add_argument("--no-llm-detection", action="store_true", help="cheap signals only in the detection part")
    args = parser.parse_args()
    result: dict = {}
    if not args.skip_detection:
        result["detection"] = detection(with_llm=not args.no_llm_detection)
    if not args.skip_cost:
        result["cost"] = cost(args.ticks, args.max_tokens)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
