"""`python -m mesh --data-dir DIR [--persona-dir P] [--bootstrap ADDR]… [--topic T]… [--state FILE]`: the mesh door
alone over a persona's data dir, until SIGTERM/SIGINT. It prints {"did", "addrs"} once it listens (how a second
persona learns the bootstrap address; what `run.py` prints when the door starts beside the loop), then a line for
each thing it sees: a peer met (its signed `have`), a signed container sent, received and verified, or refused.
`--state` writes {"did", "peer_id", "addrs"} and then whom it reaches, its counters, what its gossipsub dropped and
the moments containers were sent and arrived (bench/mesh.py reads them)."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import threading
from pathlib import Path
from typing import Any

from memory import Database
from mesh.node import MeshNode, describe
from mesh.runner import supervise
from mesh.transport import Libp2pTransport
from persona.settings import load_settings


def say(event: dict[str, Any]) -> None:
    print(describe(event), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m mesh")
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--persona-dir")
    parser.add_argument("--listen")
    parser.add_argument("--bootstrap", action="append", default=[])
    parser.add_argument("--topic", action="append", default=[])
    parser.add_argument("--state")
    options = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    settings = load_settings(options.persona_dir, data_dir=options.data_dir)
    mesh = settings.mesh.model_copy(
        update={
            "enabled": True,
            "listen": options.listen or settings.mesh.listen,
            "bootstrap": [*settings.mesh.bootstrap, *options.bootstrap],
            "topics": [*settings.mesh.topics, *options.topic],
        }
    )
    settings.mesh = mesh
    database = Database.open(settings.data_dir, settings.db_url)
    transport = Libp2pTransport.from_settings(mesh)
    node = MeshNode(database, settings, transport, on_event=say)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    node.start()
    print(json.dumps({"did": node.did, "addrs": transport.addresses()}), flush=True)
    written = ""

    def write_state() -> None:
        nonlocal written
        if not options.state:
            return
        state = json.dumps(
            {
                "did": node.did,
                "peer_id": transport.peer_id,
                "addrs": transport.addresses(),
                "peers": transport.peers(),
                "isolated": node.isolated,
                "dids": sorted(set(node.peer_dids.values())),
                "stats": dict(node.stats),
                "dropped_by_gossipsub": transport.dropped,
                "cut_off": sorted(node.cut_off),
                "gossip_trust": node.shared_trust[0] if node.shared_trust else {},
                "timings": {"sent": node.sent_at, "arrived": node.arrivals},
            }
        )
        if state != written:  # who this node is and whom it reaches, rewritten when it changes
            temporary = Path(options.state + ".tmp")
            temporary.write_text(state, encoding="utf-8")
            temporary.replace(options.state)
            written = state

    try:
        write_state()
        supervise(node, stop, write_state)
    finally:
        node.stop()
        database.close()


if __name__ == "__main__":
    main()
