"""Repository calls outside the managers (JSON): per room, how many calls reach a repository themselves
(`repos.<repository>.<method>(…)`, also through `ctx.repos`/`self.repos`/`house.repos`), how many of them write, and
the files they are in.

    python bench/repository_calls.py [--root DIR] [--files]

A call counts when its callee is an attribute chain `….repos.<repository>.<method>` or `repos.<repository>.<method>`;
it writes when the method's name starts with a verb that changes rows (add, set, update, delete, …) or is an
attribute assignment `repos.<repository>.<field> = …`. The rooms are the doors and the tick: nodes/, graph/, web/, cli/
(and channels/, mesh/ for comparison); managers/ and memory/ own the repositories and are not counted.
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

ROOMS = ("nodes", "graph", "web", "cli", "channels", "mesh")
WRITES = (
    "add",
    "set",
    "update",
    "delete",
    "remove",
    "put",
    "insert",
    "mark",
    "record",
    "create",
    "clear",
    "save",
    "store",
    "write",
    "bump",
    "close",
    "open",
    "archive",
    "append",
    "upsert",
    "touch",
    "finish",
    "start",
    "claim",
    "release",
    "enqueue",
    "log",
    "expire",
    "prune",
    "reset",
    "replace",
    "merge",
    "move",
    "drop",
    "apply",
    "commit",
    "flush",
    "register",
    "increment",
    "purge",
)


def _chain(node: ast.AST) -> list[str]:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return parts[::-1]


def _repository_method(chain: list[str]) -> tuple[str, str] | None:
    """(repository, method) when the chain goes through `repos.<repository>.<method>`."""
    for i, part in enumerate(chain[:-2]):
        if part == "repos":
            return chain[i + 1], chain[i + 2]
    return None


def calls_in(path: Path) -> list[tuple[int, str, bool]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            hit = _repository_method(_chain(node.func))
            if hit is not None:
                out.append((node.lineno, f"{hit[0]}.{hit[1]}", hit[1].lstrip("_").startswith(WRITES)))
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                chain = _chain(target)
                if len(chain) >= 3 and "repos" in chain[:-2]:
                    i = chain.index("repos")
                    out.append((node.lineno, f"{chain[i + 1]}.{chain[i + 2]} =", True))
    return out


def count(root: Path, rooms: tuple[str, ...] = ROOMS) -> dict:
    result = {}
    for room in rooms:
        files = {}
        for path in sorted((root / room).rglob("*.py")):
            found = calls_in(path)
            if found:
                files[str(path.relative_to(root))] = found
        calls = [c for found in files.values() for c in found]
        result[room] = {
            "calls": len(calls),
            "writes": sum(1 for c in calls if c[2]),
            "files": len(files),
            "by_file": {name: len(found) for name, found in files.items()},
            "where": {name: [f"{line}: {what}" for line, what, _ in found] for name, found in files.items()},
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--files", action="store_true", help="also list every call, file by file")
    args = parser.parse_args()
    result = count(args.root)
    if not args.files:
        for room in result.values():
            room.pop("where")
    summary = {room: {k: v[k] for k in ("calls", "writes", "files")} for room, v in result.items()}
    print(json.dumps({"summary": summary, "rooms": result}, indent=2))


if __name__ == "__main__":
    main()
