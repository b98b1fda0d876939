"""The mesh door: a persona's peer-to-peer side, beside the loop.

`node.py` (MeshNode) moves containers between this persona's database and a transport: it flushes the outbox when
a peer is reachable (Isolated Mode otherwise: thinking goes on, containers wait), hands every arrival to
`managers.mesh.receive` (verify, refuse and count, apply as data), and syncs with peers by container ids (have /
want / bodies) so nothing is lost and nothing applied twice. `transport.py`: the transports — libp2p through
`p2p_sidecar.py` (a child process in its own venv) and an in-memory hub for unit tests. `__main__.py`: `python -m
mesh --data-dir …` runs the door alone over a persona's data dir."""
