"""What a manager hands a door is a frozen view, never a live row (managers/__init__.py): checked on the managers'
annotations — the converted managers' public methods name no ORM model in what they return, and across every
manager the methods that still do may only become fewer — and on what a door gets: a view cannot be changed, and
changing what it holds changes nothing stored."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pkgutil
import typing
from dataclasses import FrozenInstanceError
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import managers
from managers.audience import OWNER
from managers.consent import ApprovalView
from memory import Database
from memory.models import Approval, Base, RegistryBase
from tests.fakes.managers import factory

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

# the managers whose every public method returns views (or plain values)
CONVERTED = {"managers.journal", "managers.consent", "managers.sessions", "managers.inner_life"}
# public manager methods whose annotation still names an ORM model: this number may only go down
# (151: the tick's prompt reads hand rows on to what needs rows — the conversation manager, Stelis adoption —
# where a copy per tick would only cost; docs ARCHITECTURE.md "Doors → managers → domains")
STILL_RETURNING_ROWS = 151


def _namespace(module: ModuleType) -> dict[str, Any]:
    """The module's names and those it imports only under `if TYPE_CHECKING:` (what its annotations name)."""
    names = dict(vars(module))
    for node in ast.parse(inspect.getsource(module)).body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            exec(compile(ast.Module(body=node.body, type_ignores=[]), module.__name__, "exec"), names)
    return names


def _models_in(annotation: Any, depth: int = 0) -> set[str]:
    """The ORM models an annotation names: itself, its arguments (list[…], … | None, tuple[…]) and the fields of a
    dataclass it names (a view that holds a row is a row)."""
    found: set[str] = set()
    if isinstance(annotation, type) and issubclass(annotation, (Base, RegistryBase)):
        found.add(annotation.__name__)
    for argument in typing.get_args(annotation):
        found |= _models_in(argument, depth)
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation) and depth < 2:
        names = _namespace(importlib.import_module(annotation.__module__))
        try:
            hints = typing.get_type_hints(annotation, globalns=names)
        except NameError:  # a field's type names an alias written as a string in another module
            hints = {field.name: _resolvable(str(field.type), names) for field in dataclasses.fields(annotation)}
        for hint in hints.values():
            found |= {f"{annotation.__name__}.{name}" for name in _models_in(hint, depth + 1)}
    return found


def _return_of(function: Any, names: dict[str, Any]) -> Any:
    """A method's return annotation, resolved; when a name in it cannot be resolved here (a type alias written as a
    string in another module), the names in it that can: a tuple of them (every model among them is counted)."""
    try:
        return typing.get_type_hints(function, globalns=names).get("return")
    except NameError:
        return _resolvable(str(function.__annotations__.get("return", "")), names)


def _resolvable(written: str, names: dict[str, Any]) -> Any:
    """The names in an annotation written as a string that resolve here: a tuple of them (every model among them is
    counted), or None."""
    found = [names[node.id] for node in ast.walk(ast.parse(written)) if isinstance(node, ast.Name) and node.id in names]
    return tuple[tuple(found)] if found else None  # type: ignore[misc]


def returning_rows() -> dict[str, list[str]]:
    """module → its managers' public methods whose return annotation names an ORM model."""
    found: dict[str, list[str]] = {}
    for info in pkgutil.iter_modules(managers.__path__):
        module = importlib.import_module(f"managers.{info.name}")
        names = _namespace(module)
        for class_name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__ or not class_name.endswith("Manager"):
                continue
            for name, function in inspect.getmembers(cls, inspect.isfunction):
                if name.startswith("_"):
                    continue
                models = _models_in(_return_of(function, names))
                if models:
                    found.setdefault(module.__name__, []).append(f"{class_name}.{name} → {', '.join(sorted(models))}")
    return found


def test_the_converted_managers_return_views_not_rows() -> None:
    rows = returning_rows()
    wrong = [method for module in sorted(CONVERTED) for method in rows.get(module, [])]
    assert not wrong, f"these return ORM rows; return a frozen view (managers/views.py): {wrong}"
    assert CONVERTED <= {f"managers.{m.name}" for m in pkgutil.iter_modules(managers.__path__)}


def test_methods_returning_rows_only_become_fewer() -> None:
    count = sum(len(methods) for methods in returning_rows().values())
    assert count <= STILL_RETURNING_ROWS, (
        f"{count} public manager methods return ORM rows (at most {STILL_RETURNING_ROWS}): a new one returns a view"
    )


def test_the_check_sees_a_row_in_a_return_annotation() -> None:
    """The check itself: a manager method annotated with a row, a list of rows, an optional row or a dataclass
    holding a row is counted; a view is not."""

    @dataclasses.dataclass(frozen=True)
    class Holding:
        row: Approval

    assert _models_in(Approval) == {"Approval"}
    assert _models_in(list[Approval]) == {"Approval"}
    assert _models_in(tuple[Approval, bool] | None) == {"Approval"}
    assert _models_in(Holding) == {"Holding.Approval"}
    assert _models_in(list[ApprovalView]) == set()

    def unresolvable() -> list[Approval] | NamedNowhere:  # type: ignore[name-defined]  # noqa: F821
        raise NotImplementedError

    assert _models_in(_return_of(unresolvable, globals())) == {"Approval"}


@pytest.fixture
def db(tmp_path: Path):
    database = Database.open(tmp_path)
    yield database
    database.close()


def test_a_tick_view_is_frozen_and_what_it_holds_is_a_copy(db: Database) -> None:
    with db.unit() as repos:
        repos.threads.ensure("main")
        repos.ticks.start("main", 1, "chat")
        repos.ticks.finish(
            "main",
            1,
            status="ok",
            summary={"context": {"dropped": ["diary"]}},
            llm_calls=1,
            prompt_tokens=10,
            completion_tokens=5,
            llm_ms=3.0,
        )
    doors = factory(db)
    with doors.unit(OWNER) as house:
        [tick] = house.journal.ticks(5)
        with pytest.raises(FrozenInstanceError):
            tick.status = "failed"  # type: ignore[misc]
        tick.summary["context"]["dropped"].append("goals")
    with doors.unit(OWNER) as house:
        stored = house.journal.tick("main", 1)
        assert stored is not None and stored.status == "ok"
        assert stored.summary["context"] == {"dropped": ["diary"]}


def test_an_approval_view_is_what_was_read_and_the_answer_is_a_new_one(db: Database) -> None:
    doors = factory(db)
    with doors.unit() as house:
        asked, created = house.consent.request(
            cmd_key="main:1:c1",
            cmd_id="c1",
            type="web.read",
            args={"url": "https://example.org"},
            effect="external",
            description="read a page",
            reason="external needs my human's approval",
            thread_id="main",
            root_thread="main",
            tick=1,
            now=NOW,
        )
    assert created and asked.status == "pending" and asked.args == {"url": "https://example.org"}
    with doors.unit(OWNER) as house:
        [waiting] = house.consent.pending()
        answered = house.consent.answer(waiting.id, approve=False, by="owner", reason="not now", now=NOW)
        assert (waiting.status, answered.status, answered.decision_reason) == ("pending", "denied", "not now")
        assert [e.decision for e in house.consent.audit_of(waiting.id)] == ["requested", "denied"]
