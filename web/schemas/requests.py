"""How a request's fields are read: as the OpenAPI says, no looser (web/api/responses.py documents the answers)."""

from typing import Annotated, Any

from pydantic import BeforeValidator, ConfigDict, Field

# A request body takes the fields its schema lists, no others.
REQUEST_BODY = ConfigDict(extra="forbid")
# Text with something in it once stripped: a character Python's str.strip() keeps. Spelt out rather than `\S`, whose
# meaning differs between Python (\x1c-\x1f are space), pydantic's Rust regex and the JSON Schema's ECMA one.
SPACE = r"\t\n\v\f\r \x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
VISIBLE = rf"[^{SPACE}]"


def _json_number(value: Any) -> Any:
    """A JSON number is a number: `true` or "5" is refused, as the schema says (9.0 is the integer 9, as in JSON)."""
    if isinstance(value, bool | str):
        raise ValueError(f"a number, not {type(value).__name__} {value!r}"[:120])
    return value


def _query_boolean(value: Any) -> Any:
    """A boolean in a query is `true` or `false` (what the schema's boolean reads as), not 0, 1, yes or on."""
    if isinstance(value, str) and value.lower() not in ("true", "false"):
        raise ValueError("true or false")
    return value


# Body fields of a JSON number or boolean type are taken as the schema says (pydantic alone would read "5", true or
# "yes"): `Annotated[int, Field(ge=0), JSON_NUMBER]`, `Annotated[int | None, JSON_NUMBER] = Field(None, ge=0)`,
# `Annotated[bool | None, JSON_BOOLEAN]` (the constraints where they land in the JSON Schema as minimum/maximum).
JSON_NUMBER = BeforeValidator(_json_number)
JSON_BOOLEAN = Field(strict=True)
# A query parameter `?archived=true` / `false`.
QueryBool = Annotated[bool, BeforeValidator(_query_boolean)]
