"""`run.py`, killed (SIGKILL) right after a tick's answer is kept — a `kill -9` at exactly that point, for
tests/integration/test_kill_after_answer.py. Once the answer is kept it writes `answer_kept` into HOOK_DIR, waits (at
most KILL_WAIT_S) for the test to write `kill` there, then kills itself.

    python -m tests.integration.kill_after_answer HOOK_DIR [run.py's arguments…]
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import time
from pathlib import Path
from typing import Any

from tests.integration.servers import ROOT

KILL_WAIT_S = 120.0


def main() -> None:
    hook, arguments = Path(sys.argv[1]), sys.argv[2:]
    import nodes.steps.s05_call_llm as step

    keep_answer = step._answer

    def kept_then_killed(*args: Any, **kwargs: Any) -> Any:
        answer = keep_answer(*args, **kwargs)
        (hook / "answer_kept").touch()
        deadline = time.monotonic() + KILL_WAIT_S
        while not (hook / "kill").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGKILL)
        return answer

    step._answer = kept_then_killed  # looked up by call_llm at each call
    sys.argv = [str(ROOT / "run.py"), *arguments]
    runpy.run_path(str(ROOT / "run.py"), run_name="__main__")


if __name__ == "__main__":
    main()
