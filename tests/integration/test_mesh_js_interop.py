"""Another implementation on loopback: a js-libp2p node (libp2p 2.9 from npm — TCP, Noise, yamux, identify, gossipsub
/meshsub/1.1.0 —, pinned in tests/interop/js/package-lock.json, installed by `make mesh-js` with the machine's node)
meets a persona's py-libp2p 0.8.1 node (`python -m mesh`), and they speak the persona's mesh protocol both ways:
the JS peer (tests/interop/js/peer.mjs: its own Ed25519 key via node:crypto, did:key, RFC 8785, written from
docs/mesh.md) publishes a signed `have` binding its libp2p peer to its DID and a signed message; the persona verifies
both and keeps the message as a note from that DID. The JS peer verifies the persona's signed `have` and its signed
hello, and a message the persona writes to it. Every wait is bounded; every process is stopped."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from memory import Database
from memory.models import Note
from mesh.transport import wait_for
from tests.integration.test_mesh_processes import ROOT, Door, libp2p_venv

JS_PEER = ROOT / "tests" / "interop" / "js"
WAIT = 90.0  # a hang guard on a loaded machine, not a timing


def js_peer_installed() -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("no node/npm on this machine: the js-libp2p peer cannot run (apt-get install nodejs npm)")
    if not (JS_PEER / "node_modules" / ".package-lock.json").exists():
        subprocess.run(["make", "-C", str(ROOT), "mesh-js"], check=True, timeout=900, stdout=subprocess.DEVNULL)
    return JS_PEER


class JsPeer:
    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process, self.events = process, []
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            try:
                self.events.append(json.loads(line))
            except ValueError:
                pass

    def saw(self, **fields: Any) -> dict[str, Any] | None:
        return next((e for e in self.events if all(e.get(k) == v for k, v in fields.items())), None)


@contextmanager
def js_peer(dial: str, to: str, text: str) -> Iterator[JsPeer]:
    process = subprocess.Popen(
        ["node", "peer.mjs", "--dial", dial, "--to", to, "--text", text],
        cwd=JS_PEER,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    try:
        yield JsPeer(process)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def test_a_js_libp2p_node_and_a_persona_exchange_signed_containers(tmp_path: Path) -> None:
    libp2p_venv()
    js_peer_installed()
    Database.open(tmp_path / "a").close()
    persona = Door(tmp_path, "a", [], [])
    persona.start()
    try:
        did, address = persona.read()["did"], persona.read()["addrs"][0]
        with js_peer(address, did, "hello from js-libp2p") as js:
            assert wait_for(lambda: js.saw(event="ready") is not None, WAIT), js.lines
            js_did = js.saw(event="ready")["did"]  # type: ignore[index]
            # the JS node verified the persona's signed have (its key bound to its libp2p peer) and its hello
            assert wait_for(lambda: js.saw(event="have", did=did, verified=True) is not None, WAIT), js.lines
            assert wait_for(lambda: js.saw(event="container", type="hello", sender=did, verified=True), WAIT), js.lines
            # the persona bound the JS node's DID by its signed have, and kept its signed message as a note
            assert wait_for(lambda: js_did in persona.read().get("dids", []), WAIT), persona.log_tail()

            def notes() -> list[tuple[str, list[str]]]:
                for house in persona.managers():
                    return [
                        (n.text, list(n.tags or []))
                        for n in house.repos.session.query(Note).filter(Note.source == "peer").all()
                    ]
                return []

            assert wait_for(lambda: any(t == "hello from js-libp2p" for t, _ in notes()), WAIT), persona.log_tail()
            [tags] = [tags for text, tags in notes() if text == "hello from js-libp2p"]
            assert f"peer:{js_did}" in tags and f"from:{js_did}" in tags
            # and the other way: a message the persona writes to the JS node, verified there
            for house in persona.managers():
                house.mesh.compose("message", {"text": "hello from py-libp2p"}, recipient=js_did)
            assert wait_for(
                lambda: js.saw(
                    event="container",
                    type="message",
                    sender=did,
                    verified=True,
                    payload={"text": "hello from py-libp2p"},
                ),
                WAIT,
            ), js.lines
            assert not [e for e in js.events if e.get("event") == "container" and not e.get("verified")]
    finally:
        persona.stop()
