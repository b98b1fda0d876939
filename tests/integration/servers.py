"""Starting real servers on loopback for integration tests (bounded waits; always stopped)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(
                f"server exited early with {proc.returncode}: {proc.stdout.read() if proc.stdout else ''}"
            )
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status < 500:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer within {timeout}s")


def wait_port(port: int, timeout: float, proc: subprocess.Popen | None = None) -> None:
    """Until something listens on 127.0.0.1:`port` (for servers whose every plain GET is an HTTP error)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited early with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"nothing listened on port {port} within {timeout}s")


@contextmanager
def llama_cpp_server(model_path: Path, port: int | None = None, extra: tuple[str, ...] = ()):
    """llama-cpp-python's OpenAI-compatible server (its [server] extras) on `model_path`; `extra`: more of its flags
    (--model_alias, --api_key…)."""
    port = port or free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model_path),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "4096",
            "--verbose",
            "False",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    try:
        # with --api_key every /v1 route answers 401 until the key is sent: its open /docs page says it is up
        wait_http(f"http://127.0.0.1:{port}/{'docs' if '--api_key' in extra else 'v1/models'}", 120, proc)
        yield f"http://127.0.0.1:{port}/v1", proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


@contextmanager
def postgres_server(settings: dict[str, str] | None = None):
    """A throwaway PostgreSQL cluster on 127.0.0.1 (initdb + pg_ctl; as root, via the postgres user); `settings`:
    server settings given at start (`-c name=value`, e.g. shared_preload_libraries for bench/scale.py)."""
    import pwd
    import shutil
    import tempfile

    base_dir = Path(tempfile.mkdtemp(prefix="anima-pg-"))  # not under pytest's 0700 tmp: postgres must reach it

    bindir = Path("/usr/lib/postgresql")
    initdb = shutil.which("initdb") or next(iter(sorted(bindir.glob("*/bin/initdb"))), None)
    if initdb is None:
        raise RuntimeError("PostgreSQL server binaries not found (apt-get install postgresql)")
    pg_ctl = str(Path(initdb).with_name("pg_ctl"))
    data = base_dir / "pgdata"
    data.mkdir(parents=True)
    prefix: list[str] = []
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(base_dir, user.pw_uid, user.pw_gid)
        os.chown(data, user.pw_uid, user.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    options = "".join(f" -c {name}={value}" for name, value in (settings or {}).items())
    subprocess.run(
        [*prefix, str(initdb), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    subprocess.run(
        [
            *prefix,
            pg_ctl,
            "-D",
            str(data),
            "-w",
            "-t",
            "60",
            "-l",
            str(data / "log"),
            "-o",
            f"-p {port} -h 127.0.0.1 -k {data}{options}",
            "start",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    try:
        subprocess.run(
            [*prefix, "psql", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-c", "CREATE DATABASE anima"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        yield f"postgresql://postgres@127.0.0.1:{port}/anima"
    finally:
        subprocess.run([*prefix, pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(base_dir, ignore_errors=True)


class ScriptedLLM:
    """The handle on a running scripted_llm_server.py: its URL, its script, the requests it saw."""

    def __init__(self, url: str, proc: subprocess.Popen):
        self.url = url  # …/v1
        self.proc = proc
        self.root = url.rsplit("/v1", 1)[0]

    def script(self, *steps: dict, default: dict | None = None, record: bool = True) -> None:
        import json

        request = urllib.request.Request(
            f"{self.root}/script",
            data=json.dumps({"steps": list(steps), "default": default or {"do": "stream"}, "record": record}).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10):
            pass

    def requests(self) -> list[dict]:
        import json

        with urllib.request.urlopen(f"{self.root}/requests", timeout=10) as response:
            return json.loads(response.read())

    def wait_for_requests(self, count: int, timeout: float = 60) -> list[dict]:
        deadline = time.time() + timeout
        while time.time() < deadline:
            seen = self.requests()
            if len(seen) >= count:
                return seen
            time.sleep(0.2)
        raise TimeoutError(f"the scripted server saw {len(self.requests())} request(s), not {count}, within {timeout}s")


@contextmanager
def scripted_llm_server():
    """tests/integration/scripted_llm_server.py on a free loopback port, as its own process."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("scripted_llm_server.py")), str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/v1/models", 30, proc)
        yield ScriptedLLM(f"http://127.0.0.1:{port}/v1", proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


CLI_GUARD_S = 240  # a hang guard for a CLI run against a scripted server, not a timing


def run_cli(llm_url: str, data_dir: Path, *extra: str, ticks: str = "1") -> subprocess.Popen:
    """`run.py` against an OpenAI-compatible server only (no embedded model), in its own process."""
    return subprocess.Popen(
        [
            sys.executable,
            "run.py",
            "--llm-url",
            llm_url,
            "--model",
            "scripted",
            "--no-fallback",
            "--ticks",
            ticks,
            "--data-dir",
            str(data_dir),
            *extra,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "200"},
    )


def finish(proc: subprocess.Popen, guard_s: float = CLI_GUARD_S) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of a CLI run; a run that outlives the guard is killed and the test fails."""
    import pytest

    try:
        out, err = proc.communicate(timeout=guard_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate(timeout=30)
        pytest.fail(f"run.py did not end within {guard_s}s:\n{err[-3000:]}")
    return proc.returncode, out, err


SERVE_START_S = 120.0  # run.py serve: settings, persona, memory index, then the app listens
SERVE_STOP_S = 30.0


@contextmanager
def served_web_app(data_dir: Path, persona_dir: Path | None = None, env: dict[str, str] | None = None):
    """`run.py serve` (the web app alone, no loop) on a free loopback port, its output in a log file; yields its URL
    once /api/loop answers; Ctrl-C after (killed if it outlives SERVE_STOP_S)."""
    import signal

    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    command = [sys.executable, "run.py", "serve", "--data-dir", str(data_dir), "--port", str(port)]
    if persona_dir is not None:
        command += ["--persona", str(persona_dir)]
    log = data_dir / "serve.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "160", **(env or {})},
        )
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_http(f"{url}/.well-known/agent-card.json", SERVE_START_S, proc)  # public even with a token
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"{exc}\n{log.read_text(errors='replace')[-3000:]}") from None
        yield url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=SERVE_STOP_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=SERVE_STOP_S)
