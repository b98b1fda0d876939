"""Turn-level recall on BEAM ("Beyond a Million Tokens", github.com/mohammadtavakoli78/BEAM): long user–assistant
conversations (the assistant's messages run to thousands of characters), converted to the LoCoMo format
bench/locomo.py reads and measured through it — anima's write path and `MemoryIndex.search` — beside plain BM25 and
a plain TF-IDF cosine over whole messages, in the same run.

The conversion: each of a chat's batches is a session (dated by its time anchor), each message a turn whose id is
the message's id, and each probing question whose `source_chat_ids` name messages of the chat a question whose
evidence is those messages (abstention questions, which have no evidence, are left out). BEAM's ten question types
are kept on each question (`beam_type`, and figures by type) and mapped to LoCoMo's categories: 1 multi-hop
(multi-session reasoning, event ordering, summarisation), 2 temporal, 3 knowledge updates, contradictions and
preferences, 4 single facts (information extraction, instruction following).

    # convert chats from a BEAM checkout, or the git directory the `fetch` tool gives, into a file:
    python bench/beam.py convert --source /path/to/BEAM --size 100K --chats 11-20 --out bench/data/beam_100k_dev.json.gz
    # measure (the dev chats stored in bench/data by default; nothing is downloaded):
    python bench/beam.py [--data bench/data/beam_100k_dev.json.gz] [--cache-dir /tmp/c] [--set NAME=VALUE …]
    # or convert and measure in one run, from the source (100K chats 1-10 and the larger sets are held out for an
    # independent check: the method is developed on 100K chats 11-20 only):
    python bench/beam.py --source /path/to/BEAM --size 100K --chats 11-20

Prints one JSON object on stdout: bench/locomo.py's figures, with `tfidf` beside its `bm25`, the figures of all
three by BEAM question type, and how fast the messages were indexed (`indexing`: characters a second of every
message, from bench/locomo.py's run; with --cache-dir that is the cache's speed, not the model's). Progress on
stderr. The indexing speed of long messages alone, without any cache:

    python bench/beam.py speed [--min-chars 2000] [--budget 1000000]
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import math
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.locomo import ranking_metrics, sessions  # noqa: E402
from bench.locomo import run as locomo_run

DATA = Path(__file__).resolve().parent / "data" / "beam_100k_dev.json.gz"
CATEGORY_OF_TYPE = {
    "multi_session_reasoning": 1,
    "event_ordering": 1,
    "summarization": 1,
    "temporal_reasoning": 2,
    "knowledge_update": 3,
    "contradiction_resolution": 3,
    "preference_following": 3,
    "information_extraction": 4,
    "instruction_following": 4,
}
LEFT_OUT = {"abstention"}  # no evidence to find
ANSWER_FIELDS = ("answer", "ideal_answer", "ideal_response", "ideal_summary", "expected_compliance")
# the generator's bookkeeping at the end of a user message ("… ->-> 1,2": the plan's bullet numbers), not its text
PLAN_MARK = re.compile(r"\s*->->\s*[\d,\s]*$")
METRIC_KS = [1, 5, 10]


def chat_numbers(text: str) -> list[int]:
    """ "11-20" or "1,3,5-7" → the chat numbers, in order."""
    found: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(f"chat numbers are N or N-M separated by commas, not {part!r}")
        found += range(int(low), int(high or low) + 1)
    return list(dict.fromkeys(found))


def message_ids(value: Any) -> list[int]:
    """Every message id in a `source_chat_ids` value: a list, or a dict of lists (by role in the question), nested."""
    if isinstance(value, dict):
        return [i for v in value.values() for i in message_ids(v)]
    if isinstance(value, list):
        return [i for v in value for i in message_ids(v)]
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, str) and value.strip().isdigit():
        return [int(value)]
    return []


def anchor_date(text: str | None) -> str:
    """A time anchor ("March-15-2024") as bench/locomo.py reads a session date ("2024-03-15"); "" when unreadable."""
    for fmt in ("%B-%d-%Y", "%b-%d-%Y", "%Y-%m-%d", "%B %d, %Y"):
        try:
            return datetime.strptime((text or "").strip(), fmt).strftime("%Y-%m-%d")
        except ValueError:
            continue
    return ""


def batch_messages(batch: dict) -> list[dict]:
    """A batch's messages in order (its `turns` are lists of messages, or messages)."""
    found: list[dict] = []
    for turn in batch.get("turns") or []:
        found += [m for m in (turn if isinstance(turn, list) else [turn]) if isinstance(m, dict)]
    return found


