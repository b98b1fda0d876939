"""The model registry at run time: which model is primary, and each model's priority, enabled and is_validator.

Choices are persisted in the `config` table — `repos.config.selected_llm` (the primary model) and
`repos.config.llm_overrides()` — and applied at once to the registry of the process that made them
(`ManagerDeps.llms`, when it has one) and by every other process at its next tick (nodes/context.py `Services.refresh`).
The persona (`llm_registry.select/update`),
the operator (`run.py llm …`) and the web app's Controls page make the same change here. `ask` starts a question
to another model on a background thread (the persona's `llm_task.ask`).

Models are also added at run time (`add`: Controls → "Add a model", `POST /api/llms`, `run.py llm add`) after a
health check, and removed again (`remove`): their entries are kept in the `config` table (`repos.config.added_llms()`)
and join the registry of every process (graph/services.py at start, `Services.refresh` at each tick). An API key is
never in the database: it is written to `<data dir>/secrets/llm-<id>.key` (mode 0600) and the entry keeps only that
path (or, from the command line, the name of an environment variable holding it).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from memory.models import ProcessLog, ProcessRun
from memory.secrets import FileSecretStore

if TYPE_CHECKING:
    from llm import LLMRegistry
    from managers import Managers
    from persona.settings import Settings

CHANGEABLE = ("priority", "enabled", "is_validator")
ADDED_PRIORITY = 50  # a model added at run time thinks before the embedded one (0), after the operator's server (100)
SECRETS_DIR = "secrets"  # under the data dir: one 0600 file per model key, never in the database, a page or an export


RESERVED_IDS = ("selected", "local")  # /api/llms/selected and /api/llms/local are routes, not models


def model_slug(text: str) -> str:
    """An id from a name or a model: lower case letters, digits, dots and dashes."""
    slug = re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-.")
    return (slug or "model")[:60]


def write_secret(directory: Path, name: str, secret: str) -> Path:
    """A secret in its own file readable by the owner only (0600, created so: never world-readable in between)."""
    store = FileSecretStore(directory)
    store.put(name, secret.encode("utf-8"))
    return store.path(name)


class RegistryError(ValueError):
    """A change the registry refuses (no such model, the last enabled one disabled)."""


class ModelNotFound(RegistryError):
    """No model by that id."""


class ServerCheckFailed(RegistryError):
    """The server did not pass the health check (its model list and one short completion): nothing was saved."""


class ModelRow(TypedDict):
    """A registered model with its persisted choices and its last call."""

    id: str
    provider: str
    model: str
    priority: int
    enabled: bool
    is_validator: bool
    trust_score: float
    selected: bool
    primary: bool
    last_call_ok: bool | None


@dataclass(frozen=True)
class ModelHealth:
    """A registered model as the controls show it: its choices and how its recent calls went."""

    id: str
    provider: str
    model: str
    priority: int
    enabled: bool
    is_validator: bool
    selected: bool
    trust_score: float | None
    base_url: str | None
    calls: int
    failures: int
    last_ok: bool | None
    last_error: str | None
    last_latency_ms: float | None
    added: bool

    @property
    def healthy(self) -> bool | None:
        return self.last_ok


class ModelManager:
    """The run-time choices of models, in one unit of work."""

    def __init__(self, house: Managers) -> None:
        self.repos = house.repos
        self.llms: LLMRegistry | None = house.deps.llms
        self.house_deps = house.deps

    def overrides(self) -> dict[str, dict[str, Any]]:
        """The persisted changes, by model id."""
        return self.repos.config.llm_overrides()

    def selected(self) -> str | None:
        """The persisted primary model (None: the highest priority)."""
        return self.repos.config.selected_llm

    def select(self, llm_id: str | None) -> str:
        """Make `llm_id` the primary model (None: back to the highest priority), persisted and applied; what changed.
        RegistryError when it is not an enabled model."""
        repos = self.repos
        rows = {r.id: r for r in repos.llm_registry.all()}
        if llm_id is not None:
            changes = self.overrides()
            row = rows.get(llm_id)
            enabled = changes.get(llm_id, {}).get("enabled", row.enabled if row is not None else False)
            if row is None or not enabled:
                have = ", ".join(i for i, r in rows.items() if changes.get(i, {}).get("enabled", r.enabled))
                raise RegistryError(f"no enabled model {llm_id!r} (enabled: {have})")
        if self.llms is not None:
            self.llms.select(llm_id)
        repos.config.selected_llm = llm_id
        return f"primary model: {llm_id or 'the highest priority'}"

    def update(
        self, llm_id: str, *, priority: int | None = None, enabled: bool | None = None, is_validator: bool | None = None
    ) -> str:
        """Change a model's priority / enabled / is_validator (None: unchanged), persisted and applied; what changed.
        RegistryError when there is no such model or no model would be left enabled."""
        repos = self.repos
        changes: dict[str, Any] = {
            k: v
            for k, v in (("priority", priority), ("enabled", enabled), ("is_validator", is_validator))
            if v is not None
        }
        registered = repos.llm_registry.all()
        if not any(r.id == llm_id for r in registered):
            raise RegistryError(f"no model {llm_id!r} (have: {', '.join(r.id for r in registered)})")
        persisted = self.overrides()
        merged = {**persisted.get(llm_id, {}), **changes}
        if self.llms is not None:
            try:
                self.llms.apply({llm_id: merged}, repos.config.selected_llm)
            except ValueError as exc:
                raise RegistryError(str(exc)) from None
        else:
            state = {r.id: persisted.get(r.id, {}).get("enabled", r.enabled) for r in registered}
            state[llm_id] = merged.get("enabled", state[llm_id])
            if not any(state.values()):
                raise RegistryError("every LLM of the registry would be disabled: enable another first")
        repos.config.set_llm_override(llm_id, merged)
        repos.llm_registry.upsert(llm_id, **changes)
        if changes.get("enabled") is False and repos.config.selected_llm == llm_id:
            repos.config.selected_llm = None
        return f"{llm_id}: " + ", ".join(f"{k} = {v}" for k, v in changes.items())

    def listing(self, primary: str | None = None) -> list[ModelRow]:
        """Every registered model with its persisted choices and its last call; enabled first, by priority."""
        repos = self.repos
        changes, selected = self.overrides(), self.selected()
        recent = repos.llm_calls.recent(200)
        rows: list[ModelRow] = []
        for r in repos.llm_registry.all():
            mine = changes.get(r.id, {})
            last = next((c for c in reversed(recent) if c.llm_id == r.id), None)
            rows.append(
                ModelRow(
                    id=r.id,
                    provider=r.provider,
                    model=r.model,
                    priority=int(mine.get("priority", r.priority)),
                    enabled=bool(mine.get("enabled", r.enabled)),
                    is_validator=bool(mine.get("is_validator", r.is_validator)),
                    trust_score=r.trust_score,
                    selected=r.id == selected,
                    primary=r.id == primary,
                    last_call_ok=None if last is None else last.ok,
                )
            )
        return sorted(rows, key=lambda row: (not row["enabled"], -row["priority"], row["id"]))

    # -- the run's registry ------------------------------------------------------------------------------------------

    def with_added(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The configured models and, after them, the ones added at run time (Controls, `run.py llm add`, the API)."""
        added = self.repos.config.added_llms()
        configured = {e["id"] for e in entries}
        return entries + [
            {**entry, "id": llm_id, "added": True} for llm_id, entry in added.items() if llm_id not in configured
        ]

    def sync_registry(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Record the run's models in `llm_registry` (the missing ones disabled); trust scores learnt earlier are
        kept. The entries with their trust."""
        merged = []
        known = {e.id: e for e in self.repos.llm_registry.all()}
        for entry in entries:
            existing = known.get(entry["id"])
            trust = existing.trust_score if existing is not None else float(entry.get("trust_score", 1.0))
            self.repos.llm_registry.upsert(
                entry["id"],
                provider=entry.get("provider", "llamacpp"),
                model=entry.get("model", ""),
                priority=int(entry.get("priority", 0)),
                is_validator=bool(entry.get("is_validator", False)),
                trust_score=trust,
                enabled=True,
                config=entry.get("config") or {},
            )
            merged.append({**entry, "trust_score": trust})
        self.repos.llm_registry.disable_missing([e["id"] for e in entries])
        return merged

    def record_call(self, call: dict[str, Any]) -> None:
        """A model call, for the accounting (tokens, latency, failures: the controls and the tick's totals)."""
        self.repos.llm_calls.record(
            **{
                k: call.get(k)
                for k in (
                    "thread_id",
                    "tick",
                    "purpose",
                    "llm_id",
                    "provider",
                    "model",
                    "prompt_tokens",
                    "completion_tokens",
                    "cached_tokens",
                    "latency_ms",
                    "ok",
                    "error",
                )
            }
        )

    def outage(self, error: str, *, thread_id: str) -> None:
        """No model answered: the process log says so until one answers again (`answered`)."""
        self.repos.processes.add("llm.outage", error[:500], status="offline", thread_id=thread_id)

    def answered(self, llm_id: str, *, failed_over_from: list[str], degraded_ticks: int, thread_id: str) -> None:
        """A model answered after others did not (failover) or after degraded ticks (recovery): the persona sees it
        in its process log, `inspect` shows it; the outage's open entries close."""
        processes = self.repos.processes
        if degraded_ticks:
            processes.close([p.id for p in processes.open(thread_id) if p.name == "llm.outage"])
            processes.add(
                "llm.recovered",
                f"{llm_id} answers again after {degraded_ticks} degraded tick(s)",
                status="close",
                thread_id=thread_id,
            )
        if failed_over_from:
            processes.add(
                "llm.failover",
                f"{', '.join(failed_over_from)} did not answer; {llm_id} took over",
                status="close",
                thread_id=thread_id,
            )

    def health(self) -> list[ModelHealth]:
        """Every registered model with its persisted choices and how its last 200 calls went, in registry order."""
        recent = self.repos.llm_calls.recent(200)
        chosen = {row["id"]: row for row in self.listing()}
        added = self.repos.config.added_llms()
        out = []
        for entry in self.repos.llm_registry.all():
            calls = [c for c in recent if c.llm_id == entry.id]
            last = calls[-1] if calls else None
            mine = chosen[entry.id]
            out.append(
                ModelHealth(
                    id=entry.id,
                    provider=entry.provider,
                    model=entry.model,
                    priority=mine["priority"],
                    enabled=mine["enabled"],
                    is_validator=mine["is_validator"],
                    selected=mine["selected"],
                    trust_score=entry.trust_score,
                    base_url=(entry.config or {}).get("base_url"),
                    calls=len(calls),
                    failures=sum(1 for c in calls if not c.ok),
                    last_ok=last.ok if last else None,
                    last_error=last.error if last else None,
                    last_latency_ms=last.latency_ms if last else None,
                    added=entry.id in added,
                )
            )
        return out

    def run_choices(self) -> tuple[dict[str, dict[str, Any]], str | None, dict[str, Any]]:
        """The model choices made at run time, in any process: (overrides by id, the selected one, models added)."""
        return self.repos.config.llm_overrides(), self.repos.config.selected_llm, self.repos.config.added_llms()

    def set_trust(self, llm_id: str, trust: float) -> None:
        """A validator's trust as its votes moved it (nodes/reflexes/validation.py), kept for the next run."""
        self.repos.llm_registry.upsert(llm_id, trust_score=trust)

    def registered(self, llm_id: str) -> bool:
        return any(r.id == llm_id for r in self.repos.llm_registry.all())

    def registered_urls(self) -> set[str | None]:
        """The base URLs of the registered models (a local server already known is not offered again)."""
        return {(e.config or {}).get("base_url") for e in self.repos.llm_registry.all()}

    def add(
        self,
        base_url: str,
        model: str,
        *,
        name: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        check: bool = True,
    ) -> ModelRow:
        """A model on an OpenAI-compatible server, added to the registry after a health check (its model list and
        one short completion; `check=False` skips it); persisted, applied here and by a running loop at its next tick.
        The key, when given, goes to a 0600 file in the data dir's secrets/ (the entry keeps only its path);
        `api_key_env` names a variable instead. ServerCheckFailed when the check fails, RegistryError when the id is
        taken."""
        from llm.discovery import check_server, normalize_base_url

        try:
            root = normalize_base_url(base_url)
        except ValueError as exc:
            raise ServerCheckFailed(str(exc)) from None
        model = model.strip()
        if not model:
            raise RegistryError("model: name the model the server should run")
        llm_id = model_slug(name or model)
        if llm_id in RESERVED_IDS:
            raise RegistryError(f"{llm_id!r} names a route, not a model: give it another name")
        if llm_id in {r.id for r in self.repos.llm_registry.all()}:
            raise RegistryError(f"a model {llm_id!r} is already registered: give it another name")
        if check:
            key = api_key if api_key is not None else (os.environ.get(api_key_env) if api_key_env else None)
            result = check_server(root, model, key)
            if not result.ok:
                raise ServerCheckFailed(result.error)
        config: dict[str, Any] = {"base_url": root, "api": "chat"}
        if api_key:
            secrets = Path(self._settings("a model's API key").data_dir).expanduser() / SECRETS_DIR
            config["api_key_file"] = str(write_secret(secrets, f"llm-{llm_id}.key", api_key).resolve())
        elif api_key_env:
            config["api_key_env"] = api_key_env
        entry = {
            "id": llm_id,
            "provider": "openai",
            "model": model,
            "priority": ADDED_PRIORITY,
            "config": config,
            "description": name or "",
        }
        self.repos.config.set_added_llm(llm_id, entry)
        self.repos.llm_registry.upsert(
            llm_id,
            provider="openai",
            model=model,
            priority=ADDED_PRIORITY,
            is_validator=False,
            trust_score=1.0,
            enabled=True,
            config=config,
            description=name or "",
        )
        if self.llms is not None:
            self.llms.adopt(self.repos.config.added_llms())
        return next(row for row in self.listing() if row["id"] == llm_id)

    def remove(self, llm_id: str) -> str:
        """Forget a model added at run time (and its key file); RegistryError for a configured one or none."""
        added = self.repos.config.added_llms()
        if llm_id not in added:
            known = {r.id for r in self.repos.llm_registry.all()}
            if llm_id in known:
                raise RegistryError(
                    f"{llm_id!r} is configured (config.yaml or the command line), not added here: disable it instead"
                )
            raise ModelNotFound(f"no model {llm_id!r}")
        key_file = (added[llm_id].get("config") or {}).get("api_key_file")
        rest = {i: e for i, e in added.items() if i != llm_id}
        if self.llms is not None:
            try:
                self.llms.adopt(rest)
            except ValueError as exc:
                self.llms.adopt(added)
                raise RegistryError(str(exc)) from None
        self.repos.config.set_added_llm(llm_id, None)
        self.repos.config.set_llm_override(llm_id, None)
        if self.repos.config.selected_llm == llm_id:
            self.repos.config.selected_llm = None
        self.repos.llm_registry.remove(llm_id)
        if key_file:
            Path(key_file).unlink(missing_ok=True)
        return f"{llm_id}: removed"

    def _settings(self, what: str) -> Settings:
        return self.house_deps.settings

    def ask(
        self, llm_id: str, question: str, *, max_tokens: int, thread_id: str, task_id: int | None = None
    ) -> tuple[ProcessLog, ProcessRun]:
        """A question to another model, as a pending process and its background run (the caller launches the run
        once the transaction commits); RegistryError when the model is not enabled here."""
        if self.llms is not None and llm_id not in self.llms.ids:
            raise RegistryError(f"no enabled model {llm_id!r} (have: {', '.join(self.llms.ids)})")
        row = self.repos.processes.add(
            "llm_task",
            f"asked {llm_id}: {question[:200]}",
            status="pending",
            thread_id=thread_id,
            tags=["background", "llm_task"],
            llm_id=llm_id,
            task_id=task_id,
        )
        run = self.repos.runs.add(
            row.id,
            "llm_task",
            thread_id=thread_id,
            spec={"llm": llm_id, "question": question, "max_tokens": max_tokens},
        )
        return row, run
