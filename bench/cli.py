"""Command-line start-up benchmark (JSON): the wall time of `run.py --help`, `run.py say --help` and a real `run.py say`
round trip (a fresh process posts a note into a data dir's SQLite database and exits; the data dir is made by one
warm-up `say` first), each run N times in a fresh interpreter; the median, min and max in ms, and the number of
modules the process imported.

It imports nothing of anima, so it measures any checkout: give several roots and their runs are interleaved (the
same load for each), one JSON line per root — e.g. before/after a change:

    python bench/cli.py --root /work/main --root . [--n 9]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# counts the modules loaded, at exit, on stderr (the command's own output is left alone)
PROBE = """
import atexit, runpy, sys
atexit.register(lambda: sys.stderr.write(f"\\nMODULES {len(sys.modules)}\\n"))
sys.argv = ["run.py", *sys.argv[1:]]
runpy.run_path("run.py", run_name="__main__")
"""

CASES = {"help": ["--help"], "say_help": ["say", "--help"], "say": ["say"]}


def timed(root: Path, args: list[str]) -> tuple[float, int]:
    """One fresh `run.py ARGS` in `root`: (wall ms, modules imported); a failure stops the benchmark."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "COLUMNS": "120"},
    )
    elapsed = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{root}: run.py {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    modules = int(done.stderr.rpartition("\nMODULES ")[2].split()[0])
    return elapsed, modules


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", action="append", type=Path, help="a checkout's root (repeat); default this one")
    parser.add_argument("--n", type=int, default=7, help="runs of each command per root")
    options = parser.parse_args()
    roots = [r.resolve() for r in (options.root or [Path(__file__).resolve().parent.parent])]
    load_before = os.getloadavg()
    results: dict[Path, dict[str, list[tuple[float, int]]]] = {root: {case: [] for case in CASES} for root in roots}
    with tempfile.TemporaryDirectory(prefix="anima-bench-cli-") as tmp:
        data = {root: Path(tmp) / f"data{i}" for i, root in enumerate(roots)}
        for root in roots:  # warm-up: the data dir and its schema, and the interpreter's caches
            timed(root, ["say", "warm-up", "--data-dir", str(data[root])])
        for run in range(options.n):
            for case, args in CASES.items():
                for root in roots:
                    given = [*args, f"bench note {run}", "--data-dir", str(data[root])] if case == "say" else args
                    results[root][case].append(timed(root, given))
    load_after = os.getloadavg()
    for root in roots:
        report: dict[str, object] = {
            "root": str(root),
            "n": options.n,
            "load_1m": [round(load_before[0], 2), round(load_after[0], 2)],
            "cpus": os.cpu_count(),
        }
        for case, runs in results[root].items():
            ms = [m for m, _ in runs]
            report[case] = {
                "median_ms": round(statistics.median(ms)),
                "min_ms": round(min(ms)),
                "max_ms": round(max(ms)),
                "modules": runs[-1][1],
            }
        print(json.dumps(report))


if __name__ == "__main__":
    main()