def convert_chat(chat: list[dict], probing: dict[str, list[dict]], sample_id: str) -> dict:
    """One BEAM chat (chat.json's batches) and its probing questions as one LoCoMo-format sample."""
    conversation: dict[str, Any] = {"speaker_a": "user", "speaker_b": "assistant"}
    known: set[int] = set()
    for number, batch in enumerate(chat, 1):
        messages = batch_messages(batch)
        anchor = batch.get("time_anchor") or next((m["time_anchor"] for m in messages if m.get("time_anchor")), None)
        turns = []
        for message in messages:
            if "id" not in message:
                continue
            text = str(message.get("content") or "")
            if message.get("role") == "user":
                text = PLAN_MARK.sub("", text)
            turns.append({"speaker": str(message.get("role") or "user"), "dia_id": str(message["id"]), "text": text})
            known.add(int(message["id"]))
        conversation[f"session_{number}_date_time"] = anchor_date(anchor)
        conversation[f"session_{number}"] = turns
    qa = []
    for beam_type, questions in probing.items():
        if beam_type in LEFT_OUT:
            continue
        for q in questions:
            evidence = [str(i) for i in dict.fromkeys(message_ids(q.get("source_chat_ids"))) if i in known]
            if not evidence or not str(q.get("question") or "").strip():
                continue
            answer = next((q[f] for f in ANSWER_FIELDS if q.get(f)), "")
            qa.append(
                {
                    "question": str(q["question"]),
                    "answer": answer if isinstance(answer, str) else json.dumps(answer),
                    "evidence": evidence,
                    "category": CATEGORY_OF_TYPE.get(beam_type, 4),
                    "beam_type": beam_type,
                    "asker": "user",
                    "addressee": "assistant",
                }
            )  # the user's questions, asked of the assistant
    return {"sample_id": sample_id, "conversation": conversation, "qa": qa}


def read_source(source: Path, path: str) -> bytes:
    """A file of a BEAM checkout, or of a git directory (a bare mirror: read with `git show`)."""
    if (source / path).exists():
        return (source / path).read_bytes()
    if (source / "HEAD").exists() and (source / "objects").is_dir():
        done = subprocess.run(["git", f"--git-dir={source}", "show", f"HEAD:{path}"], capture_output=True)
        if done.returncode == 0:
            return done.stdout
    raise FileNotFoundError(f"{path} is not in {source}")


def convert(source: Path, size: str, numbers: list[int]) -> list[dict]:
    samples = []
    for number in numbers:
        base = f"chats/{size}/{number}"
        chat = json.loads(read_source(source, f"{base}/chat.json"))
        probing = json.loads(read_source(source, f"{base}/probing_questions/probing_questions.json"))
        samples.append(convert_chat(chat, probing, f"beam-{size}-{number}"))
    return samples


def load(path: Path) -> list[dict]:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def write(samples: list[dict], path: Path) -> None:
    text = json.dumps(samples, ensure_ascii=False).encode()
    path.write_bytes(gzip.compress(text, 9, mtime=0) if path.suffix == ".gz" else text)


# ---- the references beside anima's figures --------------------------------------------------------------------


def claw0_tokens(text: str) -> list[str]:
    return [t for t in re.findall(r"[a-z0-9\u4e00-\u9fff]+", text.lower()) if len(t) > 1]


def tfidf_ranking(turns: list[dict], question: str) -> list[str]:
    """TF-IDF cosine over whole messages, as claw0 (github.com/shareAI-lab/claw0, s07) searches its memory: tokens
    of letters and digits longer than one, tf = count / length, idf = log(N / df), cosine of the two vectors. Written
    out rather than taken from scikit-learn, whose TfidfVectorizer smooths the idf and counts raw tf: the reference
    is that method exactly."""
    docs = [claw0_tokens(t["text"]) for t in turns]
    df: Counter[str] = Counter(term for d in docs for term in set(d))
    n = len(docs)

    def vector(tokens: list[str]) -> dict[str, float]:
        counts = Counter(tokens)
        return {t: c / max(1, len(tokens)) * (math.log(n / df[t]) if df[t] else 0.0) for t, c in counts.items()}

    q = vector(claw0_tokens(question))
    q_norm = math.sqrt(sum(v * v for v in q.values()))
    scores = []
    for turn, tokens in zip(turns, docs):
        d = vector(tokens)
        d_norm = math.sqrt(sum(v * v for v in d.values()))
        dot = sum(w * d.get(t, 0.0) for t, w in q.items())
        scores.append((dot / (q_norm * d_norm) if q_norm and d_norm else 0.0, turn["ref"]))
    return [ref for _, ref in sorted(scores, key=lambda x: -x[0])]


