"""The real parts of a deployment for tests and bench/scale.py: a `chroma run` server, worker processes (`run.py
worker`), and a persona whose reflexes stay out of the way of a scripted model (every wait bounded, every process
stopped)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import yaml

from tests.integration.servers import ROOT, free_port, wait_http

# A thought a scripted model gives every persona: `{n}` makes each answer (and its diary entry) unique.
THOUGHT = (
    "Thought {n}: the harbour lights count the boats.\n# Commands:\n"
    '[{"type": "diary.add", "args": {"text": "entry {n}"}}]\n# End commands'
)


@contextmanager
def chroma_server():
    """`chroma run` on a free loopback port over a throwaway directory."""
    base = Path(tempfile.mkdtemp(prefix="anima-chroma-"))
    port = free_port()
    chroma = Path(sys.executable).with_name("chroma")
    with open(base / "chroma.log", "w") as log:  # a file, never a pipe: a full pipe would stop the server mid-request
        proc = subprocess.Popen(
            [str(chroma), "run", "--path", str(base / "data"), "--host", "127.0.0.1", "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
        )
    try:
        wait_http(f"http://127.0.0.1:{port}/api/v2/heartbeat", 60, proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        shutil.rmtree(base, ignore_errors=True)


def write_persona(
    directory: Path,
    *,
    name: str = "Tester",
    pause_s: float = 0.0,
    thinking: str = "continuous",
    quiet_ceiling_s: float | None = None,
) -> Path:
    """The shipped persona, its reflexes quiet: no emotion calls, only an identical thought is stagnant (a
    scripted model repeats itself), no radical pause. It thinks every tick (`thinking`: what the fleet's tests and
    benchmarks measure is ticks); an idle persona's is `eventful`."""
    shutil.copytree(ROOT / "persona" / "default", directory)
    config_path = directory / "config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["name"] = name
    config.setdefault("cycle", {})["pause_s"] = pause_s
    config["cycle"]["thinking"] = thinking
    if quiet_ceiling_s is not None:
        config["cycle"]["quiet_ceiling_s"] = quiet_ceiling_s
    config.setdefault("reflexes", {}).update(
        emotion=False,
        compare_with_llm=False,
        stagnation_threshold=1.0,
        stagnation_soft_threshold=1.0,
        novel_below=0.99,
        stagnation_pause_s=0,
    )
    config.setdefault("dreaming", {})["enabled"] = False
    config_path.write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False))
    return directory


def anima(*args: str, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    """A short `run.py` command (personas, say), bounded."""
    return subprocess.run(
        [sys.executable, "run.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "200", **(env or {})},
    )


class Workers:
    """`run.py worker` processes; each one's stderr goes to a file of its own (read it with `log`)."""

    def __init__(
        self,
        db_url: str,
        chroma_url: str,
        llm_url: str,
        cache_dir: Path,
        *,
        concurrency: int = 1,
        extra: tuple[str, ...] = (),
    ):
        self.db_url, self.chroma_url, self.llm_url = db_url, chroma_url, llm_url
        self.cache_dir, self.concurrency, self.extra = cache_dir, concurrency, extra
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []

    def start(self) -> subprocess.Popen:
        log = self.cache_dir / f"worker-{len(self.procs)}.log"
        handle = open(log, "w")
        proc = subprocess.Popen(
            [
                sys.executable,
                "run.py",
                "worker",
                "--db",
                self.db_url,
                "--chroma-url",
                self.chroma_url,
                "--llm-url",
                self.llm_url,
                "--model",
                "scripted",
                "--no-fallback",
                "--concurrency",
                str(self.concurrency),
                "-v",
                *self.extra,
            ],
            cwd=ROOT,
            stdout=handle,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "ANIMA_FLEET_CACHE": str(self.cache_dir), "COLUMNS": "200"},
        )
        handle.close()
        self.procs.append(proc)
        self.logs.append(log)
        return proc

    def log(self, index: int) -> str:
        return self.logs[index].read_text(errors="replace")

    def kill(self, index: int) -> None:
        self.procs[index].send_signal(signal.SIGKILL)
        self.procs[index].wait(timeout=30)

    def stop(self, timeout: float = 30) -> None:
        stop_all(self.procs, timeout)

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def stop_all(procs: list[subprocess.Popen], timeout: float = 30) -> None:
    """SIGTERM to every process still running; SIGKILL to those still running `timeout` seconds later."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def wait_until(check, timeout: float, what: str, every: float = 0.5):
    """Poll `check()` until it returns something truthy; a test fails (TimeoutError) after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(every)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


@contextmanager
def schemas_seen(engine):
    """Every statement run on `engine`'s pool meanwhile, with the schemas PostgreSQL resolved its table names in
    (`current_schemas(false)`, asked on the same connection right after): [(statement, [schema, …]), …]."""
    from sqlalchemy import event

    seen: list[tuple[str, list[str]]] = []

    def after(conn, cursor, statement, *_):
        seen.append((statement, list(cursor.connection.execute("SELECT current_schemas(false)").fetchone()[0])))

    event.listen(engine, "after_cursor_execute", after)
    try:
        yield seen
    finally:
        event.remove(engine, "after_cursor_execute", after)
