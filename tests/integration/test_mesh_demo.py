"""The README's two commands, run as a user runs them: `python -m mesh --data-dir data/a`, then `python -m mesh
--data-dir data/b --topic tides --bootstrap <a's address>`. Each prints that it met the other (by its DID, proven by
its signed `have`) and that it received the other's signed hello, signature verified; and the Mesh page of persona a
(`run.py serve` over data/a, in a real browser) shows it live, over the page's SSE stream. Every wait is bounded;
every process is stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import expect

from mesh.transport import wait_for
from tests.integration.servers import served_web_app
from tests.integration.test_mesh_processes import LIBP2P_PYTHON, libp2p_venv

ROOT = Path(__file__).resolve().parents[2]
WAIT = 90.0  # a hang guard on a loaded machine, not a timing


class Printed:
    """A `python -m mesh` process and every line it printed so far."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process, self.lines = process, []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def first(self) -> dict:
        assert wait_for(lambda: any(line.startswith("{") for line in self.lines), WAIT), self.lines
        return dict(json.loads(next(line for line in self.lines if line.startswith("{"))))

    def said(self, *words: str) -> bool:
        return any(all(word in line for word in words) for line in self.lines)


@contextmanager
def mesh_command(cwd: Path, *args: str) -> Iterator[Printed]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANIMA_MESH__SIDECAR_PYTHON": str(LIBP2P_PYTHON)}
    process = subprocess.Popen(
        [sys.executable, "-m", "mesh", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        bufsize=1,
    )
    try:
        yield Printed(process)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def test_the_readme_two_commands_show_two_personas_meeting_and_the_mesh_page_shows_it_live(
    tmp_path: Path, page
) -> None:
    libp2p_venv()
    with mesh_command(tmp_path, "--data-dir", "data/a") as a:
        first = a.first()
        did_a, address = first["did"], first["addrs"][0]
        with served_web_app(tmp_path / "data" / "a") as url:
            page.goto(f"{url}/mesh")
            expect(page.get_by_test_id("mesh-live-empty")).to_be_visible()
            with mesh_command(tmp_path, "--data-dir", "data/b", "--topic", "tides", "--bootstrap", address) as b:
                did_b = b.first()["did"]
                # a line each side: whom it met, what it received, verified
                assert wait_for(lambda: a.said("met", did_b) and b.said("met", did_a), WAIT), (a.lines, b.lines)
                assert wait_for(
                    lambda: a.said("received a signed hello", did_b, "signature verified", "it listens to: tides"), WAIT
                ), a.lines
                assert wait_for(lambda: b.said("received a signed hello", did_a, "signature verified"), WAIT), b.lines
                assert b.said("sent a signed hello") and a.said("sent a signed hello")
                # the Mesh page of a, open since before b started, shows the same, live (no reload)
                events = page.get_by_test_id("mesh-event")
                expect(events.filter(has_text=did_b).filter(has_text="signature verified")).to_have_count(1)
                expect(events.filter(has_text=f"met {did_b}")).to_have_count(1)
