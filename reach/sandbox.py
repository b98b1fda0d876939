"""A script in a sandbox: a separate process in its own session (so the whole group can be killed), its working
directory a fresh folder the caller gives (inside the data dir), an environment of a few harmless variables (no
API key, token or password is inherited), and resource limits — address space, CPU seconds, file size, open
files, no core dumps — plus a wall-clock timeout. Its stdout and stderr go to one file; what comes back is cut
to a budget (the head and the tail, which say the most).

The process is jailed by bubblewrap (`bwrap`): its own user, mount, pid, ipc, uts, cgroup and network namespaces
(the network only when the operator allows it for that script), no capabilities, no new user namespaces. It sees
a read-only root of just what an interpreter needs — /usr (and the /bin, /lib… links into it), a few files of
/etc, the Python interpreter's own prefix — a fresh /proc, a minimal /dev, small empty tmpfs /tmp and /dev/shm,
and its working directory at `/sandbox`, the only place it can write that outlives it. The data dir, the persona
dir, the repository, $HOME and every secret are simply not there. Without a working bwrap nothing runs
(`JailUnavailable`), unless the operator chose `jail="none"` (a warning each run)."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

LANGUAGES = {"python": "script.py", "sh": "script.sh"}
OUTPUT_FILE = "output.txt"
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_OPEN_FILES = 256

BWRAP = "bwrap"  # the jail's binary (a name on PATH or a path)
JAIL_WORKDIR = "/sandbox"  # where the script sees its working directory
JAIL_TMP_BYTES = 64 * 1024 * 1024  # the jail's /tmp (memory)
JAIL_SHM_BYTES = 16 * 1024 * 1024  # its /dev/shm
INSTALL_HINT = "scripts need bubblewrap: apt-get install bubblewrap"
PROBE_TIMEOUT_S = 15.0
# /etc as far as a program needs it; nothing in these is a secret
ETC_FILES = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "timezone",
    "nsswitch.conf",
    "passwd",
    "group",
    "alternatives",
    "mime.types",
    "os-release",
)
# with the network: names and certificates too
ETC_NETWORK = (
    "resolv.conf",
    "hosts",
    "host.conf",
    "gai.conf",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "pki",
    "crypto-policies",
)
TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")  # links into /usr, or directories of their own


class JailUnavailable(RuntimeError):
    """The jail cannot run here; the message says why and what to install."""


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


def environment(workdir: Path | str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(workdir),
        "TMPDIR": str(workdir),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONIOENCODING": "utf-8",
    }


# Sets the limits, then becomes the script (exec): a launcher process rather than preexec_fn, which is not safe in a
# process with threads (the loop has several). In the jail it runs inside, after bwrap has set the jail up.
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


def _launcher(python: str, limits: Limits) -> list[str]:
    return [
        python,
        "-I",
        "-c",
        LAUNCHER,
        str(limits.memory_mb * 1024 * 1024),
        str(int(limits.timeout_s) + 1),
        str(MAX_FILE_BYTES),
        str(MAX_OPEN_FILES),
    ]


def _command(language: str, python: str) -> list[str]:
    return [python, "-I", "-u"] if language == "python" else ["/bin/sh"]


# -- the jail ----------------------------------------------------------------------------------------------------


def interpreter() -> tuple[str, Path]:
    """The real Python binary (a venv's python is a link to it; the venv itself stays outside the jail) and the
    prefix it needs, read-only."""
    python = Path(os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable))
    prefix = Path(os.path.realpath(sys.base_prefix))
    if not python.is_relative_to(prefix):
        prefix = python.parent.parent
    return str(python), prefix


def _covered(path: Path, binds: list[Path]) -> bool:
    return any(path.is_relative_to(b) for b in binds)


def _ro_paths() -> list[Path]:
    """Read-only binds besides /usr and /etc: the interpreter's prefix, unless /usr has it already. A prefix that
    would show $HOME, the filesystem root or another broad folder is refused."""
    _, prefix = interpreter()
    if _covered(prefix, [Path("/usr")]):
        return []
    home = Path(os.path.realpath(os.path.expanduser("~")))
    if prefix == Path("/") or home.is_relative_to(prefix) or len(prefix.parts) < 3:
        raise JailUnavailable(
            f"the Python interpreter's prefix {prefix} is too broad to show a jailed script "
            f"(it holds {home} or the whole system); run anima from a Python installed elsewhere"
        )
    return [prefix]


def jail_args(workdir: Path, network: bool) -> list[str]:
    """bwrap's options for a script whose working directory is `workdir` (then the command)."""
    args = [
        "--unshare-all",
        *(["--share-net"] if network else []),
        "--unshare-user",
        *_optional("--disable-userns"),
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--clearenv",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for name in TOP_LEVEL:
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for name in ETC_FILES + (ETC_NETWORK if network else ()):
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    for path in _ro_paths():
        if Path(os.path.realpath(workdir)).is_relative_to(path):
            raise JailUnavailable(
                f"the working directory {workdir} is inside the Python prefix {path}, which the "
                f"jail shows read-only: put the data dir elsewhere"
            )
        args += ["--ro-bind", str(path), str(path)]
    args += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        *_sized(JAIL_SHM_BYTES),
        "--tmpfs",
        "/dev/shm",
        "--remount-ro",
        "/dev",
        *_sized(JAIL_TMP_BYTES),
        "--tmpfs",
        "/tmp",
        "--bind",
        str(workdir),
        JAIL_WORKDIR,
        "--chdir",
        JAIL_WORKDIR,
        "--remount-ro",
        "/",
    ]
    for key, value in environment(JAIL_WORKDIR).items():
        args += ["--setenv", key, value]
    return args


_options: dict[str, str] = {}
_probes: dict[str, str | None] = {}
_probe_lock = threading.Lock()


def _bwrap_help(binary: str) -> str:
    if binary not in _options:
        try:
            done = subprocess.run(
                [binary, "--help"],
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_S,
                env={"PATH": "/usr/bin:/bin"},
            )
            _options[binary] = done.stdout + done.stderr
        except (OSError, subprocess.SubprocessError):
            _options[binary] = ""
    return _options[binary]


def _optional(option: str) -> list[str]:
    binary = shutil.which(BWRAP)
    return [option] if binary and option in _bwrap_help(binary) else []


def _sized(size: int) -> list[str]:
    return ["--size", str(size)] if _optional("--size") else []


def jail_problem() -> str | None:
    """Why scripts cannot be jailed here (None: they can). Tried once per process and bwrap binary: a jail like a
    script's, without the network, running /bin/true. The command guide asks every tick: the answer is kept, by the
    binary's configured name (looked up on PATH once too)."""
    with _probe_lock:
        if BWRAP not in _probes:
            binary = shutil.which(BWRAP)
            _probes[BWRAP] = f"{INSTALL_HINT} ({BWRAP} was not found)" if binary is None else _probe(binary)
        return _probes[BWRAP]


def _probe(binary: str) -> str | None:
    try:
        with tempfile.TemporaryDirectory(prefix="anima-jail-probe-") as scratch:
            done = subprocess.run(
                [binary, *jail_args(Path(scratch), network=False), "/bin/true"],
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_S,
                env={"PATH": "/usr/bin:/bin"},
                stdin=subprocess.DEVNULL,
            )
    except JailUnavailable as exc:
        return str(exc)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{INSTALL_HINT} ({binary} could not run: {exc})"
    if done.returncode != 0:
        reason = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        return (
            f"scripts need a bubblewrap jail, and {binary} cannot make one here ({reason[0]}): namespaces may be "
            f"disabled (kernel.unprivileged_userns_clone, or a container without them)"
        )
    return None


# -- running -----------------------------------------------------------------------------------------------------


def start(
    language: str,
    code: str,
    args: list[str],
    workdir: Path,
    limits: Limits,
    *,
    network: bool = False,
    jail: str = "bwrap",
) -> subprocess.Popen[bytes]:
    """Write the script into `workdir` and start it, jailed (`jail="bwrap"`; `network` lets it use the machine's
    network) or not (`jail="none"`, the operator's explicit choice); the returned process leads its own process
    group. Raises JailUnavailable, before anything is written, when the jail cannot run."""
    if language not in LANGUAGES:
        raise ValueError(f"no such script language {language!r} (one of {', '.join(LANGUAGES)})")
    if jail not in ("bwrap", "none"):
        raise ValueError(f"no such jail {jail!r} (bwrap or none)")
    if jail == "bwrap":
        problem = jail_problem()
        if problem is not None:
            raise JailUnavailable(problem)
    else:
        log.warning(
            "scripts run WITHOUT a jail (scripts.jail: none): %s can write wherever this user can and reach "
            "the network",
            workdir,
        )
    workdir.mkdir(parents=True, exist_ok=True)
    name = LANGUAGES[language]
    (workdir / name).write_text(code, encoding="utf-8")
    if jail == "bwrap":
        python, _ = interpreter()
        argv = [
            shutil.which(BWRAP) or BWRAP,
            *jail_args(workdir, network),
            "--",
            *_launcher(python, limits),
            *_command(language, python),
            name,
            *args,
        ]
        env = {"PATH": "/usr/bin:/bin"}
    else:
        argv = [*_launcher(sys.executable, limits), *_command(language, sys.executable), name, *args]
        env = environment(workdir)
    with open(workdir / OUTPUT_FILE, "wb") as output:
        proc = subprocess.Popen(
            argv,
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    proc.jailed = jail == "bwrap"  # type: ignore[attr-defined]  # bwrap reports a signal as 128 + its number
    return proc


def kill_group(pid: int, sig: int = signal.SIGKILL) -> bool:
    """Kill a script's process group. Jailed, the group is bwrap's: the jail's own processes are in a session of
    their own, and die with bwrap (--die-with-parent kills the jail's init, and the pid namespace goes with it)."""
    try:
        os.killpg(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def read_output(workdir: Path, limit: int) -> str:
    """The output file, cut to `limit`. The script could have swapped it for a link (to a file only this process
    may read) or a pipe: only a regular file is read, never through a link."""
    try:
        fd = os.open(workdir / OUTPUT_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"(the output file could not be read: {exc.strerror})"
    with open(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            return "(the output file is no longer a regular file)"
        size = info.st_size
        if size <= limit:
            return handle.read().decode("utf-8", "replace")
        head = handle.read(limit // 2).decode("utf-8", "replace")
        handle.seek(size - limit // 2)
        tail = handle.read().decode("utf-8", "replace")
    return f"{head}\n… ({size - limit:,} bytes of output cut) …\n{tail}"


def _signal_of(proc: subprocess.Popen[bytes]) -> int | None:
    code = proc.returncode
    if code is not None and code < 0:
        return -code
    if (
        getattr(proc, "jailed", False)
        and code is not None
        and code > 128
        and code - 128 in (signal.SIGKILL, signal.SIGTERM, signal.SIGXCPU)
    ):
        return code - 128
    return None


def wait(proc: subprocess.Popen[bytes], workdir: Path, limits: Limits, started: float | None = None) -> Outcome:
    """Wait for the script (killing its group at the timeout); its exit and output within the budget."""
    started = started or time.monotonic()
    timed_out = False
    try:
        proc.wait(timeout=max(0.0, limits.timeout_s - (time.monotonic() - started)))
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(proc.pid)
        proc.wait(timeout=30)
    code, sig = proc.returncode, _signal_of(proc)
    if timed_out:
        status = "timeout"
    elif code == 0:
        status = "ok"
    elif sig in (signal.SIGKILL, signal.SIGTERM):
        status = "killed"
    else:
        status = "error"
    output = read_output(workdir, limits.output_chars)
    if sig == signal.SIGXCPU:
        output += "\n(stopped: CPU time limit)"
    return Outcome(exit_code=code, status=status, output=output, seconds=round(time.monotonic() - started, 3))
