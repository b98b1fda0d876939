"""The house rules, checked on the source: imports run one way (cli/run.py → web → graph → nodes → managers → persona →
memory, llm), no module imports itself back through another, no door imports another door, commands reach the
repositories only through the managers, the tick's steps sit in tick order, and ARCHITECTURE.md names every room the
tree has (and no room it has not)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("cli", "web", "graph", "channels", "nodes", "managers", "persona", "memory", "llm", "reach", "mesh", "i18n")
# what each layer may import (besides itself); run.py may import everything
ALLOWED = {
    "cli": {"web", "graph", "nodes", "managers", "persona", "memory", "llm", "reach", "mesh"},
    "web": {"graph", "nodes", "managers", "persona", "memory", "llm", "reach"},
    "graph": {"channels", "nodes", "managers", "persona", "memory", "llm", "reach"},
    "channels": {"managers", "persona", "memory", "llm", "reach"},
    "nodes": {"managers", "persona", "memory", "llm", "reach"},
    "managers": {"persona", "memory", "llm", "reach"},
    "persona": {"memory", "llm"},
    "memory": set(),
    "llm": set(),
    "reach": set(),
    # a door beside the loop: its transport, then managers (the sidecar imports only libp2p and the stdlib)
    "mesh": {"managers", "persona", "memory", "llm", "reach"},
    "i18n": set(),
}
for _layer, _below in ALLOWED.items():  # the catalogues are beneath everything: any room may translate
    if _layer != "i18n":
        _below.add("i18n")


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def _runtime_nodes(tree: ast.AST):
    """Every node except what sits under `if TYPE_CHECKING:` (annotations only, never imported at run time)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            continue
        yield node
        yield from _runtime_nodes(node)


def imports_of(path: Path, known: set[str], type_only: bool = False) -> set[str]:
    """Project modules `path` imports at run time, at module level or inside functions (and with `type_only`, under
    `if TYPE_CHECKING:` as well)."""
    out = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree) if type_only else _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                out.add(name)
    return out


# The doors: what a person, a program or the persona itself comes in by. A door validates what it is given, calls a
# manager (managers/) and reports in its own medium; it never goes through another door.
DOORS = ("nodes.commands", "cli", "web", "graph.fleet.worker", "channels", "mesh")
# the command line starts the other doors' servers and workers: their launch points are its to import
LAUNCH_POINTS = {"cli": {"web.server", "web.security", "web.mcp", "graph.fleet.worker", "mesh.runner"}}


def door_of(module: str) -> str | None:
    return next((d for d in sorted(DOORS, key=len, reverse=True) if module == d or module.startswith(d + ".")), None)


def test_no_door_imports_another_door():
    known = modules()
    wrong = []
    for name, path in known.items():
        door = door_of(name)
        if door is None:
            continue
        for target in imports_of(path, set(known), type_only=True):
            other = door_of(target)
            if other is not None and other != door and target not in LAUNCH_POINTS.get(door, set()):
                wrong.append(f"{name} imports {target}")
    assert not wrong, "\n".join(sorted(wrong))


# Command modules that are the commands' own machinery, not a family of commands: they build the context a handler
# runs in (spec.py), admit, parse and check arguments.
COMMAND_INFRASTRUCTURE = {"__init__", "spec", "admission", "parser", "args", "model"}


