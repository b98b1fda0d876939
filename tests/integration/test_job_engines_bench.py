"""bench/job_engines.py on a tiny run of its per-key scenario: both engines measured on a real PostgreSQL cluster with
real worker processes, every job run, and no two jobs of a key at once."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.integration.servers import ROOT

pytestmark = pytest.mark.integration
GUARD_S = 240  # a hang guard, not a timing


def test_per_key_runs_of_both_engines_lose_nothing_and_never_overlap_a_key():
    pytest.importorskip("pgqueuer", reason="the bench extra (pip install -e '.[bench]')")
    pytest.importorskip("asyncpg", reason="the bench extra (pip install -e '.[bench]')")
    run = subprocess.run(
        [
            sys.executable,
            "bench/job_engines.py",
            "--scenarios",
            "per_key",
            "--keys",
            "4",
            "--per-key",
            "3",
            "--job-s",
            "0.05",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=GUARD_S,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)
    assert set(result["engines"]) == {"procrastinate", "pgqueuer"}
    for engine, measured in result["engines"].items():
        per_key = measured["per_key"]
        assert (per_key["keys"], per_key["jobs_per_key"]) == (4, 3)
        for batch in (per_key["without_keys"], per_key["with_keys"]):
            assert batch["jobs"] == 12 and batch["lost"] == 0, (engine, batch)
            assert "timed_out_after_s" not in batch and batch["jobs_per_s"] > 0
        assert per_key["with_keys"]["same_key_overlaps"] == 0, engine
    procrastinate = result["engines"]["procrastinate"]["per_key"]
    assert procrastinate["without_keys"]["doubled"] == procrastinate["with_keys"]["doubled"] == 0
    # pgqueuer's dedupe_key keeps one job per key and refuses the rest
    assert result["pgqueuer_dedupe_key"] == {"enqueued": 12, "accepted": 4, "refused": 8}
