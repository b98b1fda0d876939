"""How containers move: a topic-based publish/subscribe transport.

`Libp2pTransport` runs mesh/p2p_sidecar.py under the libp2p venv's Python (JSON lines over its stdin/stdout; a
reader thread queues what arrives). `InMemoryHub` connects transports in one process, for unit tests (a member
can be taken down and brought back to test Isolated Mode)."""

from __future__ import annotations

import base64
import json
import queue
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from persona.settings import MeshSettings

SIDECAR = Path(__file__).with_name("p2p_sidecar.py")
OUTBOX_LINES = 2000  # commands waiting for the sidecar at most (then publish says it is stalled)


@dataclass(frozen=True)
class Delivery:
    topic: str
    data: bytes
    peer: str  # the transport's id of the peer that published it
    arrived: float = 0.0  # unix seconds: when the transport took it off the wire (the libp2p node's clock)
    taken: float = 0.0  # unix seconds: when this process read it from the transport


class Transport(Protocol):
    peer_id: str

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def subscribe(self, topic: str) -> None: ...
    def publish(self, topic: str, data: bytes) -> None: ...
    def poll(self, timeout: float) -> list[Delivery]: ...
    def peer_count(self) -> int: ...
    def addresses(self) -> list[str]: ...
    def trust(self, scores: dict[str, float], blocked: list[str]) -> None: ...
    def alive(self) -> bool: ...


class TransportError(RuntimeError):
    pass


# ---- in memory (unit tests) -----------------------------------------------------------------------------------------
@dataclass
class InMemoryHub:
    members: dict[str, InMemoryTransport] = field(default_factory=dict)

    def join(self, peer_id: str) -> InMemoryTransport:
        transport = InMemoryTransport(self, peer_id)
        self.members[peer_id] = transport
        return transport

    def deliver(self, sender: str, topic: str, data: bytes) -> None:
        for member in self.members.values():
            if member.peer_id != sender and member.up and topic in member.topics and sender not in member.blocked:
                now = time.time()
                member.inbox.put(Delivery(topic, data, sender, now, now))


@dataclass
class InMemoryTransport:
    hub: InMemoryHub
    peer_id: str
    up: bool = True
    topics: set[str] = field(default_factory=set)
    inbox: queue.Queue[Delivery] = field(default_factory=queue.Queue)
    published: int = 0
    scores: dict[str, float] = field(default_factory=dict)  # the last trust the node shared (trust())
    blocked: set[str] = field(default_factory=set)
    trust_updates: int = 0

    def start(self) -> None:
        self.up = True

    def stop(self) -> None:
        self.up = False

    def subscribe(self, topic: str) -> None:
        self.topics.add(topic)

    def publish(self, topic: str, data: bytes) -> None:
        if not self.up:
            raise TransportError("down")
        self.published += 1
        self.hub.deliver(self.peer_id, topic, data)

    def poll(self, timeout: float) -> list[Delivery]:
        out: list[Delivery] = []
        try:
            out.append(self.inbox.get(timeout=timeout) if timeout > 0 else self.inbox.get_nowait())
            while True:
                out.append(self.inbox.get_nowait())
        except queue.Empty:
            pass
        return out if self.up else []

    def peer_count(self) -> int:
        return sum(1 for m in self.hub.members.values() if m.up and m.peer_id != self.peer_id) if self.up else 0

    def addresses(self) -> list[str]:
        return [f"memory://{self.peer_id}"]

    def trust(self, scores: dict[str, float], blocked: list[str]) -> None:
        """Kept, and a blocked sender's deliveries dropped (the libp2p sidecar also scores; see p2p_sidecar.py)."""
        self.scores, self.blocked = dict(scores), set(blocked)
        self.trust_updates += 1

    def alive(self) -> bool:
        """A hub member has no process to lose (`up` is whether the network reaches it: Isolated Mode)."""
        return True


