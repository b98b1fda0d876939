"""A script in a sandbox: a separate process in its own session (so the whole group can be killed), its working
directory a fresh folder the caller gives (inside the data dir), an environment of a few harmless variables (no
API key, token or password is inherited), and resource limits — address space, CPU seconds, file size, open
files, no core dumps — plus a wall-clock timeout. Its stdout and stderr go to one file; what comes back is cut
to a budget (the head and the tail, which say the most)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

LANGUAGES = {"python": ("script.py", [sys.executable, "-I", "-u"]), "sh": ("script.sh", ["/bin/sh"])}
OUTPUT_FILE = "output.txt"
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_OPEN_FILES = 256


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 60.0
    memory_mb: int = 512
    output_chars: int = 8000


@dataclass
class Outcome:
    exit_code: int | None
    status: str  # ok | error | timeout | killed
    output: str
    seconds: float


def environment(workdir: Path) -> dict[str, str]:
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(workdir), "TMPDIR": str(workdir), "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8"}


# Sets the limits, then becomes the script (exec): a launcher process rather than preexec_fn, which is not safe in a
# process with threads (the loop has several).
LAUNCHER = """
import os, resource, sys
memory, cpu, fsize, nofile = (int(x) for x in sys.argv[1:5])
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
os.execv(sys.argv[5], sys.argv[5:])
"""


def _launcher(limits: Limits) -> list[str]:
    return [sys.executable, "-I", "-c", LAUNCHER, str(limits.memory_mb * 1024 * 1024), str(int(limits.timeout_s) + 1),
            str(MAX_FILE_BYTES), str(MAX_OPEN_FILES)]


def start(language: str, code: str, args: list[str], workdir: Path, limits: Limits) -> subprocess.Popen:
    """Write the script into `workdir` and start it; the returned process leads its own process group."""
    if language not in LANGUAGES:
        raise ValueError(f"no such script language {language!r} (one of {', '.join(LANGUAGES)})")
    workdir.mkdir(parents=True, exist_ok=True)
    name, command = LANGUAGES[language]
    (workdir / name).write_text(code, encoding="utf-8")
    with open(workdir / OUTPUT_FILE, "wb") as output:
        return subprocess.Popen([*_launcher(limits), *command, name, *args], cwd=workdir, env=environment(workdir),
                                stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)


def kill_group(pid: int, sig: int = signal.SIGKILL) -> bool:
    try:
        os.killpg(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def read_output(workdir: Path, limit: int) -> str:
    path = workdir / OUTPUT_FILE
    if not path.exists():
        return ""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        if size <= limit:
            return handle.read().decode("utf-8", "replace")
        head = handle.read(limit // 2).decode("utf-8", "replace")
        handle.seek(size - limit // 2)
        tail = handle.read().decode("utf-8", "replace")
    return f"{head}\n… ({size - limit:,} bytes of output cut) …\n{tail}"


def wait(proc: subprocess.Popen, workdir: Path, limits: Limits, started: float | None = None) -> Outcome:
    """Wait for the script (killing its group at the timeout); its exit and output within the budget."""
    started = started or time.monotonic()
    timed_out = False
    try:
        proc.wait(timeout=max(0.0, limits.timeout_s - (time.monotonic() - started)))
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(proc.pid)
        proc.wait(timeout=30)
    code = proc.returncode
    if timed_out:
        status = "timeout"
    elif code == 0:
        status = "ok"
    elif code is not None and code < 0 and -code in (signal.SIGKILL, signal.SIGTERM):
        status = "killed"
    else:
        status = "error"
    output = read_output(workdir, limits.output_chars)
    if code is not None and code < 0 and -code == signal.SIGXCPU:
        output += "\n(stopped: CPU time limit)"
    return Outcome(exit_code=code, status=status, output=output, seconds=round(time.monotonic() - started, 3))