def _touches_repositories(path: Path) -> list[str]:
    """Where a module reaches the repositories itself: `ctx.repos` (any `.repos`), `repos.<…>`, or an import of
    memory.repositories."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr == "repos":
            found.append(f"line {node.lineno}: .repos")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "repos":
            found.append(f"line {node.lineno}: repos.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("memory.repositories"):
            found.append(f"line {node.lineno}: imports {node.module}")
        elif isinstance(node, ast.Import):
            found += [
                f"line {node.lineno}: imports {a.name}" for a in node.names if a.name.startswith("memory.repositories")
            ]
    return found


def test_commands_reach_repositories_only_through_managers():
    families = {p.stem: p for p in (ROOT / "nodes" / "commands").glob("*.py") if p.stem not in COMMAND_INFRASTRUCTURE}
    assert len(families) > 20, "the command families were not found"
    wrong = [
        f"nodes/commands/{name}.py {where}"
        for name, path in sorted(families.items())
        for where in _touches_repositories(path)
    ]
    assert not wrong, "a command calls a manager (ctx.managers.<resource>), never the repositories:\n" + "\n".join(
        wrong
    )


# The rooms that reach the domain only through the managers (`ManagerFactory.unit(actor)` / `.over(repos)` and a
# manager's method): the web app, the command line and the loop (graph/).
THROUGH_MANAGERS = ("web", "cli", "graph")
# Rooms still on their way there: their reaches into the repositories may only shrink (ARCHITECTURE.md "Doors →
# managers → domains" says what is left). Counted by `_touches_repositories`, as `bench/repository_calls.py` counts.
STILL_REACHING = {"nodes": 95}


def _reaches(room: str) -> list[str]:
    return [
        f"{path.relative_to(ROOT)} {where}"
        for path in sorted((ROOT / room).rglob("*.py"))
        for where in _touches_repositories(path)
    ]


def test_the_web_and_the_command_line_reach_repositories_only_through_managers():
    wrong = [where for room in THROUGH_MANAGERS for where in _reaches(room)]
    assert not wrong, (
        "a door calls a manager (house.<resource>.<method>), never the repositories; a rule it needs "
        "that no manager has goes into a manager:\n" + "\n".join(wrong)
    )


def test_the_tick_reaches_the_repositories_no_more_than_before():
    grown = {room: len(_reaches(room)) for room, most in STILL_REACHING.items() if len(_reaches(room)) > most}
    assert not grown, f"new repository calls in {grown} (at most {STILL_REACHING}): go through a manager"


def test_managers_import_no_door_and_nothing_above_them():
    """The managers serve every door: they import the domains (and each other), never a door, nodes/ or graph/ —
    type-only imports included."""
    known = modules()
    allowed = ALLOWED["managers"] | {"managers"}
    wrong = [
        f"{name} imports {target}"
        for name, path in known.items()
        if name.split(".")[0] == "managers"
        for target in imports_of(path, set(known), type_only=True)
        if target.split(".")[0] not in allowed
    ]
    assert not wrong, "\n".join(sorted(wrong))


def test_imports_run_one_way():
    known = modules()
    wrong = []
    for name, path in known.items():
        layer = name.split(".")[0]
        for target in imports_of(path, set(known)):
            other = target.split(".")[0]
            if other != layer and other not in ALLOWED[layer]:
                wrong.append(f"{name} imports {target}")
    assert not wrong, "\n".join(wrong)


def import_circles(type_only: bool = False) -> list[list[str]]:
    """The project's import circles (strongly connected components of the module graph), each sorted."""
    known = modules()
    graph = {name: imports_of(path, set(known), type_only) - {name} for name, path in known.items()}
    # a package's __init__ re-exporting its own modules is not a circle through them
    edges = {
        name: {t for t in targets if not (name.startswith(t + ".") or t.startswith(name + "."))}
        for name, targets in graph.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for name in sorted(edges):
        if name not in index:
            visit(name)
    return circles


def test_no_import_circles():
    assert import_circles() == []


def test_no_import_circles_through_type_only_imports():
    """A circle hidden behind `if TYPE_CHECKING:` is still a circle: the two modules cannot be read (or moved) one
    without the other."""
    assert import_circles(type_only=True) == []


def test_the_steps_are_in_tick_order():
    from nodes.steps import TICK_STEPS

    playbook = yaml.safe_load((ROOT / "playbooks" / "epos.yaml").read_text())
    nodes = {n["id"]: n for n in playbook["nodes"]}
    order, current = [], playbook["start"]
    while current != "END":
        order.append(nodes[current]["type"])
        node = nodes[current]
        current = node.get("next") or node["conditional_next"]["default"]
    files = sorted(
        p.stem if p.is_file() else p.name for p in (ROOT / "nodes" / "steps").iterdir() if re.match(r"s\d\d_", p.name)
    )
    assert [re.sub(r"^s\d\d_", "", f).removesuffix(".py") for f in files] == order == list(TICK_STEPS)


def drawn_rooms(text: str) -> set[str]:
    """The folders ARCHITECTURE.md's tree draws: `name/` at the start of a line, nested by two spaces a level."""
    tree = text.split("```", 2)[1]
    rooms, parents = set(), []
    for line in tree.splitlines():
        match = re.match(r"^( *)([a-z_0-9]+)/(?:\s|$)", line)
        if match:
            depth = len(match.group(1)) // 2
            parents = parents[:depth] + [match.group(2)]
            rooms.add("/".join(parents))
    return rooms


def test_architecture_md_draws_exactly_the_rooms_the_tree_has():
    rooms = {
        str(p.relative_to(ROOT))
        for package in PACKAGES
        for p in [ROOT / package, *(ROOT / package).rglob("*")]
        if p.is_dir() and (p / "__init__.py").exists()
    }
    drawn = drawn_rooms((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8"))
    assert sorted(rooms - drawn) == [], "ARCHITECTURE.md does not draw these rooms"
    assert sorted(drawn - rooms - {"playbooks", "bench", "tests", "tools"}) == [], (
        "ARCHITECTURE.md draws rooms that do not exist"
    )


def test_sql_lives_only_in_the_memory_room():
    """Above memory/, nothing builds SQL: the repositories are the only way to the database."""
    offenders = []
    for name, path in modules().items():
        if name.startswith("memory"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [module or ""]
            if any(n == "sqlalchemy" or (n.startswith("sqlalchemy.") and n != "sqlalchemy.exc") for n in names):
                offenders.append(name)
    assert offenders == []


def test_no_test_fakes_in_product_packages():
    """Test fakes live under tests/fakes/: no product package has a testing.py or imports from tests."""
    named_testing = [str(p.relative_to(ROOT)) for package in PACKAGES for p in (ROOT / package).rglob("testing.py")]
    assert named_testing == [], "test fakes belong in tests/fakes/"
    importing_tests = []
    for name, path in modules().items():
        for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                targets = [node.module or ""]
            else:
                continue
            if any(t == "tests" or t.startswith("tests.") for t in targets):
                importing_tests.append(name)
    assert importing_tests == [], "product modules import from tests"


def test_steps_name_their_own_number_and_no_missing_document():
    """A step's docstring names its own file's number (s10 → "Step 10"); no product module cites "DESIGN §", a
    document the repository does not have."""
    wrong = []
    for path in sorted((ROOT / "nodes" / "steps").iterdir()):
        match = re.match(r"s(\d\d)_", path.name)
        if not match:
            continue
        source = path / "__init__.py" if path.is_dir() else path
        doc = ast.get_docstring(ast.parse(source.read_text(encoding="utf-8"))) or ""
        named = re.findall(r"\bstep\s+(\d+[a-z]?)\b", doc, flags=re.IGNORECASE)
        wrong += [f"{path.name} names step {n}" for n in named if n != str(int(match.group(1)))]
    assert wrong == [], "\n".join(wrong)
    citing = [name for name, path in modules().items() if "DESIGN §" in path.read_text(encoding="utf-8")]
    assert citing == [], f"cite a file the repository has, or say it in plain words: {citing}"
