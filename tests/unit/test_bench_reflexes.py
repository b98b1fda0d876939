"""bench/reflexes.py fails loudly: a stage that raises, ends the process, or silences stdout gives a non-zero exit,
`bench/reflexes.py: stage <name> failed: <reason>` on stderr, and the partial JSON marked incomplete on stdout."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bench(monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_reflexes_under_test", ROOT / "bench" / "reflexes.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclass looks its module up
    monkeypatch.setattr(sys, "path", list(sys.path))  # it puts the repo and bench/data on the path
    spec.loader.exec_module(module)
    return module


def fake_config(failing: str | None = None, failure=None):
    def run_config(name, ticks, max_tokens, validators, reflexes):
        if name == failing:
            failure()
        return {"ticks": ticks, "llm_calls_per_tick": 1.0 if reflexes else 0.5, "validators": validators}

    return run_config


def test_all_stages_pass(bench, monkeypatch, capfd):
    monkeypatch.setattr(bench, "run_config", fake_config())
    assert bench.main(["--skip-detection", "--ticks", "2"]) == 0
    out, err = capfd.readouterr()
    result = json.loads(out)
    assert "incomplete" not in result and "failed" not in err
    assert set(result["cost"]) >= {"reflexes_off", "reflexes_on_0_validators", "reflexes_on_2_validators"}
    assert result["cost"]["target_met"] is True


def test_a_stage_that_raises_is_loud_and_keeps_the_partial_results(bench, monkeypatch, capfd):
    def boom():
        raise RuntimeError("boom")

    monkeypatch.setattr(bench, "run_config", fake_config("reflexes_on_2_validators", boom))
    assert bench.main(["--skip-detection", "--ticks", "1"]) == 1
    out, err = capfd.readouterr()
    assert "bench/reflexes.py: stage cost/reflexes_on_2_validators failed: RuntimeError: boom" in err
    result = json.loads(out)
    assert result["incomplete"] is True and result["failed_stage"] == "cost/reflexes_on_2_validators"
    assert set(result["cost"]) >= {"reflexes_off", "reflexes_on_0_validators"}
    assert "reflexes_on_2_validators" not in result["cost"]


def test_a_quiet_exit_inside_a_stage_is_a_failure(bench, monkeypatch, capfd):
    monkeypatch.setattr(bench, "run_config", fake_config("reflexes_off", lambda: sys.exit(0)))
    assert bench.main(["--skip-detection"]) == 1
    out, err = capfd.readouterr()
    assert "stage cost/reflexes_off failed: SystemExit(0)" in err
    assert json.loads(out)["incomplete"] is True


def test_a_stage_that_silences_stdout_is_caught_and_the_json_still_printed(bench, monkeypatch, capfd):
    """What two overlapping llama.cpp loads did: fds 1 and 2 and sys.stdout/sys.stderr left on /dev/null."""
    original = sys.stdout, sys.stderr
    devnull = open(os.devnull, "w")

    def silence():
        os.dup2(devnull.fileno(), 1)
        os.dup2(devnull.fileno(), 2)
        sys.stdout = sys.stderr = devnull

    monkeypatch.setattr(bench, "run_config", fake_config("reflexes_on_2_validators", silence))
    try:
        assert bench.main(["--skip-detection", "--ticks", "1"]) == 1
    finally:
        devnull.close()
    assert (sys.stdout, sys.stderr) == original  # put back by the bench
    out, err = capfd.readouterr()
    assert "stage cost/reflexes_on_2_validators failed: the stage silenced the process's output" in err
    assert "fd 1 now points to /dev/null" in err and "sys.stdout was replaced" in err
    result = json.loads(out)
    assert result["incomplete"] is True and "reflexes_on_2_validators" in result["cost"]
    print("stdout works again")
    assert capfd.readouterr().out == "stdout works again\n"
