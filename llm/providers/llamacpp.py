"""The embedded default: a GGUF model in process through langchain-community's `LlamaCpp`.

langchain-community is being sunset; everything that touches it is in this module, so swapping to
llama-cpp-python's `Llama` directly is a local change. The model loads lazily on the first call.
`chat` renders the messages with the GGUF's own chat template when the voice is instruction-tuned and has one
(llm/embedded_model.py: `Voice.chat_template`; llama-cpp-python's Jinja2 formatter), else as plain text it continues.
JSON-schema answers use llama.cpp's grammar-constrained decoding, so even a 270M model returns valid JSON.
`Sampling.letters` masks the vocabulary instead: only tokens made of those letters, plain punctuation and spaces
may be sampled (one numpy mask per letter set, built once). It costs nothing per token, where a grammar over
Gemma's 262k-token vocabulary costs 0.2–2 s per token here; it keeps the small model's free text in words.
Given a `cancel` event, generation streams and stops between two tokens once it is set.
The `Llama` instance (and its context) lives as long as the provider: llama-cpp-python evaluates only what a prompt
does not share with the one before it (its longest common token prefix), so a tick's prompt that opens as the last
one did costs only its new end; `Generation.cached_tokens` says how many tokens were reused.
Every `Sampling` field reaches llama.cpp: temperature, top_p, top_k, min_p, repeat_penalty (over the last 64 tokens,
LangChain's `last_n_tokens_size`), presence and frequency penalties, max_tokens.
"""

from __future__ import annotations

import functools
import json
import os
import re
import threading
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from llm.base import (
    Generation,
    LLMCancelled,
    LLMUnavailable,
    Sampling,
    TokenCallback,
    render_chat_as_text,
)

if TYPE_CHECKING:  # heavy imports, loaded on the first call
    import numpy as np
    import numpy.typing as npt
    from langchain_community.llms import LlamaCpp
    from llama_cpp import Llama
    from llama_cpp.llama import LogitsProcessorList
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    from llama_cpp.llama_grammar import LlamaGrammar
    from llama_cpp.llama_types import ChatCompletionRequestMessage

    # per token kind (0 masked, 1 word, 2 mark, 3 line break), then the tokens masked after each kind ("start": first)
    _WordMasks = tuple[npt.NDArray[np.int8], dict[str | int, npt.NDArray[np.bool_]]]

# One model load at a time in the process. With verbose=False, llama-cpp-python silences a load by dup2-ing
# /dev/null over fds 1 and 2 (and swapping sys.stdout/sys.stderr), then restoring what it saved on entry. Two
# loads overlapping in threads (the validators are asked in parallel and each loads its model on first use)
# save each other's /dev/null and "restore" it: the process's stdout and stderr stay on /dev/null for good,
# and a run ends with exit 0 and no output. (`warnings.catch_warnings` is not thread-safe either.)
_LOAD_LOCK = threading.Lock()
COUNT_CACHE = 256  # texts whose token counts are remembered (per model)
PLAIN_PUNCTUATION = ",.;:!?'()、。，！？・"  # what `Sampling.letters` admits besides letters (persona/prose.py's marks)


