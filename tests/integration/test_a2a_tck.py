"""The A2A 1.0 TCK (a2aproject/a2a-tck, vendored and pinned in tests/vendor/a2a-tck) against a persona as served:
`run.py serve`, the real endpoint, the TCK's own clients in their own venv; the scenarios drive the persona's
replies through its PeerManager (tests/integration/a2a_tck.py). Every MUST it tests passes; the SHOULDs the brief
names (the card's caching headers, the A2A error for a wrong Content-Type, a multi-turn task's history) too.
bench/a2a_tck.py prints the whole report."""

from __future__ import annotations

import pytest

from tests.integration.a2a_tck import counts, failures, persona_under_tck, run_tck

pytestmark = pytest.mark.integration


def test_every_must_of_the_a2a_tck_passes_against_a_served_persona(tmp_path):
    with persona_under_tck(tmp_path) as (url, responder):
        report = run_tck(url, tmp_path / "reports")
    table = counts(report)
    assert failures(report, "MUST") == {}, report["pytest_tail"]
    assert table["MUST"].get("pass", 0) >= 60, table  # the JSON-RPC binding's MUSTs ran (none skipped away)
    passed = {rid for rid, r in report["per_requirement"].items() if r["status"] == "PASS"}
    assert {
        "CARD-CACHE-001",
        "CARD-CACHE-002",
        "CARD-CACHE-003",
        "JSONRPC-SSE-002",
        "CORE-CANCEL-001",
        "CORE-LIST-001",
        "CORE-GET-001",
        "DM-ART-001",
        "DM-MSG-001",
        "CORE-STREAM-001",
        "CORE-HIST-002",
        "CORE-HIST-005",
        "CORE-HIST-006",
    } <= passed, sorted(failures(report))
    assert responder.errors == []
    assert {"answer", "question", "plain"} <= set(responder.answered)  # results, input-required, a Message
