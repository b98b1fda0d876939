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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited early with {proc.returncode}: {proc.stdout.read() if proc.stdout else ''}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status < 500:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer within {timeout}s")


@contextmanager
def llama_cpp_server(model_path: Path, port: int | None = None):
    port = port or free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "4096", "--verbose", "False"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        wait_http(f"http://127.0.0.1:{port}/v1/models", 120, proc)
        yield f"http://127.0.0.1:{port}/v1", proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


@contextmanager
def postgres_server():
    """A throwaway PostgreSQL cluster on 127.0.0.1 (initdb + pg_ctl; as root, via the postgres user)."""
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
    subprocess.run([*prefix, str(initdb), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"],
                   check=True, capture_output=True, timeout=120)
    subprocess.run([*prefix, pg_ctl, "-D", str(data), "-w", "-t", "60", "-l", str(data / "log"),
                    "-o", f"-p {port} -h 127.0.0.1 -k {data}", "start"], check=True, capture_output=True, timeout=120)
    try:
        subprocess.run([*prefix, "psql", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-c",
                        "CREATE DATABASE anima"], check=True, capture_output=True, timeout=60)
        yield f"postgresql://postgres@127.0.0.1:{port}/anima"
    finally:
        subprocess.run([*prefix, pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(base_dir, ignore_errors=True)
