"""Scripts run jailed by a real bubblewrap (reach/sandbox.py), no fakes: a write outside the working directory is
refused and leaves nothing behind, one inside works; a socket to a listener on 127.0.0.1 is refused (and the
listener sees nothing) unless the operator allows the network; the data dir, $HOME and the repository cannot be
read; no secret variable is inherited; the timeout and a stop still kill the whole jail; the output file cannot be
swapped for a link to a secret; and without a working bwrap nothing runs, unless the operator opts out."""

from __future__ import annotations

import logging
import socket
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from nodes.commands.process import scripts_off
from persona.settings import ScriptSettings
from reach import sandbox
from reach.sandbox import JailUnavailable, Limits, kill_group, start, wait

REPO = Path(__file__).resolve().parents[2]
needs_jail = pytest.mark.skipif(
    sandbox.jail_problem() is not None, reason=f"no working bubblewrap here: {sandbox.jail_problem()}"
)


def run(code: str, workdir: Path, *args: str, timeout_s: float = 20, network: bool = False, jail: str = "bwrap"):
    limits = Limits(timeout_s=timeout_s, memory_mb=256, output_chars=20_000)
    proc = start("python", code, list(args), workdir, limits, network=network, jail=jail)
    return wait(proc, workdir, limits)


@pytest.fixture
def data_dir(tmp_path):
    data = tmp_path / "data"
    (data / "sandbox").mkdir(parents=True)
    (data / "secret.txt").write_text("data-dir-secret")
    return data


TRY_WRITE = """import sys
for path in sys.argv[1:]:
    try:
        with open(path, "w") as handle:
            handle.write("escaped")
        print("WROTE", path)
    except OSError as exc:
        print("REFUSED", path, type(exc).__name__)
"""


@needs_jail
def test_only_the_working_directory_is_writable(data_dir, tmp_path):
    workdir = data_dir / "sandbox" / "run-1"
    tag = uuid.uuid4().hex
    outside = [
        data_dir / f"planted-{tag}.txt",
        data_dir / "sandbox" / f"planted-{tag}.txt",
        tmp_path / f"{tag}.txt",
        REPO / f"planted-{tag}.txt",
        Path.home() / f"planted-{tag}.txt",
        Path(f"/etc/planted-{tag}"),
        Path(f"/planted-{tag}"),
    ]
    in_tmp = Path(f"/tmp/anima-jail-{tag}")  # the jail's own /tmp: an empty tmpfs that goes with it
    try:
        outcome = run(TRY_WRITE, workdir, "inside.txt", *map(str, outside), str(in_tmp))
        assert outcome.status == "ok", outcome.output
        assert "WROTE inside.txt" in outcome.output and (workdir / "inside.txt").read_text() == "escaped"
        for path in outside:
            assert f"REFUSED {path}" in outcome.output
            assert not path.exists()
        assert not in_tmp.exists()
    finally:  # a broken jail must not leave its escapes behind
        for path in [*outside, in_tmp]:
            path.unlink(missing_ok=True)


SECRETS = """import os, sys
for path in sys.argv[1:]:
    try:
        print("READ", path, open(path).read())
    except OSError as exc:
        print("UNREADABLE", path, type(exc).__name__)
print("ROOT", sorted(os.listdir("/")))
print("ENV", sorted(os.environ.items()))
"""


@needs_jail
def test_no_data_dir_home_repository_or_secret_variable(data_dir, monkeypatch):
    monkeypatch.setenv("ANIMA_TEST_SECRET", "hunter2")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    with tempfile.NamedTemporaryFile("w", dir=Path.home(), prefix=".anima-jail-secret-", suffix=".txt") as home_secret:
        home_secret.write("home-secret")
        home_secret.flush()
        targets = [
            data_dir / "secret.txt",
            Path(home_secret.name),
            REPO / "README.md",
            REPO / "pyproject.toml",
            Path("/etc/shadow"),
        ]
        outcome = run(SECRETS, data_dir / "sandbox" / "run-1", *map(str, targets))
    assert outcome.status == "ok", outcome.output
    for path in targets:
        assert f"UNREADABLE {path}" in outcome.output
    for secret in ("data-dir-secret", "home-secret", "hunter2", "sk-do-not-leak"):
        assert secret not in outcome.output
    env = outcome.output.split("ENV ", 1)[1]
    assert "ANIMA_TEST_SECRET" not in env and "KEY" not in env and "TOKEN" not in env
    assert "('HOME', '/sandbox')" in env
    root = outcome.output.split("ROOT ", 1)[1].splitlines()[0]
    assert "'work'" not in root and "'home'" not in root and "'srv'" not in root


CONNECT = """import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5).close()
    print("CONNECTED")
except OSError as exc:
    print("NO CONNECTION", type(exc).__name__, exc)
"""


def _listener() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(2)
    return server


def _accepted(server: socket.socket) -> bool:
    try:
        conn, _ = server.accept()
    except TimeoutError:
        return False
    conn.close()
    return True


@needs_jail
def test_no_network_unless_the_operator_allows_it(data_dir):
    with _listener() as server:
        port = str(server.getsockname()[1])
        closed = run(CONNECT, data_dir / "sandbox" / "run-1", port)
        assert closed.status == "ok" and "NO CONNECTION" in closed.output and "CONNECTED" not in closed.output
        assert not _accepted(server)  # the listener never saw it
        allowed = run(CONNECT, data_dir / "sandbox" / "run-2", port, network=True)
        assert allowed.status == "ok" and "CONNECTED" in allowed.output, allowed.output
        assert _accepted(server)


