"""Install-size benchmark (JSON): what `torch==2.13.0` costs from a stock package index against the CPU build the
Makefile installs (tools/install_torch.sh), and the size of an installed venv.

- stock: `pip install --isolated --dry-run --ignore-installed --report` of torch against PyPI alone (`--isolated`
  ignores this machine's pip configuration: mirrors, find-links), then each wheel's size from a HEAD request;
- cpu: the same resolution against the PyTorch CPU index (TORCH_INDEX), when it answers, and of `torch==…+cpu`
  through this machine's own pip configuration (a mirror or find-links: tools/install_torch.sh's third way);
- venv: `du` of the venv given (default: the running interpreter's), and of its torch package.

    python bench/install_size.py [--venv .venv] [--skip-network]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

TORCH = "torch==2.13.0"
CUDA_PREFIXES = ("nvidia", "cuda", "triton")


def du_bytes(path: Path) -> int | None:
    if not path.exists():
        return None
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, timeout=300)
    return int(out.stdout.split()[0]) if out.returncode == 0 else None


def wheel_size(url: str) -> int:
    if url.startswith("file://"):
        return os.path.getsize(urllib.request.url2pathname(url[7:]))
    with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=30) as answer:
        return int(answer.headers.get("Content-Length") or 0)


def resolve(*index_args: str, isolated: bool = True) -> dict[str, Any]:
    """What pip would install for torch (names, versions, download bytes), or why it could not tell."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                *(["--isolated"] if isolated else []),
                "--dry-run",
                "--ignore-installed",
                "--quiet",
                "--report",
                str(report),
                *index_args,
                TORCH + ("+cpu" if not isolated else ""),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0 or not report.exists():
            return {"error": (done.stderr or done.stdout).strip().splitlines()[-1:][0:1] or ["pip failed"]}
        items = json.loads(report.read_text())["install"]
    packages = []
    for item in items:
        name, url = item["metadata"]["name"], item["download_info"]["url"]
        try:
            size = wheel_size(url)
        except OSError:
            size = None
        packages.append({"name": name, "version": item["metadata"]["version"], "bytes": size})
    cuda = [p for p in packages if p["name"].lower().startswith(CUDA_PREFIXES)]
    return {
        "packages": len(packages),
        "download_bytes": sum(p["bytes"] or 0 for p in packages),
        "cuda_packages": len(cuda),
        "cuda_download_bytes": sum(p["bytes"] or 0 for p in cuda),
        "torch": next((p for p in packages if p["name"] == "torch"), None),
        "cuda_names": sorted(p["name"] for p in cuda),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", default=str(Path(sys.executable).resolve().parents[1]))
    parser.add_argument("--skip-network", action="store_true")
    args = parser.parse_args()
    venv = Path(args.venv)
    torch_dirs = sorted(venv.glob("lib/python3*/site-packages/torch"))
    result: dict[str, Any] = {
        "venv": str(venv),
        "venv_bytes": du_bytes(venv),
        "venv_torch_bytes": du_bytes(torch_dirs[0]) if torch_dirs else None,
    }
    if not args.skip_network:
        result["stock_index"] = resolve()
        result["cpu_index"] = resolve(
            "--index-url", os.environ.get("TORCH_INDEX", "https://download.pytorch.org/whl/cpu")
        )
        result["cpu_wheel_from_this_machines_pip_config"] = resolve(isolated=False)  # tools/install_torch.sh step 3
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
