"""A real Matrix homeserver for the tests: Synapse (`matrix-synapse`, pinned) in its own venv under
~/.cache/anima/synapse-venv (built once by `make synapse` or here, idempotent), started on loopback with a throwaway
config and SQLite; users are registered with the shared secret. Every wait is bounded; the server is always
stopped."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.integration.servers import free_port, wait_http

SYNAPSE_VERSION = "1.142.0"
# prometheus-client 0.24+ breaks Synapse's import (element-hq/synapse#19375): pinned beside it
SYNAPSE_PINS = (f"matrix-synapse=={SYNAPSE_VERSION}", "prometheus-client==0.23.1")
VENV = Path(os.path.expanduser("~/.cache/anima/synapse-venv"))
SHARED_SECRET = "anima-test-registration-secret"  # a throwaway server's, on loopback only
INSTALL_TIMEOUT_S = 900
START_TIMEOUT_S = 90


def synapse_python() -> Path:
    """The venv's python with Synapse installed (built when missing); RuntimeError saying why it cannot be."""
    python = VENV / "bin" / "python"
    probe = [
        str(python),
        "-c",
        "import sys, synapse, prometheus_client, synapse.metrics; "
        f"sys.exit(synapse.__version__ != {SYNAPSE_VERSION!r})",
    ]
    if python.exists() and subprocess.run(probe, capture_output=True, timeout=60).returncode == 0:
        return python
    interpreter = shutil.which("python3.11") or sys.executable
    subprocess.run([interpreter, "-m", "venv", "--clear", str(VENV)], check=True, timeout=120)
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", *SYNAPSE_PINS],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
    )
    if done.returncode != 0:
        raise RuntimeError(f"installing matrix-synapse failed: {done.stderr[-800:]}")
    return python


@dataclass
class Synapse:
    url: str
    server_name: str
    config: Path
    python: Path

    def register(self, user: str, password: str, *, admin: bool = False) -> str:
        """A user (idempotent: an existing one is kept); their Matrix id."""
        endpoint = f"{self.url}/_synapse/admin/v1/register"
        with urllib.request.urlopen(endpoint, timeout=30) as response:
            nonce = json.load(response)["nonce"]
        mac = hmac.new(SHARED_SECRET.encode(), digestmod=hashlib.sha1)
        mac.update(b"\x00".join([nonce.encode(), user.encode(), password.encode(), b"admin" if admin else b"notadmin"]))
        body = json.dumps(
            {"nonce": nonce, "username": user, "password": password, "admin": admin, "mac": mac.hexdigest()}
        ).encode()
        request = urllib.request.Request(endpoint, data=body, headers={"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(request, timeout=30).close()
        except urllib.error.HTTPError as exc:
            answer = exc.read().decode(errors="replace")
            if "M_USER_IN_USE" not in answer:
                raise RuntimeError(f"registering {user}: {exc.code} {answer[:300]}") from None
        return f"@{user}:{self.server_name}"


def _config(base: Path, port: int) -> str:
    unlimited = "{per_second: 1000, burst_count: 1000}"
    return f"""server_name: "localhost"
pid_file: {base}/homeserver.pid
listeners:
  - port: {port}
    bind_addresses: ['127.0.0.1']
    type: http
    tls: false
    x_forwarded: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: {base}/homeserver.db
media_store_path: {base}/media
signing_key_path: {base}/signing.key
registration_shared_secret: "{SHARED_SECRET}"
report_stats: false
trusted_key_servers: []
suppress_key_server_warning: true
enable_metrics: false
presence:
  enabled: false
rc_message: {unlimited}
rc_registration: {unlimited}
rc_joins:
  local: {unlimited}
  remote: {unlimited}
rc_login:
  address: {unlimited}
  account: {unlimited}
  failed_attempts: {unlimited}
rc_invites:
  per_room: {unlimited}
  per_user: {unlimited}
"""


@contextmanager
def synapse_server(base: Path) -> Iterator[Synapse]:
    python = synapse_python()
    base.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = base / "homeserver.yaml"
    config.write_text(_config(base, port))
    subprocess.run(
        [str(python), "-m", "synapse.app.homeserver", "-c", str(config), "--generate-keys"],
        check=True,
        capture_output=True,
        timeout=120,
        cwd=base,
    )
    log = open(base / "synapse.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [str(python), "-m", "synapse.app.homeserver", "-c", str(config)], cwd=base, stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/_matrix/client/versions", START_TIMEOUT_S, proc)
        yield Synapse(url=url, server_name="localhost", config=config, python=python)
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
