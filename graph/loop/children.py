"""Spawned children started beside the parent's loop (HMP "Автозагрузка и запуск": the child's start command in an
autostart, the child's process started at once), when the operator switches it on (config.yaml
`spawn.autostart: true`).

At the parent's start, for each child in its lineage (`lineage/children`, persona/spawn.py + managers/spawn.py):
the child's peer row for its parent gets the parent's current A2A address (the web app this run serves), then the
child's own run is started — `run.py --persona <its dir> --data-dir <its data dir> --port <its port>` (its
database on PostgreSQL) — with the parent's model settings in its environment (the run fields the parent was
given: a model server, the embedded model or not) and nothing of the parent's places; its output goes to
`<its data dir>/run.log`. The start waits until the child's web app answers (`spawn.start_timeout_s`); a child
that does not is stopped and named in the log, and the parent goes on. At the parent's stop each child is asked
to stop (SIGTERM: it drains its tick), then killed after a grace time.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from graph.services import open_settings
from managers import ManagerDeps, ManagerFactory
from managers.loop import LineageChild
from memory import Database
from persona.settings import Overrides, Settings

log = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parents[2]  # where run.py is
STOP_GRACE_S = 20.0
# the parent's run settings a child thinks with, passed as ANIMA_* (persona/settings.py layer 4)
MODEL_FIELDS = (
    "llm_url",
    "model",
    "llm_api",
    "api_key_env",
    "context_window",
    "embedded",
    "embedded_model",
    "embedded_context_window",
    "cache_dir",
    "embed_url",
    "embed_model",
    "chroma_url",
)
# the parent's own places and door settings, never handed to a child
NOT_INHERITED = (
    "ANIMA_DATA_DIR",
    "ANIMA_PERSONA_DIR",
    "ANIMA_DB_URL",
    "ANIMA_WEB_PORT",
    "ANIMA_API_TOKEN",
    "ANIMA_SPAWN__AUTOSTART",
)


@dataclass
class ChildRun:
    name: str
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/api/loop", timeout=2) as response:  # noqa: S310 - our own child, local
            return bool(response.status == 200)
    except OSError:
        return False


def _child_database(entry: LineageChild, parent_db: Database) -> str | None:
    """A PostgreSQL child's URL: the parent's server with the child's database (its name is all the lineage keeps);
    None for SQLite (the child's data dir holds it)."""
    if not entry.db_name or not parent_db.is_postgres:
        return None
    return str(parent_db.engine.url.set(database=entry.db_name).render_as_string(hide_password=False))


def _environment(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.upper() not in NOT_INHERITED}
    for name in MODEL_FIELDS:
        value = getattr(settings, name, None)
        if value is not None:
            env[f"ANIMA_{name.upper()}"] = json.dumps(value) if isinstance(value, bool) else str(value)
    env["ANIMA_SPAWN__AUTOSTART"] = "false"  # a child starts no children of its own from here
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return env


class Children:
    """The children this run started (module doc)."""

    def __init__(self, db: Database, settings: Settings) -> None:
        self.db, self.settings = db, settings
        self.runs: list[ChildRun] = []

    def start(self, parent_url: str | None) -> Children:
        with ManagerFactory(self.db, lambda: ManagerDeps(settings=self.settings)).reading() as house:
            children = house.loop.lineage_children()
        for entry in children:
            if not entry.port or not entry.data_dir or not entry.persona_dir or not Path(entry.persona_dir).is_dir():
                log.warning(
                    "spawn: child %s has no port or places of its own (born before autostart): start it by hand",
                    entry.name,
                )
                continue
            try:
                run = self._start_one(entry, entry.port, entry.data_dir, entry.persona_dir, parent_url)
            except (OSError, ValueError) as exc:
                log.warning("spawn: child %s did not start: %s", entry.name, exc)
                continue
            if run is not None:
                self.runs.append(run)
        return self

    def _start_one(
        self, entry: LineageChild, port: int, where: str, persona_dir: str, parent_url: str | None
    ) -> ChildRun | None:
        name, data_dir = entry.name, Path(where)
        db_url = _child_database(entry, self.db)
        if parent_url:  # the child learns where its parent is served now
            child_db = Database.open(data_dir, db_url)
            try:
                child = Overrides.of(data_dir=str(data_dir), db_url=db_url)
                managers = ManagerFactory(child_db, lambda: ManagerDeps(settings=open_settings(child_db, child)))
                with managers.unit() as house:
                    house.peers.point_parent_at(parent_url)
            finally:
                child_db.close()
        url = f"http://127.0.0.1:{port}"
        command = [
            sys.executable,
            str(ROOT / "run.py"),
            "--persona",
            persona_dir,
            "--data-dir",
            str(data_dir),
            "--port",
            str(port),
        ] + (["--db", db_url] if db_url else [])
        log_path = data_dir / "run.log"
        data_dir.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as out:
            process = subprocess.Popen(
                command,
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=_environment(self.settings),
                start_new_session=True,
            )
        run = ChildRun(name, url, process, log_path)
        deadline = time.monotonic() + self.settings.spawn.start_timeout_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                log.warning("spawn: child %s exited at start (code %s): see %s", name, process.returncode, log_path)
                return None
            if _answers(url):
                log.info("spawn: child %s runs at %s", name, url)
                return run
            time.sleep(0.3)
        log.warning(
            "spawn: child %s did not answer at %s in %.0f s: stopped (see %s)",
            name,
            url,
            self.settings.spawn.start_timeout_s,
            log_path,
        )
        self._stop(run)
        return None

    @staticmethod
    def _stop(run: ChildRun) -> None:
        if run.process.poll() is not None:
            return
        run.process.send_signal(signal.SIGTERM)
        try:
            run.process.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            run.process.kill()
            run.process.wait(10)

    def stop(self) -> None:
        for run in self.runs:
            self._stop(run)
        self.runs = []


def start_children(db: Database, settings: Settings, parent_url: str | None) -> Children | None:
    """The children beside this loop when `spawn.autostart` is on (None when it is off)."""
    if not settings.spawn.autostart:
        return None
    return Children(db, settings).start(parent_url)


__all__ = ["Children", "start_children"]
