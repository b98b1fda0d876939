"""What a step receives through LangGraph's Runtime: `runtime.context.services`.

`AnimaContext` is the graph's `context_schema`. Its plain fields describe where things are (so Studio
can show and accept them as JSON); `services` carries the opened dependencies — database, LLM registry,
persona, settings, clock — injected by whoever compiles the graph (run.py, `graph.build_agent`, the
Studio factory, tests). Nothing here is opened at import time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

from langgraph.runtime import Runtime

from llm import LLMRegistry, Sampling
from memory import Database
from persona import Persona


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class TickSettings:
    """Per-run settings merged from persona config.yaml, the playbook and the command line."""

    responses: int = 10
    notes_mode: str = "auto"  # auto | manual
    notes_limit: int = 10
    sampling: Sampling = field(default_factory=Sampling)
    context_window: int | None = None  # None: the primary model's window
    window_ratio: float = 1.0  # the thread's share of the model window (Stelis children < 1)
    emotion_reflex: bool = True
    emotions: list[str] = field(default_factory=lambda: ["joy", "curiosity", "calm", "sadness", "anxiety"])
    stagnation_threshold: float = 0.85  # similarity at or above: stagnant, decided without an LLM
    stagnation_soft_threshold: float = 0.62  # between novel_below and the threshold: the flag point
    novel_below: float = 0.5  # similarity below: new, decided without an LLM
    compare_with_llm: bool = True  # ask the HMP §6 comparison when the cheap signals are uncertain
    emotion_every: int = 2  # a fresh emotional rating at least every N outputs (1 = every output)
    stagnation_pause_s: float = 60.0  # the "radical pause" mechanism
    validation_threshold: float = 1.0
    command_thresholds: dict[str, float] = field(default_factory=dict)  # command type or family -> minimum rating
    trust_drift: float = 0.05  # a validator far from the consensus loses this much trust
    trust_recovery: float = 0.01  # one that agrees regains this much (up to 1)
    min_trust: float = 0.3  # below it a validator is excluded
    compress_at_chars: int = 75_000
    process_timeout_s: float = 600.0
    shell_enabled: bool = False
    channel: str = "terminal"  # where the human reads the persona (the prompt's channel hint)

    @classmethod
    def from_persona(cls, persona: Persona, **overrides: Any) -> "TickSettings":
        cfg = persona.config
        cycle = cfg.get("cycle") or {}
        reflexes = cfg.get("reflexes") or {}
        settings = cls(
            responses=int(cycle.get("responses", 10)),
            notes_mode=str(cycle.get("notes_mode", "auto")),
            sampling=Sampling.from_dict(cfg.get("sampling")),
            emotion_reflex=bool(reflexes.get("emotion", True)),
            emotions=list(cfg.get("emotions") or cls().emotions),
            stagnation_threshold=float(reflexes.get("stagnation_threshold", 0.85)),
            stagnation_soft_threshold=float(reflexes.get("stagnation_soft_threshold", 0.62)),
            novel_below=float(reflexes.get("novel_below", 0.5)),
            compare_with_llm=bool(reflexes.get("compare_with_llm", True)),
            emotion_every=max(1, int(reflexes.get("emotion_every", 2))),
            stagnation_pause_s=float(reflexes.get("stagnation_pause_s", 60.0)),
            validation_threshold=float(reflexes.get("validation_threshold", 1.0)),
            command_thresholds={str(k): float(v) for k, v in (reflexes.get("command_thresholds") or {}).items()},
            trust_drift=float(reflexes.get("trust_drift", 0.05)),
            trust_recovery=float(reflexes.get("trust_recovery", 0.01)),
            min_trust=float(reflexes.get("min_trust", 0.3)),
            compress_at_chars=int((cfg.get("continuation") or {}).get("compress_at_chars", 75_000)),
        )
        for name, value in overrides.items():
            if value is not None:
                setattr(settings, name, value)
        return settings


@dataclass
class Services:
    db: Database
    llms: LLMRegistry
    persona: Persona
    settings: TickSettings
    clock: Callable[[], datetime] = utcnow
    memory: Any = None  # memory.index.MemoryIndex: hybrid retrieval over every tier (None: recall is off)

    def sync_memory(self) -> None:
        """Index what the last transaction wrote; a failure is logged and repaired by the next sync."""
        if self.memory is not None:
            try:
                self.memory.sync()
            except Exception:
                import logging

                logging.getLogger(__name__).exception("memory index sync failed; it is retried on the next sync")

    def window_tokens(self, thread_ratio: float = 1.0) -> int:
        """The thread's share of the model window: window × run ratio × Π window_ratio of its Stelis lineage."""
        base = self.settings.context_window or self.llms.primary().context_window
        return int(base * self.settings.window_ratio * thread_ratio)


@dataclass
class AnimaContext:
    data_dir: str | None = None
    db_url: str | None = None
    persona_dir: str | None = None
    llm_url: str | None = None
    model: str | None = None
    services: Any = field(default=None, repr=False, compare=False)

    def resolve_services(self) -> "Services | None":
        """Hook for contexts that open their services on first use (the Studio server's); called from a step."""
        return None


class MissingServices(RuntimeError):
    pass


class ContextBudgetError(RuntimeError):
    """The parts of a prompt that cannot be dropped do not fit the thread's window."""


def services_of(runtime: Runtime[AnimaContext]) -> Services:
    context = runtime.context
    services = getattr(context, "services", None)
    if services is None and context is not None:
        services = context.services = context.resolve_services()
    if services is None:
        raise MissingServices(
            "no services in the run context: compile the graph with graph.build_agent(...) "
            "or serve it with `langgraph dev` (graph/studio.py opens them)"
        )
    return services
