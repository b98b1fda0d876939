"""What a command's arguments may be: one pydantic model per command (declared next to its handler), built from the
shared types below — types, ranges, lengths and list sizes. `check_args` validates a command's raw arguments
against its model before the consent gate or any handler sees them; a refusal is one precise message the model
reads next tick. The help (`help.show`) is generated from the same models.

Models write loosely, so the types are lenient where the meaning is unambiguous: `"5"` for 5, `"yes"` for true,
`"a, b"` for a list of words, and the argument names models reach for (`content` for `text`). They are strict where
it matters: a dict, list or bool is never text, and no number, text or list is unbounded.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
)

MAX_TEXT = 8_000  # a message, note, diary entry or memory; longer belongs in several entries or the KB
MAX_ARGS_CHARS = 20_000  # a command's arguments as JSON
MAX_ID = 2**31 - 1


def _split_words(value: Any) -> Any:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


lowered = BeforeValidator(lambda value: value.strip().lower() if isinstance(value, str) else value)


def names(*choices: str) -> Any:
    """The argument names a field accepts, its own first."""
    return AliasChoices(*choices)


Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_TEXT)]
OptionalText = Annotated[str, StringConstraints(strip_whitespace=True, max_length=MAX_TEXT)]
Title = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
Label = Annotated[str, StringConstraints(strip_whitespace=True, max_length=200)]
Description = Annotated[str, StringConstraints(strip_whitespace=True, max_length=2_000)]
SearchText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=500)]
Word = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64)]
Words = Annotated[list[Word], BeforeValidator(_split_words), Field(max_length=32)]
Refs = Annotated[
    list[Annotated[str, StringConstraints(max_length=100)]], BeforeValidator(_split_words), Field(max_length=50)
]
Id = Annotated[int, Field(ge=1, le=MAX_ID)]
Ids = Annotated[list[Id], Field(min_length=1, max_length=100)]
Ref = Annotated[str | int, Field(union_mode="left_to_right")]  # an id or a name
Limit = Annotated[int, Field(ge=1, le=100)]
TopK = Annotated[int, Field(ge=1, le=50)]
Days = Annotated[int, Field(ge=1, le=36_500)]
Priority = Annotated[int, Field(ge=-10, le=10)]
Weight = Annotated[float, Field(ge=0, le=100)]
Seconds = Annotated[float, Field(ge=0, le=7 * 86_400)]


class Args(BaseModel):
    """A command's arguments. Unknown names are ignored (models add chatter); every known one is checked."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False, populate_by_name=True, frozen=True)


class NoArgs(Args):
    pass


class ArgsError(ValueError):
    """The arguments do not fit the command's model; the message says which and why."""


def _input_kind(value: Any) -> str:
    if isinstance(value, str):
        return f"text of {len(value):,} characters" if len(value) > 60 else repr(value)
    if isinstance(value, (dict, list)):
        return f"a {type(value).__name__} of {len(value):,} items"
    return repr(value)


def check_args(type_: str, model: type[Args], raw: dict[str, Any]) -> dict[str, Any]:
    """`raw` validated against `model`, as the arguments the handler reads (by field name, only those given)."""
    size = len(json.dumps(raw, ensure_ascii=False, default=str))
    if size > MAX_ARGS_CHARS:
        raise ArgsError(f"{type_}: arguments are {size:,} characters of JSON; at most {MAX_ARGS_CHARS:,}")
    try:
        args = model.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for error in exc.errors()[:3]:
            message = error["msg"].removeprefix("Value error, ")
            if not error["loc"]:  # the model's own check of the arguments together: its message says it all
                problems.append(message)
                continue
            where = ".".join(str(part) for part in error["loc"])
            given = "" if error["type"] == "missing" else f" (got {_input_kind(error['input'])})"
            problems.append(f"{where}: {message[0].lower()}{message[1:]}{given}")
        more = f"; and {exc.error_count() - 3} more" if exc.error_count() > 3 else ""
        raise ArgsError(f"{type_}: " + "; ".join(problems) + more) from None
    return args.model_dump(mode="json", exclude_unset=True)


def describe(model: type[Args]) -> str:
    """One line per command's arguments, from its model: `text* (text ≤8000, also: content), tags ([word] ≤32)`."""
    schema = model.model_json_schema()
    required = set(schema.get("required", []))
    parts = []
    for name, field in model.model_fields.items():
        prop = schema.get("properties", {}).get(name, {})
        alias = field.validation_alias
        others = [a for a in getattr(alias, "choices", []) if isinstance(a, str) and a != name]
        parts.append(
            f"{name}{'*' if name in required else ''} ({_kind(prop)}{', also: ' + '/'.join(others) if others else ''})"
        )
    return ", ".join(parts) or "no arguments"


def _kind(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        return "{…}"
    options = prop.get("anyOf")
    if options:
        return " or ".join(_kind(o) for o in options if o.get("type") != "null")
    if "enum" in prop:
        return "|".join(str(v) for v in prop["enum"])
    kind = prop.get("type", "any")
    if kind == "string":
        return f"text ≤{prop['maxLength']}" if "maxLength" in prop else "text"
    if kind in ("integer", "number"):
        low = prop.get("minimum", prop.get("exclusiveMinimum"))
        high = prop.get("maximum", prop.get("exclusiveMaximum"))
        name = "int" if kind == "integer" else "number"
        return f"{name} {_number(low)}..{_number(high)}" if low is not None and high is not None else name
    if kind == "array":
        return f"[{_kind(prop.get('items', {}))}]" + (f" ≤{prop['maxItems']}" if "maxItems" in prop else "")
    if kind == "boolean":
        return "true|false"
    return str(kind)


def _number(value: float) -> str:
    return f"{int(value)}" if float(value).is_integer() else f"{value:g}"
