"""The registry of a deployment's personas, as the operator and the web app manage it: add, list, pause, resume,
remove, and a human's note that wakes a persona at once. Each change that should make a persona think (add,
resume, a note) defers a wake tick; pausing cancels what waits and closes its session."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graph.fleet import files, jobs
from graph.fleet.runtime import stop_persona, wait_for_jobs
from managers import ManagerDeps, ManagerFactory
from memory.clock import utcnow
from memory.fleet import Fleet, FleetError, check_name, schema_of
from persona import load_persona
from persona.loader import default_persona_dir
from persona.settings import Overrides, load_settings

if TYPE_CHECKING:
    import procrastinate

    from memory.models import PersonaEntry


@dataclass
class PersonaRow:
    name: str
    state: str
    display_name: str
    playbook: str
    ticks: int
    last_tick_at: str | None
    last_worker: str | None
    next_tick_at: str | None


class Deployment:
    """A deployment's database and job engine, for everyone who is not a worker (the command line, the web app)."""

    def __init__(self, fleet: Fleet, app: procrastinate.App) -> None:
        self.fleet, self.app = fleet, app
        self.scheduler = jobs.Scheduler(app, fleet)

    @classmethod
    def open(cls, url: str) -> Deployment:
        fleet = Fleet.open(url)
        app = jobs.make_app(fleet.libpq_url())
        app.open()
        try:
            jobs.ensure_job_schema(app, fleet)
        except BaseException:
            app.close()
            fleet.close()
            raise
        return cls(fleet, app)

    def close(self) -> None:
        self.app.close()
        self.fleet.close()

    # ---- the registry --------------------------------------------------------------------------------------

    def add(self, name: str, persona_dir: str | Path | None = None, playbook: str = "repl") -> PersonaRow:
        check_name(name)
        directory = Path(persona_dir).expanduser().resolve() if persona_dir else default_persona_dir()
        load_persona(directory)  # a broken persona is refused here, with its file and line
        packed, digest = files.pack(directory)
        with self.fleet.registry() as registry:
            if registry.get(name) is not None:
                raise FleetError(f"persona {name!r} is already in this deployment (run.py personas list)")
            registry.add(name, schema_of(name), playbook=playbook, files=packed, digest=digest)
        self.fleet.database(name).close()  # its schema, created now rather than by the first worker
        self.scheduler.wake(name)
        return self.row(name)

    def rows(self) -> list[PersonaRow]:
        with self.fleet.registry() as registry:
            return [self._row(entry) for entry in registry.list()]

    def row(self, name: str) -> PersonaRow:
        with self.fleet.registry() as registry:
            return self._row(registry.require(name))

    @staticmethod
    def _row(entry: PersonaEntry) -> PersonaRow:
        def at(value: datetime | None) -> str | None:
            return value.isoformat() if value else None

        return PersonaRow(
            name=entry.name,
            state=entry.state,
            display_name=_display_name(entry.files),
            playbook=entry.playbook,
            ticks=entry.ticks,
            last_tick_at=at(entry.last_tick_at),
            last_worker=entry.last_worker,
            next_tick_at=at(entry.next_tick_at) if entry.state == "active" else None,
        )

    def pause(self, name: str) -> PersonaRow:
        with self.fleet.registry() as registry:
            registry.set_state(name, "paused")
        self.scheduler.cancel_waiting(name)
        stop_persona(self.fleet, name, now=utcnow(), status="stopped")
        return self.row(name)

    def resume(self, name: str) -> PersonaRow:
        with self.fleet.registry() as registry:
            registry.set_state(name, "active")
        self.scheduler.wake(name)
        return self.row(name)

    def remove(self, name: str, *, purge: bool = False, chroma_url: str | None = None) -> None:
        """Out of the registry (it thinks no more); with `purge`, its memory, checkpoints and vectors go too."""
        with self.fleet.registry() as registry:
            registry.set_state(name, "paused")
        self.scheduler.cancel_waiting(name)
        if not purge:
            stop_persona(self.fleet, name, now=utcnow(), status="stopped")
        with self.fleet.registry() as registry:
            entry = registry.remove(name)
            if purge:
                registry.drop_schema(entry.schema)
                threads = registry.checkpoint_threads(f"{name}/")
        if purge:
            from graph.checkpoint import close_saver, open_postgres_saver

            saver = open_postgres_saver(self.fleet.libpq_url())
            try:
                for thread in threads:
                    saver.delete_thread(thread)  # LangGraph's own delete, for each of its checkpoint threads
            finally:
                close_saver(saver)
            if chroma_url:
                from memory.retrieval.index import drop_chroma_database

                drop_chroma_database(chroma_url, entry.schema)

    # ---- a persona's work, as a job on a worker --------------------------------------------------------------

    def run_job(self, job_id: int | None, *, timeout_s: float) -> str:
        """Wait for a job a worker runs; its final status (`succeeded`, `failed`, …) or `todo`/`doing` if it did
        not finish in time (no worker running?)."""
        if job_id is None:
            return "not deferred"
        return wait_for_jobs(self.scheduler, [job_id], timeout_s)[job_id]

    def export_session(self, name: str, session_id: int, *, timeout_s: float = 300) -> dict[str, Any]:
        """A session's export made by a worker between the persona's ticks: {"json": …, "markdown": …}."""
        status = self.run_job(self.scheduler.export(name, session_id), timeout_s=timeout_s)
        if status != "succeeded":
            raise FleetError(_job_failed("the export", status))
        database = self.fleet.database(name)
        try:
            with ManagerFactory(database, lambda: ManagerDeps(settings=load_settings())).unit() as house:
                result = house.sessions.take_export(session_id)
        finally:
            database.close()
        if result is None:
            raise FleetError(f"the export of session {session_id} left no result")
        return result

    def index(self, name: str, *, timeout_s: float = 3600) -> None:
        """Embed what was added to the persona's memory (a knowledge-base upload) on a worker, between its ticks."""
        status = self.run_job(self.scheduler.index(name), timeout_s=timeout_s)
        if status != "succeeded":
            raise FleetError(_job_failed("indexing", status))

    # ---- talking to a persona ------------------------------------------------------------------------------

    def wake(self, name: str) -> int | None:
        """A human wrote: the persona thinks now, on whichever worker is free (the engine's NOTIFY)."""
        return self.scheduler.wake(name)

    def store_files(self, name: str, directory: Path) -> str:
        """The persona's edited directory becomes its files in the registry (every worker takes them next job)."""
        packed, digest = files.pack(directory)
        with self.fleet.registry() as registry:
            if registry.digest_of(name) != digest:
                registry.set_files(name, packed, digest)
        return digest

    def persona_dir(self, name: str, cache_dir: str | None = None) -> Path:
        with self.fleet.registry() as registry:
            entry = registry.require(name)
            return files.materialize(name, entry.files or b"", entry.files_digest, cache_dir)

    def overrides_for(self, name: str, overrides: Overrides, cache_dir: str | None = None) -> Overrides:
        """The settings that place `name` on this machine (its files and scratch dir from the cache: `cache_dir`, else
        the `fleet_cache` setting; its secrets sealed in its database, the scratch dir being per machine)."""
        cache_dir = cache_dir or load_settings(overrides=overrides.replace(persona_dir=None)).fleet_cache
        return overrides.replace(
            persona_dir=str(self.persona_dir(name, cache_dir)),
            data_dir=str(files.data_dir(name, cache_dir)),
            db_url=self.fleet.libpq_url(),
            vault="sealed",
        )


def _job_failed(what: str, status: str) -> str:
    if status in ("todo", "doing"):
        return f"{what} did not finish in time ({status}): is a worker running (run.py worker)?"
    return f"{what} {status} on the worker (its log says why)"


def _display_name(packed: bytes | None) -> str:
    """The persona's name from its IDENTITY.md/config (best effort: the registry row is shown either way)."""
    import io
    import tarfile

    from persona.yaml_lines import YamlError, parse_yaml

    if not packed:
        return ""
    try:
        with tarfile.open(fileobj=io.BytesIO(packed), mode="r:gz") as tar:
            member = tar.extractfile("persona/config.yaml")
            config = parse_yaml(member.read().decode("utf-8"), "config.yaml") if member else {}
    except (KeyError, tarfile.TarError, YamlError, OSError, UnicodeDecodeError):
        return ""
    return str(config.get("name") or "") if isinstance(config, dict) else ""
