"""The memory layer's shape: SQL only in memory/repositories/ (and the migrations in memory/db.py), no Repos
session reached into from outside them, nothing imported from the layers above, and no import circle among its
modules. Checked on the syntax tree, so comments and strings do not count."""

import ast
from pathlib import Path

import pytest

MEMORY = Path(__file__).resolve().parents[2] / "memory"
SQL_BUILDERS = {"select", "delete", "update", "insert", "text", "func", "or_", "and_"}
LAYERS_ABOVE = {"nodes", "graph", "persona", "llm", "run"}
SQL_ALLOWED = {MEMORY / "db.py", *(MEMORY / "repositories").glob("*.py")}


def modules() -> list[Path]:
    return sorted(MEMORY.rglob("*.py"))


def imports(tree: ast.AST) -> list[tuple[str, set[str]]]:
    """(module, names taken from it) of every import statement, nested ones included."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, set()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.append((node.module or "", {alias.name for alias in node.names}))
    return found


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(MEMORY)))
def test_sql_stays_in_the_repositories(path):
    if path in SQL_ALLOWED:
        return
    tree = ast.parse(path.read_text(), str(path))
    builders = [
        (module, sorted(names & SQL_BUILDERS))
        for module, names in imports(tree)
        if module.split(".")[0] == "sqlalchemy" and names & SQL_BUILDERS
    ]
    assert builders == [], f"{path.name} builds SQL; a repository method should"
    attributes = [
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "sqlalchemy"
        and node.attr in SQL_BUILDERS
    ]
    assert attributes == [], f"{path.name} builds SQL through sqlalchemy.{attributes[0]}"
    sessions = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "session"]
    assert sessions == [], f"{path.name} reaches into a session (lines {sessions}); a repository method should"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(MEMORY)))
def test_memory_imports_nothing_from_the_layers_above(path):
    above = [
        module for module, _ in imports(ast.parse(path.read_text(), str(path))) if module.split(".")[0] in LAYERS_ABOVE
    ]
    assert above == [], f"{path.name} imports {above}"


def module_name(path: Path) -> str:
    parts = path.relative_to(MEMORY.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_import_circles_among_memory_modules():
    """Module-level imports only: an import inside a function runs later, and `if TYPE_CHECKING:` never."""
    known = {module_name(path) for path in modules()}
    needs: dict[str, set[str]] = {}
    for path in modules():
        top = [node for node in ast.parse(path.read_text()).body if isinstance(node, (ast.Import, ast.ImportFrom))]
        needs[module_name(path)] = {
            module
            for module, names in imports(ast.Module(body=top, type_ignores=[]))
            for module in [module, *(f"{module}.{n}" for n in names)]
            if module in known
        }
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import circle: {' -> '.join([*path[path.index(module) :], module])}"
        if module not in done:
            for needed in needs[module]:
                visit(needed, (*path, module))
            done.add(module)

    for module in needs:
        visit(module, ())


def test_the_checks_see_what_they_look_for():
    tree = ast.parse(
        "from sqlalchemy import select as s, func\nimport nodes.x\ndef f(r):\n"
        "    from graph import y\n    return r.session.get(1)  # a comment: repos.session\n"
    )
    assert imports(tree) == [("sqlalchemy", {"select", "func"}), ("nodes.x", set()), ("graph", {"y"})]
    assert [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)] == ["get", "session"]