def turns_of(sample: dict) -> list[dict]:
    return [
        {"ref": t["dia_id"], "text": t["text"], "author": t["speaker"], "at": when}
        for _, when, ts in sessions(sample["conversation"])
        for t in ts
    ]


def measure(
    samples: list[dict],
    data: Path,
    ks: list[int],
    overrides: dict[str, str],
    cache_dir: Path | None,
    embed_model: str | None = None,
) -> dict:
    """bench/locomo.py's run over the converted chats, then the TF-IDF reference and every ranking by BEAM type."""
    got = locomo_run(data, ks, overrides, None, embed_model, None, cache_dir=cache_dir, keep_rankings=True)
    rankings = got.pop("rankings")
    types = {(s["sample_id"], q["question"]): q.get("beam_type", "") for s in samples for q in s["qa"]}
    tfidf, by_type = [], {"anima": [], "bm25": [], "tfidf": []}  # type: ignore[var-annotated]
    for sample in samples:
        turns = turns_of(sample)
        for question, (category, ours, bm25, evidence) in zip(
            [q for q in sample["qa"] if q.get("category") != 5], rankings[sample["sample_id"]]
        ):
            ranked = tfidf_ranking(turns, question["question"])
            tfidf.append((category, ranked, evidence))
            kind = types[(sample["sample_id"], question["question"])]
            by_type["anima"].append((kind, ours, evidence))
            by_type["bm25"].append((kind, bm25, evidence))
            by_type["tfidf"].append((kind, ranked, evidence))
    got["benchmark"] = "beam-turn-recall"
    got["tfidf"] = ranking_metrics(tfidf, ks)
    got["anima_over_bm25_recall@5"] = (
        round(got["recall@5"] / got["bm25"]["recall@5"], 3) if got["bm25"]["recall@5"] else None
    )
    got["by_beam_type"] = {
        name: {
            t: {k: v for k, v in figures.items() if k != "questions"} | {"questions": figures["questions"]}
            for t, figures in ranking_metrics(rows, ks)["by_category"].items()
        }
        for name, rows in by_type.items()
    }
    got["chats"] = [s["sample_id"] for s in samples]
    return got


