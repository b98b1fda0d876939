"""The mesh door beside the loop (`run.py` with `mesh.enabled: true`): the libp2p sidecar and the node's rounds in
a thread of their own; the loop is never in their path. A sidecar that cannot start (no `make mesh` yet) leaves the
persona thinking on alone — Isolated Mode, its containers waiting in the outbox."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from memory import Database
from mesh.node import MeshNode
from mesh.transport import Libp2pTransport, TransportError
from persona.settings import Settings

log = logging.getLogger(__name__)


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
        return None
    stopping = threading.Event()
    thread = threading.Thread(target=node.run, args=(stopping,), name="mesh-door", daemon=True)
    thread.start()
    return MeshDoor(node, thread, stopping)


__all__ = ["MeshDoor", "start_in_thread"]
