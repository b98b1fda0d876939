"""A spawned child with an identity and an address of its own, started beside its parent's loop (`spawn.autostart`),
against real processes: the operator's `run.py spawn` makes Mira from Ada (newborn); Ada's `run.py` (the loop and its
web app, thinking on the scripted model server) starts Mira's own `run.py` on the port the birth gave her; each
finds the other in its peers — Mira by her own DID and address, Ada by hers — and each reaches the other over A2A
through those rows and the credentials they swapped at the birth (their thoughts send to each other by name); when
Ada stops, Mira is stopped."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from reach.hmp.identity import Identity
from tests.integration.browser import http_json, seed_pace, varied_thoughts, web_loop
from tests.integration.test_a2a_real import persona_named

pytestmark = pytest.mark.integration

WAIT_S = 150  # hang guards, not timings
COMMANDS = (
    "\n# Commands:\n"
    + json.dumps([{"type": "messages.send", "args": {"to": to, "text": f"Hello {to}"}} for to in ("Mira", "Ada")])
    + "\n# End commands\n"
)


def did_of(data_dir: Path) -> str:
    return Identity.from_pem((data_dir / "mesh" / "identity.key").read_bytes()).did


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/api/loop", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def wait(what, seconds: float, why: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {why}")


def test_an_autostarted_child_runs_beside_its_parent_and_each_reaches_the_other(scripted_server, tmp_path):
    scripted_server.script(
        *({"do": "whole", "text": t + COMMANDS} for t in varied_thoughts(3000, seed=47)),
        default={"do": "whole", "text": "The last scripted thought." + COMMANDS},
        record=False,
    )
    ada_dir = persona_named(tmp_path, "Ada")
    config = yaml.safe_load((ada_dir / "config.yaml").read_text())
    config["spawn"] = {"autostart": True, "start_timeout_s": 120}
    (ada_dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    ada_data = tmp_path / "ada"
    seed_pace(ada_data, 1.0)
    from cli import app

    born = CliRunner().invoke(
        app, ["spawn", "Mira", "--mode", "newborn", "--data-dir", str(ada_data), "--from", str(ada_dir)]
    )
    assert born.exit_code == 0, born.output
    mira_data = tmp_path / "ada-mira"
    assert "itsDIDdid:key:z" in "".join(born.output.split()) and (tmp_path / "mira" / "config.yaml").exists()
    seed_pace(mira_data, 1.0)
    with web_loop(ada_data, llm_url=scripted_server.url, pace_s=1.0, persona_dir=ada_dir, start_s=WAIT_S) as ada:
        mira_row = next(p for p in ada.api("/api/peers") if p["name"] == "Mira")
        mira_url = mira_row["a2a_url"]
        assert mira_row["did"] == did_of(mira_data) != did_of(ada_data)  # her own key, her own DID
        assert mira_url.startswith("http://127.0.0.1:") and mira_row["added_by"] == "spawn"
        assert wait(lambda: answers(mira_url), WAIT_S, "Mira's own run.py, started by Ada's")
        card = http_json(mira_url + "/.well-known/agent-card.json")[1]
        assert card["name"] == "Mira"
        ada_row = next(p for p in http_json(mira_url + "/api/peers")[1] if p["name"] == "Ada")
        assert (ada_row["did"], ada_row["a2a_url"]) == (did_of(ada_data), ada.url)  # her parent's DID and address
        # each reaches the other through those rows: their thoughts send by name, over A2A
        wait(
            lambda: [h for h in http_json(mira_url + "/api/mesh")[1]["heard"] if h["peer"] == "Ada"],
            WAIT_S,
            "Ada's message at Mira",
        )
        wait(lambda: [h for h in ada.api("/api/mesh")["heard"] if h["peer"] == "Mira"], WAIT_S, "Mira's message at Ada")
    assert wait(lambda: not answers(mira_url), 60, "Mira stopped with her parent")
    assert "web app" in (mira_data / "run.log").read_text()
