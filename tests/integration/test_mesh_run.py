"""The mesh door's start path in `run.py`: a persona started with `mesh.enabled` (the loop thinking on the scripted
model server, its web app up) prints its DID and libp2p address; a second persona's door (`python -m mesh`)
joins through that address; each hears the other's signed `have` — the run.py persona shows the other under "seen
on the mesh" in its web API, and the other knows the run.py persona's DID. Every wait is bounded."""

from __future__ import annotations

import re

from memory import Database
from mesh.transport import wait_for
from tests.integration.browser import http_json, varied_thoughts, web_loop
from tests.integration.test_mesh_processes import LIBP2P_PYTHON, Door, libp2p_venv

WAIT = 90.0  # a hang guard, not a timing
ANNOUNCED = re.compile(r"mesh:\s+(did:key:z\w+) at (/ip4/127\.0\.0\.1/tcp/\d+/p2p/\w+)")


def test_run_py_starts_the_mesh_door_beside_the_loop_and_a_peer_joins_it(scripted_server, tmp_path) -> None:
    libp2p_venv()
    scripted_server.script(
        *({"do": "whole", "text": thought} for thought in varied_thoughts(400, seed=31)),
        default={"do": "whole", "text": "The last scripted thought."},
        record=False,
    )
    env = {
        "ANIMA_MESH__ENABLED": "true",
        "ANIMA_MESH__SIDECAR_PYTHON": str(LIBP2P_PYTHON),
        "ANIMA_MESH__SYNC_EVERY_S": "1",
    }
    with web_loop(tmp_path / "ada", llm_url=scripted_server.url, pace_s=1.0, env=env) as loop:
        found: list[tuple[str, str]] = []

        def announced() -> bool:
            found[:] = ANNOUNCED.findall(loop.log.read_text(errors="replace"))
            return bool(found)

        assert wait_for(announced, WAIT, every=0.5), loop.log.read_text(errors="replace")[-3000:]
        did, address = found[0]
        Database.open(tmp_path / "bob").close()
        bob = Door(tmp_path, "bob", [address], [])
        bob.start()
        try:
            assert wait_for(lambda: did in bob.read().get("dids", []), WAIT), (bob.read(), bob.log_tail())

            def seen_by_ada() -> list[str]:
                status, body = http_json(loop.url + "/api/mesh", timeout=5)
                return [d["did"] for d in body.get("discovered", [])] if status == 200 else []

            bob_did = bob.read()["did"]
            assert wait_for(lambda: bob_did in seen_by_ada(), WAIT, every=0.5), seen_by_ada()
            assert loop.status()["ticks"] >= 1  # the loop thinks on with the door beside it
        finally:
            bob.stop()
