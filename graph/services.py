"""Opening what a run needs — database, persona, settings, LLM registry, memory index — from the run's settings.

`open_services(overrides)` reads the settings once (persona/settings.py: defaults → config.yaml → the persona's own
changes → environment → the caller's overrides, e.g. the command line's flags). The persona a data dir belongs to is
recorded in it, so a later command on the same data dir without `--persona` (inspect, kb, persona show…) reads the
same persona, not the default one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm import LLMRegistry, Provider
from llm.embedded_model import voice_of
from managers import ManagerDeps, ManagerFactory
from memory import Database
from memory.clock import utcnow
from nodes.context import Services
from persona import load_persona
from persona.settings import Overrides, Settings, SettingsError, load_settings, persona_dir_named, stored_settings
from persona.yaml_lines import read_lined_yaml

if TYPE_CHECKING:  # both load Chroma and the embedding model's code: imported when the index is opened
    from memory.retrieval.embeddings import Embedder
    from memory.retrieval.index import MemoryIndex

log = logging.getLogger(__name__)


def registry_entries(settings: Settings) -> list[dict[str, Any]]:
    """The models of the run: the operator's server (its key goes only there), the persona's config.yaml
    `llms` (each names its own key variable, or sends none), and the embedded model."""
    entries: list[dict[str, Any]] = []
    if settings.llm_url:
        entries.append(
            {
                "id": "server",
                "provider": "openai",
                "model": settings.model or "default",
                "priority": 100,
                "config": {
                    "base_url": settings.llm_url,
                    "api": settings.llm_api,
                    "api_key_env": settings.api_key_env,
                    "context_window": settings.context_window or 32768,
                },
            }
        )
    entries += [entry.model_dump() for entry in settings.llms]
    if settings.embedded or not entries:
        entries.append(
            {
                "id": "embedded",
                "provider": "llamacpp",
                "model": voice_of(settings.embedded_model).file_name,
                "priority": 0 if entries else 100,
                "config": {
                    "context_window": settings.embedded_context_window,
                    "n_threads": settings.embedded_threads,
                    "cache_dir": settings.cache_dir,
                    "voice": settings.embedded_model,
                },
            }
        )
    return entries


def run_managers(db: Database, settings: Settings) -> ManagerFactory:
    """The managers that open a run, before its services exist (those then build their own: Services.managers)."""
    return ManagerFactory(db, ManagerDeps(settings=settings))


def call_recorder(managers: ManagerFactory) -> Callable[[dict[str, Any]], None]:
    def record(call: dict[str, Any]) -> None:
        try:
            with managers.unit() as house:
                house.models.record_call(call)
        except Exception:  # accounting must never break a tick
            log.exception("could not record an LLM call")

    return record


def open_settings(db: Database, overrides: Overrides | None = None) -> Settings:
    """The settings for this data dir: its recorded persona unless the run names one, with the persona's own
    changes (the data dir's layer)."""
    overrides = overrides or Overrides()
    named, _ = persona_dir_named(overrides)
    settings = stored_settings(db, overrides)
    check_consent_policy(settings)
    if named:  # recorded only once its settings are valid
        with run_managers(db, settings).unit() as house:
            house.persona.adopt_directory(Path(named).expanduser().resolve())
    return settings


def check_consent_policy(settings: Settings) -> None:
    """`consent.auto_approve` may only name commands that exist: a typo must not pass for a policy."""
    from nodes.commands import registry  # every command family: only when a policy names commands

    unknown = [name for name in settings.consent.auto_approve if registry().get(name) is None]
    if unknown:
        config = read_lined_yaml(Path(settings.persona_dir or "") / "config.yaml")
        raise SettingsError(
            f"{config.where(('consent', 'auto_approve'))}: no such command {', '.join(map(repr, unknown))}"
            " (`run.py persona show` lists the commands under 'Available commands')",
            settings.persona_dir,
        )


def open_services(
    overrides: Overrides | None = None,
    *,
    providers: dict[str, Provider] | None = None,
    entries: list[dict[str, Any]] | None = None,
    clock: Callable[[], datetime] = utcnow,
    embedder: Embedder | None = None,
    db: Database | None = None,
    **given: Any,
) -> Services:
    """Everything a run needs, from `overrides` (the caller's layer: Settings fields given on the command line or by
    the caller; `given` keyword values on top). `db`: an opened database (a deployment's persona, graph/fleet/);
    otherwise the one the overrides locate."""
    from nodes.background import Background

    overrides = (overrides or Overrides()).replace(**{k: v for k, v in given.items() if v is not None})
    if db is None:
        located = load_settings(overrides=overrides)  # where the data is: overrides and environment only
        db = Database.open(located.data_dir, located.db_url)
    settings = open_settings(db, overrides)
    persona = load_persona(settings.persona_dir)
    managers = run_managers(db, settings)
    with managers.unit() as house:
        entries = house.models.sync_registry(
            house.models.with_added(entries if entries is not None else registry_entries(settings))
        )
    llms = LLMRegistry(entries, recorder=call_recorder(managers), providers=dict(providers or {}))
    services = Services(
        db=db,
        llms=llms,
        persona=persona,
        settings=settings,
        clock=clock,
        memory=open_memory_index(db, settings, clock, embedder),
    )
    services.jobs = Background(services)  # nothing starts until a command asks
    with db.unit() as repos:
        services.refresh_llms(repos)  # the model choices made at run time, persisted
    return services


EMBEDDED_CHROMA_REFUSED = (
    "--chroma-url: a persona of a deployment keeps its vectors on a Chroma server, because the embedded Chroma "
    "(PersistentClient) is not safe across processes — start one (`chroma run --path /srv/chroma --port 8000`) "
    "and pass --chroma-url http://HOST:8000 (or set ANIMA_CHROMA_URL)"
)


def open_memory_index(
    db: Database, settings: Settings, clock: Callable[[], datetime] = utcnow, embedder: Embedder | None = None
) -> MemoryIndex:
    """The hybrid retrieval index; nothing is loaded until the first write or search. A persona of a deployment
    (its own database schema) keeps its vectors in its own database on the Chroma server."""
    from memory.retrieval.embeddings import open_embedder
    from memory.retrieval.index import MemoryIndex

    if db.schema and not settings.chroma_url:
        raise SettingsError(EMBEDDED_CHROMA_REFUSED)
    return MemoryIndex(
        db,
        embedder or open_embedder(settings.embed_url, settings.embed_model, settings.api_key_env, settings.cache_dir),
        chroma_path=Path(settings.data_dir).expanduser() / "chroma",
        chroma_url=settings.chroma_url,
        chroma_database=vector_database(db) if settings.chroma_url else None,
        config=settings.memory.retrieval,
        clock=clock,
    )


def vector_database(db: Database) -> str:
    """Where a persona's vectors live on a Chroma server: a deployment's persona under its schema's name, a persona of
    its own data dir under a name its database keeps (so two personas on one server never share a collection)."""
    if db.schema:
        return db.schema
    with ManagerFactory(db, lambda: ManagerDeps(settings=stored_settings(db))).unit() as house:
        return house.memory.vector_database()


def checkpoint_path(data_dir: str | Path) -> Path:
    return Path(data_dir).expanduser().resolve() / "checkpoints.sqlite"