def indexing_speed(samples: list[dict], min_chars: int, budget: int, embed_model: str | None = None) -> dict:
    """How fast long messages are indexed, without any cache: the dev chats' messages of at least `min_chars`
    characters, up to `budget` characters in all, written through anima's write path into a fresh store, then the
    index's sync (the whole vectors and the parts of each message's first WRITTEN_CHARS, in the model's batches)
    and the follow-up's vectors of the rest (memory/followup.py), after the model alone on the same messages
    (`embed_parts` in batches of 64 messages). Characters a second of wall time (the goal's
    figure), and per second of this process's CPU time (what the model's work costs whatever else the machine runs:
    the load average before and after says how busy it was)."""
    import os
    import resource

    from bench.mpnet import bench_embedder
    from memory import Database
    from memory.retrieval.index import MemoryIndex
    from memory.store import record_turn
    from memory.text import parts, with_author

    chosen, total = [], 0
    for sample in samples:
        for turn in turns_of(sample):
            if len(turn["text"]) >= min_chars and total < budget:
                chosen.append((sample["sample_id"], turn))
                total += len(turn["text"])

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    embedder = bench_embedder(embed_model)
    embedder.embed(["warm up the model"])
    load_before = os.getloadavg()[0]
    model_only = None
    if hasattr(embedder, "embed_parts"):  # the model alone, every part of every message, in its batches
        documents = [(with_author(turn["author"], ""), turn["text"], parts(turn["text"])) for _, turn in chosen]
        wall, used = time.perf_counter(), cpu()
        for start in range(0, len(documents), 64):
            embedder.embed_parts(documents[start : start + 64])
            done = sum(len(body) for _, body, _ in documents[: start + 64])
            print(
                f"model alone: {done}/{total} characters ({done / (time.perf_counter() - wall):.0f}/s)",
                file=sys.stderr,
                flush=True,
            )
        wall, used = time.perf_counter() - wall, cpu() - used
        model_only = {
            "seconds": round(wall, 2),
            "cpu_seconds": round(used, 2),
            "characters_per_second": round(total / wall) if wall else None,
            "characters_per_cpu_second": round(total / used) if used else None,
        }
    with tempfile.TemporaryDirectory(prefix="anima-beam-speed-") as tmp:
        db = Database.open(Path(tmp))
        with db.unit() as repos:
            for _n, (sample_id, turn) in enumerate(chosen):
                record_turn(
                    repos,
                    ref=f"{sample_id}:{turn['ref']}",
                    text=turn["text"],
                    author=turn["author"],
                    episode=f"{sample_id}:speed",
                    created_at=turn["at"],
                )
        index = MemoryIndex(db, embedder, chroma_path=Path(tmp) / "chroma")
        wall, used = time.perf_counter(), cpu()
        index.sync(progress=True, flush=True)
        written_wall, written_cpu = time.perf_counter() - wall, cpu() - used
        follow = index.follow_up.run_pending()
        wall, used = time.perf_counter() - wall, cpu() - used
        index.close()
        db.close()
    return {
        "messages": len(chosen),
        "characters": total,
        "min_chars": min_chars,
        "mean_chars": round(total / max(1, len(chosen))),
        "write_sync": {
            "seconds": round(written_wall, 2),
            "characters_per_second": round(total / written_wall) if written_wall else None,
            "cpu_seconds": round(written_cpu, 2),
            "characters_per_cpu_second": round(total / written_cpu) if written_cpu else None,
        },
        "follow_up_parts": follow.deep_parts,
        "seconds": round(wall, 2),
        "cpu_seconds": round(used, 2),
        "characters_per_second": round(total / wall) if wall else None,
        "characters_per_cpu_second": round(total / used) if used else None,
        "model_alone": model_only,
        "load_average_before": round(load_before, 2),
        "load_average_after": round(os.getloadavg()[0], 2),
        "cores": os.cpu_count(),
        "embedder": embedder.name,
    }


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    logging.getLogger("memory.retrieval.index").setLevel(logging.INFO)  # "indexed N/M memories (rate)"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "command",
        nargs="?",
        choices=["run", "convert", "speed"],
        default="run",
        help="run: recall beside BM25 and TF-IDF; convert: chats to a file; speed: indexing speed "
        "of long messages (no cache)",
    )
    parser.add_argument("--data", type=Path, default=None, help=f"converted chats (default {DATA.name} in bench/data)")
    parser.add_argument(
        "--source",
        type=Path,
        default=None,
        help="a BEAM checkout or its git directory: convert from it (with --size and --chats)",
    )
    parser.add_argument("--size", default="100K", help="the chat set: 100K, 500K, 1M or 10M")
    parser.add_argument("--chats", default="11-20", help="which chats of the set, e.g. 11-20 or 1,4,7")
    parser.add_argument("--out", type=Path, default=None, help="convert: where to write (.json or .json.gz)")
    parser.add_argument("--k", type=int, nargs="+", default=METRIC_KS)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a RetrievalSettings field (as bench/locomo.py)",
    )
    parser.add_argument("--cache-dir", type=Path, default=None, help="remember embeddings here between runs")
    parser.add_argument("--embed-model", default=None, help="as bench/locomo.py's")
    parser.add_argument("--min-chars", type=int, default=2000, help="speed: messages at least this long")
    parser.add_argument("--budget", type=int, default=1_000_000, help="speed: characters of them to index")
    args = parser.parse_args()
    if bad := [item for item in args.set if "=" not in item]:
        parser.error(f"--set takes NAME=VALUE, not {bad[0]!r}")
    try:
        numbers = chat_numbers(args.chats)
    except ValueError as error:
        parser.error(str(error))
    if args.command == "convert":
        if args.source is None or args.out is None:
            parser.error("convert needs --source and --out")
        samples = convert(args.source, args.size, numbers)
        write(samples, args.out)
        print(
            json.dumps(
                {
                    "chats": [s["sample_id"] for s in samples],
                    "out": str(args.out),
                    "turns": sum(len(turns_of(s)) for s in samples),
                    "questions": sum(len(s["qa"]) for s in samples),
                },
                indent=2,
            )
        )
        return
    if args.command == "speed":
        print(
            json.dumps(indexing_speed(load(args.data or DATA), args.min_chars, args.budget, args.embed_model), indent=2)
        )
        return
    ks = sorted(set(args.k) | {5})
    overrides = dict(item.split("=", 1) for item in args.set)
    with tempfile.TemporaryDirectory(prefix="anima-beam-") as tmp:
        if args.source is not None:
            samples = convert(args.source, args.size, numbers)
            data = Path(tmp) / "beam.json"
        else:
            data = args.data or DATA
            if not data.exists():
                parser.error(f"no such file: {data} (convert chats first, or give --source)")
            samples = load(data)
            if args.data is None and args.chats != "11-20":
                wanted = {f"beam-{args.size}-{n}" for n in numbers}
                samples = [s for s in samples if s["sample_id"] in wanted]
            data = Path(tmp) / "beam.json"
        data.write_text(json.dumps(samples))
        print(json.dumps(measure(samples, data, ks, overrides, args.cache_dir, args.embed_model), indent=2))


if __name__ == "__main__":
    main()
