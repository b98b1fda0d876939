"""The A2A 1.0 TCK's compatibility report for a persona as served (JSON): a2aproject/a2a-tck (branch 1.0-dev, the
commit vendored in tests/vendor/a2a-tck) against `run.py serve` on loopback, the TCK's scenarios driving the
persona's replies (tests/integration/a2a_tck.py). Requirements by level (MUST / SHOULD / MAY) and status (pass, fail,
skipped — a transport the card does not declare: gRPC, HTTP+JSON —, not tested — no TCK test exists yet), the
failed ones with their first error, per transport, and how long the run took.

    python bench/a2a_tck.py [--level must|should|may]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    from tests.integration.a2a_tck import TCK_DIR, counts, failures, persona_under_tck, run_tck

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--level", choices=["must", "should", "may"], default=None)
    args = parser.parse_args()
    vendored = (TCK_DIR / "VENDORED.md").read_text()
    commit = next((line.split("`")[1] for line in vendored.splitlines() if line.startswith("- commit:")), "?")
    with tempfile.TemporaryDirectory(prefix="anima-bench-tck-") as tmp:
        with persona_under_tck(Path(tmp)) as (url, responder):
            started = time.perf_counter()
            report = run_tck(url, Path(tmp) / "reports", level=args.level)
            seconds = time.perf_counter() - started
    print(
        json.dumps(
            {
                "tck": "a2aproject/a2a-tck 1.0-dev",
                "commit": commit,
                "sut": "run.py serve (JSON-RPC, streaming)",
                "summary": report["summary"],
                "requirements": counts(report),
                "failed": failures(report),
                "per_transport": report["per_transport"],
                "replies": dict(responder.answered),
                "seconds": round(seconds, 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
