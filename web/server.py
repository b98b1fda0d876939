"""Serving the app with uvicorn: blocking (`run.py serve`), or beside the loop in a thread (`run.py`, `make run`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

import uvicorn

from persona.settings import Overrides, load_settings
from web.security import AllowedHosts, check_binding

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8765


class PortInUse(RuntimeError):
    pass


HostList = str | Iterable[str] | None


def _config(overrides: Overrides | None, host: str, port: int, allowed_hosts: HostList = None) -> uvicorn.Config:
    """`allowed_hosts`: more names the app answers to (`--allowed-hosts`; None: ANIMA_ALLOWED_HOSTS), besides the
    loopback ones and `host`."""
    from web.app import create_app

    settings = load_settings(overrides=(overrides or Overrides()).replace(persona_dir=None))  # ANIMA_API_TOKEN & co
    token = settings.api_token.get_secret_value() if settings.api_token else None
    check_binding(host, token)
    hosts = AllowedHosts.serving(host, settings.allowed_hosts if allowed_hosts is None else allowed_hosts)
    return uvicorn.Config(
        create_app(overrides, api_token=token, allowed_hosts=hosts),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=2,
        lifespan="on",
    )


def serve(
    overrides: Overrides | None, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *, allowed_hosts: HostList = None
) -> None:
    uvicorn.Server(_config(overrides, host, port, allowed_hosts)).run()


@dataclass
class WebThread:
    server: uvicorn.Server
    thread: threading.Thread
    url: str

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=5)


def start_in_thread(
    overrides: Overrides | None,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    wait_s: float = 20.0,
    *,
    allowed_hosts: HostList = None,
) -> WebThread:
    """The app in a background thread (the loop keeps the main thread and its signals); returns once it listens."""
    server = uvicorn.Server(_config(overrides, host, port, allowed_hosts))
    thread = threading.Thread(target=server.run, name="web", daemon=True)
    thread.start()
    deadline = time.monotonic() + wait_s
    while not server.started:
        if not thread.is_alive():
            raise PortInUse(
                f"the web app could not listen on {host}:{port} (in use? choose another with --port, or --no-web)"
            )
        if time.monotonic() > deadline:
            raise PortInUse(f"the web app did not start on {host}:{port} within {wait_s:.0f} s")
        time.sleep(0.05)
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    return WebThread(server, thread, f"http://{shown}:{port}")
