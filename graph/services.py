"""Opening what a run needs — database, persona, LLM registry, settings — from plain options."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm import LLMRegistry, Provider
from memory import Database
from nodes.context import Services, TickSettings, utcnow
from persona import load_persona

log = logging.getLogger(__name__)


@dataclass
class RunOptions:
    data_dir: str = "data"
    db_url: str | None = None
    persona_dir: str | None = None
    llm_url: str | None = None
    model: str | None = None
    llm_api: str = "chat"  # chat | completions (for --llm-url)
    api_key_env: str = "OPENAI_API_KEY"
    context_window: int | None = None
    embedded_context_window: int = 8192
    embedded: bool = True  # keep the embedded model in the registry (primary, or fallback behind a server)
    cache_dir: str | None = None
    embed_url: str | None = None  # OpenAI-compatible /v1 for embeddings (default: embedded all-MiniLM-L6-v2)
    embed_model: str | None = None
    chroma_url: str | None = None  # a Chroma server (default: PersistentClient under <data_dir>/chroma)


def registry_entries(options: RunOptions, persona_config: dict[str, Any]) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    if options.llm_url:
        entries.append({"id": "server", "provider": "openai", "model": options.model or "default", "priority": 100,
                        "config": {"base_url": options.llm_url, "api": options.llm_api,
                                   "api_key_env": options.api_key_env,
                                   "context_window": options.context_window or 32768}})
    for extra in persona_config.get("llms") or []:  # persona config.yaml: validators, more servers
        entries.append(dict(extra))
    if options.embedded or not entries:
        entries.append({"id": "embedded", "provider": "llamacpp", "model": "gemma-3-270m-q4_k_m.gguf",
                        "priority": 0 if entries else 100,
                        "config": {"context_window": options.embedded_context_window,
                                   **({"cache_dir": options.cache_dir} if options.cache_dir else {})}})
    return entries


def sync_registry(db: Database, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Record the configured models in `llm_registry`; trust scores learnt earlier are kept."""
    merged = []
    with db.unit() as repos:
        known = {e.id: e for e in repos.llm_registry.all()}
        for entry in entries:
            existing = known.get(entry["id"])
            trust = existing.trust_score if existing is not None else float(entry.get("trust_score", 1.0))
            repos.llm_registry.upsert(entry["id"], provider=entry.get("provider", "llamacpp"),
                                      model=entry.get("model", ""), priority=int(entry.get("priority", 0)),
                                      is_validator=bool(entry.get("is_validator", False)), trust_score=trust,
                                      enabled=True, config=entry.get("config") or {})
            merged.append({**entry, "trust_score": trust})
        repos.llm_registry.disable_missing([e["id"] for e in entries])
    return merged


def call_recorder(db: Database):
    def record(call: dict[str, Any]) -> None:
        try:
            with db.unit() as repos:
                repos.llm_calls.add(**{k: call.get(k) for k in (
                    "thread_id", "tick", "purpose", "llm_id", "provider", "model", "prompt_tokens",
                    "completion_tokens", "latency_ms", "ok", "error")})
        except Exception:  # accounting must never break a tick
            log.exception("could not record an LLM call")

    return record


def open_services(options: RunOptions, *, providers: dict[str, Provider] | None = None,
                  entries: list[dict[str, Any]] | None = None, clock=utcnow, embedder: Any = None,
                  **setting_overrides: Any) -> Services:
    db = Database.open(options.data_dir, options.db_url)
    persona = load_persona(options.persona_dir)
    entries = sync_registry(db, entries if entries is not None else registry_entries(options, persona.config))
    llms = LLMRegistry(entries, recorder=call_recorder(db), providers=dict(providers or {}))
    settings = TickSettings.from_persona(persona, context_window=options.context_window, **setting_overrides)
    return Services(db=db, llms=llms, persona=persona, settings=settings, clock=clock,
                    memory=open_memory_index(db, options, persona.config, clock, embedder))


def open_memory_index(db: Database, options: RunOptions, persona_config: dict[str, Any], clock=utcnow, embedder=None):
    """The hybrid retrieval index; nothing is loaded until the first write or search."""
    from memory.embeddings import open_embedder
    from memory.index import MemoryIndex, RetrievalConfig

    retrieval = (persona_config.get("memory") or {}).get("retrieval")
    return MemoryIndex(db, embedder or open_embedder(options.embed_url, options.embed_model, options.api_key_env),
                       chroma_path=Path(options.data_dir).expanduser() / "chroma", chroma_url=options.chroma_url,
                       config=RetrievalConfig.from_dict(retrieval), clock=clock)


def checkpoint_path(data_dir: str | Path) -> Path:
    return Path(data_dir).expanduser().resolve() / "checkpoints.sqlite"
