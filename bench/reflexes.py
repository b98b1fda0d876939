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

    python bench/reflexes.py [--ticks 8] [--skip-cost] [--skip-detection] [--max-tokens 64] [--only CONFIG]
    python bench/reflexes.py --replay thoughts.json [--ticks 12]

replay: the calls per tick of the reflexes on, with recorded thoughts of the real model (a JSON list of texts, e.g.
bench/data/gemma_thoughts.json) replayed in order as the model's answers through whole ticks — the real sentence
model, SQLite and Chroma, the reply turn on as on the embedded model, a human note at the start as in the cost
runs. What the reflexes decide to ask depends only on those texts, so it counts their calls in seconds where the
embedded model needs minutes per tick on a loaded machine; the JSON answers are a fixed rating.

Each stage (detection, cost/<configuration>) that raises, exits, or leaves stdout/stderr redirected stops the
bench: `bench/reflexes.py: stage <name> failed: <reason>` on stderr, exit 1 (130 on Ctrl-C), and the results so
far on stdout marked `"incomplete": true`.
"""

from __future__ import annotations

import argparse
import json
import os
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


class StageFailed(Exception):
    """A stage ended without its result (fewer ticks than asked, its output silenced…)."""


class Streams:
    """The bench's own copies of stdout and stderr, taken at start: its progress, messages and JSON still reach
    the caller if a library points fds 1/2 elsewhere, and `hijacked()` says when one did."""

    def __init__(self):
        self.identity = {fd: self._id(fd) for fd in (1, 2)}
        self.saved = {fd: os.dup(fd) for fd in (1, 2)}
        self.python = {1: sys.stdout, 2: sys.stderr}
        self.out = open(os.dup(1), "w", encoding="utf-8", closefd=True)
        self.err = open(os.dup(2), "w", encoding="utf-8", closefd=True)

    @staticmethod
    def _id(fd: int):
        try:
            st = os.fstat(fd)
        except OSError:
            return None
        return st.st_dev, st.st_ino, st.st_rdev

    @staticmethod
    def _where(fd: int) -> str:
        try:
            return os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return "closed" if Streams._id(fd) is None else "elsewhere"

    def hijacked(self) -> str | None:
        """What changed about fds 1/2 or sys.stdout/sys.stderr since start; put back as it was."""
        changed = [f"fd {fd} now points to {self._where(fd)}" for fd in (1, 2) if self._id(fd) != self.identity[fd]]
        changed += [
            f"sys.{name} was replaced by {getattr(cur, 'name', cur)!r}"
            for name, fd in (("stdout", 1), ("stderr", 2))
            if (cur := getattr(sys, name)) is not self.python[fd]
        ]
        for fd in (1, 2):
            os.dup2(self.saved[fd], fd)
        sys.stdout, sys.stderr = self.python[1], self.python[2]
        return "; ".join(changed) or None

    def close(self) -> None:
        for stream in (self.out, self.err):
            stream.close()
        for fd in self.saved.values():
            os.close(fd)


streams: Streams | None = None


def progress(msg: str) -> None:
    print(msg, file=streams.err if streams else sys.stderr, flush=True)


# ---- cost ------------------------------------------------------------------------------------------------


def run_config(name: str, ticks: int, max_tokens: int, validators: int, reflexes: bool) -> dict:
    from graph.agent import build_agent
    from graph.services import open_services, registry_entries
    from persona.settings import load_settings

    with tempfile.TemporaryDirectory(prefix=f"anima-reflex-{name}-") as tmp:
        flags = {
            "data_dir": tmp,
            "embedded_context_window": 4096,
            "sampling": {"max_tokens": max_tokens},
            "reflexes": {
                "emotion": reflexes,
                "compare_with_llm": reflexes,
                **({"emotion_every": EMOTION_EVERY[0]} if EMOTION_EVERY else {}),
            },
        }
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
            progress(
                f"  {name}: tick {i + 1}/{ticks} ({state['llm'].get('completion_tokens', 0)} tokens"
                f"{', stagnant' if state['novelty'].get('stagnation_flag') else ''})"
            )
        wall = time.perf_counter() - started
        with services.db.unit() as repos:
            calls = repos.llm_calls.recent(10_000)
            ticks_rows = repos.ticks.recent(10_000)
            flags = sum(1 for r in repos.stagnation.recent(10_000) if r.stagnation_flag)
        agent.close()
    if len(ticks_rows) < ticks:
        raise StageFailed(f"asked for {ticks} ticks, the database recorded {len(ticks_rows)}")
    by_purpose = Counter(c.purpose for c in calls)
    tokens = sum(c.prompt_tokens + c.completion_tokens for c in calls)
    return {
        "ticks": len(ticks_rows),
        "llm_calls_per_tick": round(len(calls) / ticks, 3),
        "tokens_per_tick": round(tokens / ticks, 1),
        "prompt_tokens_per_tick": round(sum(c.prompt_tokens for c in calls) / ticks, 1),
        "calls_by_purpose": dict(by_purpose),
        "tokens_by_purpose": {
            p: sum(c.prompt_tokens + c.completion_tokens for c in calls if c.purpose == p) for p in by_purpose
        },
        "stagnant_ticks": flags,
        "wall_s_per_tick": round(wall / ticks, 2),
    }


def replay(path: str, ticks: int) -> dict:
    from graph.agent import build_agent
    from graph.services import open_services
    from tests.fakes.llm import FakeLLM

    thoughts = json.loads(Path(path).read_text())
    said = iter(thoughts * (1 + ticks // max(1, len(thoughts))))

    def answer(prompt: str) -> str:  # the reply turn's few-shot prompt, else the next recorded thought
        return (
            "I am glad you wrote, I will think about it."
            if prompt.rstrip().endswith(":") and "Human:" in prompt
            else next(said)
        )

    fake = FakeLLM("embedded", responses=answer)
    with tempfile.TemporaryDirectory(prefix="anima-reflex-replay-") as tmp:
        services = open_services(
            data_dir=tmp,
            embedded=False,
            providers={"embedded": fake},
            entries=[{"id": "embedded", "provider": "fake", "priority": 100}],
            voice={"reply_turn": "always"},
        )
        agent = build_agent("repl", services=services, data_dir=tmp, checkpointer="memory")
        with services.db.unit() as repos:
            repos.notes.add("Good morning, Lumen. What will you think about today?", source="user")
        for _i in range(ticks):
            agent.tick()
        with services.db.unit() as repos:
            calls = repos.llm_calls.recent(10_000)
            sources = [
                (m.meta or {}).get("emotion_source") for m in repos.messages.recent("main", 1000, kinds=("response",))
            ]
        agent.close()
    return {
        "ticks": ticks,
        "thoughts": len(thoughts),
        "llm_calls_per_tick": round(len(calls) / ticks, 3),
        "calls_by_purpose": dict(Counter(c.purpose for c in calls)),
        "emotion_sources": dict(Counter(sources)),
    }


EMOTION_EVERY: list[int] = []  # --emotion-every: the reflexes.emotion_every the cost runs use (default: the persona's)

COST_CONFIGS = (
    ("reflexes_off", 0, False),
    ("reflexes_on_0_validators", 0, True),
    ("reflexes_on_2_validators", 2, True),
)


def cost_stages(ticks: int, max_tokens: int, result: dict) -> list:
    """(stage name, run) per configuration; each run fills `result["cost"]`."""
    out = result.setdefault("cost", {})

    def config(name: str, validators: int, reflexes: bool):
        def run() -> None:
            progress(f"cost: {name} ({ticks} ticks on the embedded model)…")
            out[name] = run_config(name, ticks, max_tokens, validators, reflexes)
            if name == "reflexes_on_0_validators":
                out["target_calls_per_tick_on_0_validators"] = 1.5
                out["target_met"] = out[name]["llm_calls_per_tick"] <= 1.5

        return f"cost/{name}", run

    return [config(*c) for c in COST_CONFIGS]


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
    from nodes.reflexes.anti_stagnation.novelty import measure
    from nodes.reflexes.anti_stagnation.verdict import decide
    from nodes.reflexes.evaluation import evaluate, parse_comparison

    per_label: dict[str, dict] = {}
    comparisons = 0
    for n, seq in enumerate(seqs, 1):
        flags = []
        history: list[Row] = []
        for t, text in enumerate(seq["outputs"]):
            signals = measure(
                text,
                history[-responses:],
                memory,
                stagnant_at=settings.stagnation_threshold,
                novel_below=settings.novel_below,
            )
            if llms is not None and signals["band"] == "uncertain":
                previous = next(r.content for r in history if r.id == signals["similar_to_id"])
                _, answer = evaluate(llms, text, vocabulary=None, previous=previous, prefer=None, tags={})
                signals["comparison"] = parse_comparison(answer.get("comparison"))
                comparisons += 1
            flag, _, _ = decide(signals, settings)
            flags.append(flag)
            history.append(Row(t, t, text))
        start = seq["loop_start"]
        stats = per_label.setdefault(
            seq["label"],
            {
                "sequences": 0,
                "detected": 0,
                "true_flags": 0,
                "false_flags": 0,
                "ticks_to_detection": [],
                "false_alarm_sequences": 0,
            },
        )
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
        out[label] = {
            **s,
            "recall": round(s["detected"] / s["sequences"], 3) if label != "novel" else None,
            "flag_precision": round(s["true_flags"] / flagged, 3) if flagged else None,
            "ticks_to_detection_mean": round(statistics.mean(ttd), 2) if ttd else None,
            "ticks_to_detection_max": max(ttd) if ttd else None,
        }
    out["llm_comparisons"] = comparisons
    return out


def detection(with_llm: bool) -> dict:
    from persona.settings import load_settings

    loaded = load_settings()
    settings, responses = loaded.reflexes, loaded.cycle.responses
    seqs = sequences()
    progress(f"detection: {len(seqs)} labelled sequences, cheap signals (n-grams + all-MiniLM-L6-v2)…")
    memory = SentenceMemory()
    result = {
        "set": dict(Counter(s["label"] for s in seqs)),
        "thresholds": {
            "stagnant_at": settings.stagnation_threshold,
            "novel_below": settings.novel_below,
            "flag_at": settings.stagnation_soft_threshold,
        },
        "cheap": detect(seqs, memory, settings, responses),
    }
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


def run_stages(stages: list) -> tuple[int, str | None, str | None]:
    """Run each (name, run) in turn; the first that raises, or leaves stdout/stderr redirected, stops the bench.
    Returns (exit code, failed stage, reason)."""
    for name, run in stages:
        code, error = 0, None
        try:
            run()
        except KeyboardInterrupt:
            code, error = 130, "interrupted (KeyboardInterrupt)"
        except SystemExit as exc:  # nothing in a stage may end the process quietly
            code, error = 1, f"SystemExit({exc.code!r}) raised inside the stage"
        except BaseException as exc:  # noqa: BLE001 — reported, and turned into the exit code
            code, error = 1, f"{type(exc).__name__}: {exc}"
        hijacked = streams.hijacked() if streams else None
        if hijacked:  # everything printed after the stage, the JSON included, would have vanished
            silenced = f"the stage silenced the process's output ({hijacked}); restored"
            code, error = code or 1, f"{error}; {silenced}" if error else silenced
        if error:
            return code, name, error
    return 0, None, None


def main(argv: list[str] | None = None) -> int:
    global streams
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ticks", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64, help="answer length of the main call")
    parser.add_argument("--skip-cost", action="store_true")
    parser.add_argument("--skip-detection", action="store_true")
    parser.add_argument("--no-llm-detection", action="store_true", help="cheap signals only in the detection part")
    parser.add_argument(
        "--only",
        choices=[c[0] for c in COST_CONFIGS],
        action="append",
        help="run only this cost configuration (repeatable; default: all three)",
    )
    parser.add_argument(
        "--emotion-every",
        type=int,
        default=None,
        help="reflexes.emotion_every for the cost runs (default: the persona's config)",
    )
    parser.add_argument("--replay", help="a JSON list of recorded thoughts: count the calls per tick over them")
    args = parser.parse_args(argv)
    if args.replay:
        print(json.dumps({"replay": replay(args.replay, args.ticks)}, indent=2))
        return 0
    EMOTION_EVERY[:] = [args.emotion_every] if args.emotion_every else []
    streams = Streams()
    try:
        result: dict = {}
        stages = []
        if not args.skip_detection:
            stages.append(("detection", lambda: result.update(detection=detection(with_llm=not args.no_llm_detection))))
        if not args.skip_cost:
            stages += [
                stage
                for stage in cost_stages(args.ticks, args.max_tokens, result)
                if not args.only or stage[0].removeprefix("cost/") in args.only
            ]
        code, failed, reason = run_stages(stages)
        if failed is not None:  # what the stages before it measured, marked incomplete
            result = {"incomplete": True, "failed_stage": failed, "error": reason, **result}
        print(json.dumps(result, indent=2), file=streams.out, flush=True)
        if failed is not None:
            print(f"bench/reflexes.py: stage {failed} failed: {reason}", file=streams.err, flush=True)
        return code
    finally:
        streams.close()
        streams = None


if __name__ == "__main__":
    sys.exit(main())
