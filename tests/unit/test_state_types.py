"""The tick state's typed views stay the state: TickValues (what `Agent.state()` returns) names every TickState field
with the same type, and each step's update TypedDict names only state fields, with their types."""

from __future__ import annotations

from dataclasses import fields

import pytest

from nodes import state as state_module
from nodes.state import STATE_FIELDS, TickState, TickValues

UPDATES = [
    "VarsUpdate",
    "DrivesUpdate",
    "CompressionUpdate",
    "PromptUpdate",
    "AnswerUpdate",
    "CommandsUpdate",
    "EmotionUpdate",
    "StagnationUpdate",
    "ValidationUpdate",
    "WriteMemoryUpdate",
    "UpkeepUpdate",
    "ExecutionUpdate",
]


def _written(kind: object) -> str:
    """An annotation as written: a TypedDict keeps it as a ForwardRef, a dataclass field as the string."""
    return kind if isinstance(kind, str) else str(getattr(kind, "__forward_arg__", kind))


def _declared() -> dict[str, str]:
    """TickState's field types as written (the module postpones annotations), its reducers left out."""
    declared = {f.name: str(f.type) for f in fields(TickState)}
    declared["vars"] = "dict[str, Any]"  # Annotated[dict[str, Any], merge_vars]: the reducer is LangGraph's
    return declared


def test_tick_values_is_tick_state_field_by_field():
    assert set(TickValues.__annotations__) == STATE_FIELDS
    assert {name: _written(kind) for name, kind in TickValues.__annotations__.items()} == _declared()
    assert not TickValues.__required_keys__  # a checkpoint before the first tick holds nothing


@pytest.mark.parametrize("name", UPDATES)
def test_step_updates_write_state_fields_as_declared(name):
    update = getattr(state_module, name)
    declared = _declared()
    assert update.__annotations__ and not update.__required_keys__
    written = {key: _written(kind) for key, kind in update.__annotations__.items()}
    assert written == {key: declared[key] for key in written}


def test_every_tick_step_declares_the_update_it_returns():
    from nodes.steps import TICK_STEPS

    returns = {name: step.__annotations__.get("return") for name, step in TICK_STEPS.items()}
    assert all(kind in {*UPDATES, "TickValues"} for kind in returns.values()), returns