def _processes_with(token: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _gone(token: str) -> bool:
    """The processes carrying `token` have all exited (killed ones may take a moment to be reaped on a busy machine)."""
    for _ in range(100):
        if not _processes_with(token):
            return True
        time.sleep(0.05)
    return False


FAMILY = """import subprocess, sys, time
subprocess.Popen(["/bin/sh", "-c", "sleep 300 # " + sys.argv[1]])
print("started", flush=True)
while True:
    time.sleep(0.05)
"""


@needs_jail
def test_the_timeout_and_a_stop_kill_the_whole_jail(data_dir):
    token = uuid.uuid4().hex
    outcome = run(FAMILY, data_dir / "sandbox" / "run-1", token, timeout_s=2)
    assert outcome.status == "timeout" and "started" in outcome.output and 1.5 < outcome.seconds < 15
    assert _gone(token), "the jail's processes outlived its timeout"

    token = uuid.uuid4().hex
    workdir = data_dir / "sandbox" / "run-2"
    limits = Limits(timeout_s=30)
    proc = start("python", FAMILY, [token], workdir, limits)
    for _ in range(200):
        if "started" in sandbox.read_output(workdir, 1000) and len(_processes_with(token)) >= 2:
            break
        time.sleep(0.05)
    assert len(_processes_with(token)) >= 2  # the script and its child, in the jail
    assert kill_group(proc.pid)  # what process.stop does
    outcome = wait(proc, workdir, limits)
    assert outcome.status == "killed"
    assert _gone(token), "the jail's processes outlived process.stop"


@needs_jail
def test_the_output_file_cannot_be_swapped_for_a_link_to_a_secret(data_dir):
    code = (
        "import os\nos.remove('output.txt')\nos.symlink(os.environ['TARGET'] if 'TARGET' in os.environ "
        f"else {str(data_dir / 'secret.txt')!r}, 'output.txt')\n"
    )
    outcome = run(code, data_dir / "sandbox" / "run-1")
    assert outcome.status == "ok" and "data-dir-secret" not in outcome.output


@needs_jail
def test_resource_limits_still_hold_in_the_jail(data_dir):
    outcome = run("block = bytearray(400 * 1024 * 1024)\n", data_dir / "sandbox" / "run-1")
    assert outcome.status == "error" and "MemoryError" in outcome.output


def test_without_bubblewrap_nothing_runs_unless_the_operator_opts_out(data_dir, monkeypatch, caplog):
    monkeypatch.setattr(sandbox, "BWRAP", f"/nonexistent/{uuid.uuid4().hex}/bwrap")
    reason = sandbox.jail_problem()
    assert reason is not None and reason.startswith("scripts need bubblewrap: apt-get install bubblewrap")
    workdir = data_dir / "sandbox" / "run-1"
    with pytest.raises(JailUnavailable, match="scripts need bubblewrap"):
        run("open('ran.txt', 'w').write('x')\n", workdir)
    assert not workdir.exists()  # nothing written, nothing ran
    settings = type("S", (), {"scripts": ScriptSettings(enabled=True)})()
    assert scripts_off(settings) == reason  # process.start is off, and says why
    settings.scripts.jail = "none"
    assert scripts_off(settings) is None
    with caplog.at_level(logging.WARNING, logger="reach.sandbox"):
        outcome = run("open('ran.txt', 'w').write('x')\n", workdir, jail="none")
    assert outcome.status == "ok" and (workdir / "ran.txt").read_text() == "x"
    assert "WITHOUT a jail" in caplog.text


def test_the_probe_is_cached_per_binary(monkeypatch):
    calls = []
    monkeypatch.setattr(sandbox, "_probe", lambda binary: calls.append(binary) or None)
    monkeypatch.setattr(sandbox, "_probes", {})
    monkeypatch.setattr(sandbox, "BWRAP", "/bin/true")
    assert sandbox.jail_problem() is None and sandbox.jail_problem() is None
    assert calls == ["/bin/true"]
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: calls.append("which") or None)
    assert sandbox.jail_problem() is None and calls == ["/bin/true"]  # not even PATH is searched again


def test_network_and_jail_are_the_operators_not_the_personas():
    from persona.settings import SELF_EDITABLE, load_settings

    assert not any(key.startswith("scripts") for key in SELF_EDITABLE)
    # a persona's own change (config.update's rows) to them is never applied
    settings = load_settings(self_changes={"scripts.network": ["evil"], "scripts.jail": "none"})
    assert settings.scripts.jail == "bwrap" and settings.scripts.network == []
    with pytest.raises(ValueError):
        ScriptSettings(network=["../x"])
    with pytest.raises(ValueError):
        ScriptSettings(jail="chroot")


def test_a_bwrap_that_cannot_make_namespaces_fails_closed(tmp_path, monkeypatch):
    """What a kernel or container without user namespaces does to bwrap (its own words), played by a stand-in."""
    stand_in = tmp_path / "bwrap"
    stand_in.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    stand_in.chmod(0o755)
    monkeypatch.setattr(sandbox, "BWRAP", str(stand_in))
    reason = sandbox.jail_problem()
    assert reason is not None and "cannot make one here (bwrap: No permissions to creating new namespace)" in reason
    workdir = tmp_path / "run-1"
    with pytest.raises(JailUnavailable):
        run("print('ran')\n", workdir)
    assert not workdir.exists()
