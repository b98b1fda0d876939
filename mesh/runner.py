"""The mesh door beside the loop (`run.py` with `mesh.enabled: true`): the libp2p sidecar and the node's rounds in
a thread of their own; the loop is never in their path. A sidecar that cannot start (no `make mesh` yet) leaves the
persona thinking on alone — Isolated Mode, its containers waiting in the outbox.

`supervise` keeps the rounds going whatever escapes them: it logs one line, waits (0.5 s, doubling to 30 s; back to
0.5 s after a minute without a failure) and starts them again — the door is never gone until a restart."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from memory import Database
from mesh.node import MeshNode
from mesh.transport import Libp2pTransport, TransportError
from persona.settings import Settings

log = logging.getLogger(__name__)
BACKOFF_FIRST_S, BACKOFF_MAX_S, CALM_S = 0.5, 30.0, 60.0


def supervise(
    node: MeshNode,
    stop: threading.Event,
    each_round: Callable[[], None] | None = None,
    *,
    first_s: float = BACKOFF_FIRST_S,
    most_s: float = BACKOFF_MAX_S,
) -> None:
    """`node.run` until `stop` is set, started again after anything it raises."""
    delay = first_s
    while not stop.is_set():
        started = time.monotonic()
        try:
            node.run(stop, each_round)
            return
        except Exception as exc:  # noqa: BLE001 — the door stays up whatever arrives
            if time.monotonic() - started >= CALM_S:
                delay = first_s
            node.stats["door_restarts"] += 1
            log.warning(
                "mesh: the door's rounds stopped on %s: %s — started again in %.1f s",
                type(exc).__name__,
                str(exc)[:300],
                delay,
            )
            stop.wait(delay)
            delay = min(most_s, delay * 2)


@dataclass
class MeshDoor:
    node: MeshNode
    thread: threading.Thread
    stopping: threading.Event

    @property
    def address(self) -> str:
        addresses = self.node.transport.addresses()
        return addresses[0] if addresses else ""

    def stop(self, timeout: float = 10.0) -> None:
        self.stopping.set()
        self.thread.join(timeout)
        self.node.stop()


def start_in_thread(database: Database, settings: Settings) -> MeshDoor | None:
    """Start the door (None, with the reason logged, when its transport cannot start)."""
    mesh = settings.mesh
    transport = Libp2pTransport.from_settings(mesh)
    node = MeshNode(database, settings, transport)
    try:
        node.start()
    except TransportError as exc:
        log.warning("mesh door not started: %s — the persona thinks on alone (isolated mode)", exc)
        with node.factory.unit(history="mesh") as house:  # the persona is told it is isolated
            house.mesh.record_connectivity(isolated=True, door="not_started")
        return None
    stopping = threading.Event()
    thread = threading.Thread(target=supervise, args=(node, stopping), name="mesh-door", daemon=True)
    thread.start()
    return MeshDoor(node, thread, stopping)


__all__ = ["MeshDoor", "start_in_thread", "supervise"]