def available_cpus() -> int:
    """The CPUs this process may run on (taskset, a container's cpuset), not every CPU of the machine."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


class EmbeddedLlamaCpp:
    provider = "llamacpp"

    def __init__(
        self,
        id: str = "embedded",
        model_path: str | None = None,
        context_window: int = 8192,
        n_threads: int | None = None,
        seed: int = -1,
        cache_dir: str | None = None,
        voice: str | None = None,
        chat_template: bool | None = None,
    ) -> None:
        from llm.embedded_model import voice_of

        self.id = id
        self._model_path = model_path
        self._cache_dir = cache_dir
        self._voice = voice_of(voice)
        # the GGUF's chat template: the voice's own choice unless the entry says
        self._chat_template = self._voice.chat_template if chat_template is None else chat_template
        self._formatter: Jinja2ChatFormatter | None = None
        self.context_window = context_window
        self.n_threads = n_threads or available_cpus()
        self.seed = seed
        self._llm: LlamaCpp | None = None
        self._grammars: dict[str, LlamaGrammar] = {}
        self._masks: dict[str, _WordMasks] = {}
        self._lock = threading.Lock()  # one llama.cpp context is not re-entrant
        # a prompt's fixed blocks (identity, soul, the command guide…) are the same text every tick: counted once
        self.count_tokens = functools.lru_cache(maxsize=COUNT_CACHE)(self._count_tokens)

    @classmethod
    def from_entry(cls, entry: dict[str, Any]) -> EmbeddedLlamaCpp:
        cfg = entry.get("config") or {}
        return cls(
            id=entry.get("id", "embedded"),
            model_path=cfg.get("model_path"),
            context_window=int(cfg.get("context_window", 8192)),
            n_threads=cfg.get("n_threads"),
            seed=int(cfg.get("seed", -1)),
            cache_dir=cfg.get("cache_dir"),
            voice=cfg.get("voice"),
            chat_template=cfg.get("chat_template"),
        )

    @property
    def model(self) -> str:
        return Path(self._model_path).name if self._model_path else self._voice.file_name

    def _ensure(self) -> LlamaCpp:
        if self._llm is not None:
            return self._llm
        with _LOAD_LOCK:  # see _LOAD_LOCK; also keeps two threads from assembling the GGUF at once
            if self._llm is not None:
                return self._llm
            if not self._model_path:
                from llm.embedded_model import assemble_model

                self._model_path = str(
                    assemble_model(Path(self._cache_dir) if self._cache_dir else None, voice=self._voice.name)
                )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                from langchain_community.llms import LlamaCpp

                self._llm = LlamaCpp(
                    model_path=self._model_path,
                    n_ctx=self.context_window,
                    n_threads=self.n_threads,
                    n_batch=512,
                    seed=self.seed,
                    verbose=False,
                    max_tokens=256,
                )
        return self._llm

    def _client(self) -> Llama:
        """llama-cpp-python's model under LangChain's wrapper (which declares it `Any`)."""
        client: Llama = self._ensure().client
        return client

    def _count_tokens(self, text: str) -> int:
        return len(self._client().tokenize(text.encode("utf-8"), add_bos=False, special=True)) if text else 0

    def _grammar(self, schema: dict[str, Any]) -> LlamaGrammar:
        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            from llama_cpp.llama_grammar import LlamaGrammar

            # the key is sorted; the grammar keeps the schema's own property order (the answer's first field
            # is the one the prompt asks for first)
            self._grammars[key] = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
        return self._grammars[key]

    def _words_only(self, letters: str, prompt_tokens: int) -> LogitsProcessorList:
        """A logits processor that leaves only tokens of `letters`, plain punctuation, spaces and newlines (and the
        end of text) to be sampled, in the order words take: a word first; after a mark a word, a line break or the
        end; after a line break a word or the end. Never `,\n,\n` or `":":"`. Special tokens, markup, quotes,
        digits and partial UTF-8 bytes are masked."""
        if letters not in self._masks:
            import numpy as np

            client = self._client()
            allowed = re.compile(f"[{letters}{re.escape(PLAIN_PUNCTUATION)} \n]+")
            kind = np.zeros(client.n_vocab(), dtype=np.int8)  # 0 masked, 1 word, 2 mark, 3 line break
            for token in range(client.n_vocab()):
                try:
                    piece = client.detokenize([token], special=False).decode("utf-8")
                except UnicodeDecodeError:
                    continue
                if piece and allowed.fullmatch(piece):
                    kind[token] = (
                        1 if any(ch.isalpha() for ch in piece) else 3 if "\n" in piece and not piece.strip() else 2
                    )
            eos = np.zeros(client.n_vocab(), dtype=bool)
            eos[client.token_eos()] = True
            self._masks[letters] = (
                kind,
                {
                    "start": kind != 1,
                    1: (kind == 0) & ~eos,
                    2: ~((kind == 1) | (kind == 3) | eos),
                    3: ~((kind == 1) | eos),
                },
            )
        kind, masks = self._masks[letters]

        def words_only(input_ids: npt.NDArray[np.intc], scores: npt.NDArray[np.single]) -> npt.NDArray[np.single]:
            at = len(input_ids)  # the prompt, maybe a BOS, then what was generated
            previous = int(kind[input_ids[-1]]) if at > prompt_tokens + 1 and int(input_ids[-1]) < len(kind) else 0
            scores[masks[previous] if previous else masks["start"]] = -float("inf")
            return scores

        from llama_cpp.llama import LogitsProcessorList

        return LogitsProcessorList([words_only])

    def complete(
        self,
        prompt: str,
        sampling: Sampling,
        *,
        stop: list[str] | None = None,
        json_schema: dict[str, Any] | None = None,
        on_token: TokenCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Generation:
        llm = self._ensure()
        prompt_tokens = self.count_tokens(prompt)
        max_tokens = max(1, min(sampling.max_tokens, self.context_window - prompt_tokens - 1))
        if prompt_tokens >= self.context_window:
            raise ValueError(f"prompt has {prompt_tokens} tokens, over the model's window of {self.context_window}")
        kwargs: dict[str, Any] = {
            "max_tokens": max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "presence_penalty": sampling.presence_penalty,
            "frequency_penalty": sampling.frequency_penalty,
            "top_k": sampling.top_k,
            "min_p": sampling.min_p,
            "repeat_penalty": sampling.repeat_penalty,
        }
        if json_schema is not None:
            kwargs["grammar"] = self._grammar(json_schema)
        elif sampling.letters:
            kwargs["logits_processor"] = self._words_only(sampling.letters, prompt_tokens)
        started = time.perf_counter()
        reused = 0
        try:
            with self._lock:
                reused = self._reused_prefix(llm.client, prompt)
                if on_token is None and cancel is None:
                    text = llm.invoke(prompt, stop=stop or None, **kwargs)
                else:
                    parts: list[str] = []
                    chunks = llm.stream(prompt, stop=stop or None, **kwargs)
                    try:
                        for chunk in chunks:
                            if cancel is not None and cancel.is_set():
                                raise LLMCancelled(f"{self.id}: cancelled after {len(parts)} token(s)")
                            parts.append(chunk)
                            if on_token is not None:
                                on_token(chunk)
                    finally:
                        chunks.close()  # ends llama.cpp's generation loop now, not when the generator is collected
                    text = "".join(parts)
        except (RuntimeError, OSError) as exc:  # llama_decode failures: treat as an outage of this model
            raise LLMUnavailable(f"{self.id}: {exc}") from exc
        latency_ms = (time.perf_counter() - started) * 1000
        return Generation(
            text=text,
            llm_id=self.id,
            provider=self.provider,
            model=self.model,
            prompt_tokens=prompt_tokens,
            completion_tokens=self.count_tokens(text),
            latency_ms=latency_ms,
            cached_tokens=reused,
        )

    @staticmethod
    def _reused_prefix(client: Any, prompt: str) -> int:
        """The tokens of `prompt` the context holds already from the call before (llama.cpp evaluates the rest)."""
        held = int(getattr(client, "n_tokens", 0) or 0)
        if not held:
            return 0
        tokens = client.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
        return int(client.longest_token_prefix(client.input_ids[:held].tolist(), tokens))

    def _templated(self, messages: list[dict[str, str]]) -> str | None:
        """The messages through the GGUF's chat template, ending where the assistant's turn starts; None when the
        voice wants no template or the file has none."""
        if not self._chat_template:
            return None
        if self._formatter is None:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            client = self._client()
            template = (client.metadata or {}).get("tokenizer.chat_template")
            if not template:
                self._chat_template = False
                return None

            def piece(token: int) -> str:
                return client.detokenize([token], special=True).decode("utf-8", "ignore")

            self._formatter = Jinja2ChatFormatter(
                template=template, eos_token=piece(client.token_eos()), bos_token=piece(client.token_bos())
            )
        # our messages are {"role", "content"} dicts, the shape of llama-cpp-python's message TypedDicts
        prompt = self._formatter(messages=cast("list[ChatCompletionRequestMessage]", messages)).prompt
        bos = self._formatter.bos_token
        adds_bos = str((self._client().metadata or {}).get("tokenizer.ggml.add_bos_token", "")).lower() == "true"
        # a model that adds its BOS itself would get it twice (SmolLM2's BOS is its turn marker and it adds none)
        return prompt[len(bos) :] if adds_bos and bos and prompt.startswith(bos) else prompt

    def chat(
        self,
        messages: list[dict[str, str]],
        sampling: Sampling,
        *,
        stop: list[str] | None = None,
        json_schema: dict[str, Any] | None = None,
        on_token: TokenCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Generation:
        prompt = self._templated(messages)
        return self.complete(
            render_chat_as_text(messages) if prompt is None else prompt,
            sampling,
            stop=stop,
            json_schema=json_schema,
            on_token=on_token,
            cancel=cancel,
        )