# ---- libp2p through the sidecar
# ---------------------------------------------------------------------------------------
class Libp2pTransport:
    """py-libp2p in a child process (its own venv: trio and libp2p's pins stay out of the persona's)."""

    def __init__(
        self,
        python: str,
        *,
        listen: str,
        bootstrap: list[str],
        interests: list[str],
        ready_timeout: float = 30.0,
        dht: bool = True,
        mdns: bool = False,
        min_trust: float = -0.5,
        relay_min_trust: float = -0.2,
        adaptive_gossip: bool = False,
    ) -> None:
        self.python = str(Path(python).expanduser())
        self.listen, self.bootstrap, self.interests = listen, list(bootstrap), list(interests) or ["anima"]
        self.ready_timeout = ready_timeout
        self.dht, self.mdns, self.adaptive_gossip = dht, mdns, adaptive_gossip
        self.min_trust, self.relay_min_trust = min_trust, relay_min_trust
        self.dropped: dict[str, int] = {}  # what the sidecar's gossipsub dropped on arrival, by why
        self.trust_applied = 0  # trust ops the sidecar has applied
        self.peer_id = ""
        self._addresses: list[str] = []
        self._peers: list[str] = []
        self._process: subprocess.Popen[str] | None = None
        self._inbox: queue.Queue[Delivery] = queue.Queue()
        self._outbox: queue.Queue[str | None] = queue.Queue(maxsize=OUTBOX_LINES)
        self._ready = threading.Event()
        self.errors: list[str] = []

    @classmethod
    def from_settings(cls, mesh: MeshSettings) -> Libp2pTransport:
        return cls(
            mesh.sidecar_python,
            listen=mesh.listen,
            bootstrap=mesh.bootstrap,
            interests=mesh.interests or ["anima"],
            dht=mesh.dht,
            mdns=mesh.mdns,
            min_trust=mesh.min_trust,
            relay_min_trust=mesh.relay_min_trust,
            adaptive_gossip=mesh.adaptive_gossip,
            ready_timeout=mesh.start_timeout_s,
        )

    def start(self) -> None:
        if not Path(self.python).exists():
            raise TransportError(f"no libp2p venv at {self.python} (make mesh builds it)")
        args = [self.python, str(SIDECAR), "--listen", self.listen]
        for address in self.bootstrap:
            args += ["--bootstrap", address]
        for interest in self.interests:
            args += ["--interest", interest]
        args += ["--min-trust", str(self.min_trust), "--relay-min-trust", str(self.relay_min_trust)]
        if not self.dht:
            args.append("--no-dht")
        if self.mdns:
            args.append("--mdns")
        if self.adaptive_gossip:
            args.append("--adaptive-gossip")
        self._ready.clear()
        self._peers = []
        self._process = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1
        )
        assert self._process.stdout is not None and self._process.stdin is not None
        self._outbox = queue.Queue(maxsize=OUTBOX_LINES)
        threading.Thread(
            target=self._read, args=(self._process.stdout, self._process), name="mesh-sidecar", daemon=True
        ).start()
        threading.Thread(
            target=self._write, args=(self._process.stdin, self._outbox), name="mesh-sidecar-in", daemon=True
        ).start()
        if not self._ready.wait(self.ready_timeout):
            self.stop()
            raise TransportError(f"the libp2p sidecar did not start within {self.ready_timeout}s")

    def _read(self, stream: IO[str], process: subprocess.Popen[str]) -> None:
        for line in stream:
            try:
                self._take(json.loads(line))
            except (ValueError, TypeError, KeyError, AttributeError):  # a line the sidecar never writes: skipped
                continue
        if self._process is process:  # (not a sidecar started since)
            self._peers = []

    def _take(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "ready":
            self.peer_id, self._addresses = str(event["peer_id"]), list(event["addrs"])
            self._ready.set()
        elif kind == "message":
            self._inbox.put(
                Delivery(
                    str(event["topic"]),
                    base64.b64decode(event["data"]),
                    str(event["from"]),
                    float(event.get("at") or 0.0),
                    time.time(),
                )
            )
        elif kind == "peers":
            self._peers = list(event["ids"])
        elif kind == "trusted":
            self.trust_applied += 1
        elif kind == "dropped":
            self.dropped = {str(k): int(v) for k, v in dict(event.get("counts") or {}).items()}
        elif kind == "error":
            self.errors = [*self.errors[-20:], str(event.get("detail", ""))]

    def _write(self, stream: IO[str], lines: queue.Queue[str | None]) -> None:
        """The commands to the sidecar, in order, from a thread of their own: a sidecar that stops reading (stalled,
        suspended) blocks this thread, never the door's rounds (`_send` then finds the queue full)."""
        while True:
            line = lines.get()
            if line is None:
                return
            try:
                stream.write(line)
                stream.flush()
            except (BrokenPipeError, OSError, ValueError):
                return

    def _send(self, command: dict[str, Any]) -> None:
        process = self._process
        if process is None or process.poll() is not None:
            raise TransportError("the libp2p sidecar is not running")
        try:
            self._outbox.put_nowait(json.dumps(command) + "\n")
        except queue.Full:
            raise TransportError(
                f"the libp2p sidecar has not taken its last {OUTBOX_LINES} commands (stalled)"
            ) from None

    def subscribe(self, topic: str) -> None:
        self._send({"op": "subscribe", "topic": topic})

    def publish(self, topic: str, data: bytes) -> None:
        self._send({"op": "publish", "topic": topic, "data": base64.b64encode(data).decode("ascii")})

    def trust(self, scores: dict[str, float], blocked: list[str]) -> None:
        """The persona's trust in each peer (by libp2p id) and its blocked peers, into gossipsub's scoring."""
        self._send({"op": "trust", "scores": scores, "blocked": list(blocked)})

    def poll(self, timeout: float) -> list[Delivery]:
        out: list[Delivery] = []
        try:
            out.append(self._inbox.get(timeout=timeout))
            while len(out) < 1000:
                out.append(self._inbox.get_nowait())
        except queue.Empty:
            pass
        return out

    def alive(self) -> bool:
        """Whether the sidecar runs (False once it exited: the door starts it again)."""
        return self._process is not None and self._process.poll() is None

    def peer_count(self) -> int:
        return len(self._peers) if self.alive() else 0

    def peers(self) -> list[str]:
        return list(self._peers)

    def addresses(self) -> list[str]:
        return list(self._addresses)

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        try:
            self._outbox.put_nowait('{"op": "stop"}\n')
            self._outbox.put_nowait(None)
        except queue.Full:  # a stalled sidecar: it is killed below
            pass
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def wait_for(condition: Any, timeout: float, every: float = 0.05) -> bool:
    """Poll `condition()` until true or `timeout` seconds pass (bounded waits for tests and the door)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(every)
    return bool(condition())


__all__ = [
    "SIDECAR",
    "Delivery",
    "InMemoryHub",
    "InMemoryTransport",
    "Libp2pTransport",
    "Transport",
    "TransportError",
    "wait_for",
]
