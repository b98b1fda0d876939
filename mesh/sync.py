"""The sync messages on `anima/sync` (have / want / bodies) as pydantic models with strict types: what a peer
publishes there is read within bounds (reach/hmp/wire.py: size and nesting before parsing) and validated whole
before the door reads one field, so `[]`, `"have"`, a list of ids that are objects or a `want` without `from` is a
bad message, counted — never an exception in the door.

    have    {"kind": "have", "did", "peer", "ts", "sig", "ids": [...], "prefer": [...], "limits": {"rate", "burst"}}
    want    {"kind": "want", "to": <did>, "from": <did>, "ids": [...]}
    bodies  {"kind": "bodies", "to": <did>, "containers": [<container>, …]}

`limits` is how many containers a second (and in a burst) the sender of the `have` takes from one peer: the other
doors pace what they publish to stay within it (mesh/node.py)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError

from reach.hmp import wire
from reach.hmp.schema import ContainerId, Did, first_error

HAVE_LIMIT = 2000  # ids in one `have`
WANT_LIMIT = 5000  # ids in one `want`
BODIES_BYTES = 256 * 1024  # one `bodies` message's containers at most (several are sent when more is wanted)
MAX_SYNC_BYTES = 2 * BODIES_BYTES  # a sync message on the wire at most (a `have` of 2,000 ids is ~150 KB)
MAX_BODIES = 1000  # containers in one `bodies`


class Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, populate_by_name=True)


class Limits(Strict):
    rate: Annotated[float, Field(gt=0, le=100_000, allow_inf_nan=False)]
    burst: Annotated[int, Field(ge=1, le=1_000_000)]


class Have(Strict):
    kind: Literal["have"]
    did: Annotated[str, StringConstraints(max_length=120)]
    peer: Annotated[str, StringConstraints(max_length=128)]
    ts: Annotated[int, Field(ge=0, le=2**53)]
    sig: Annotated[str, StringConstraints(max_length=256)]
    ids: Annotated[list[ContainerId], Field(max_length=HAVE_LIMIT)] = []
    prefer: Annotated[list[Did], Field(max_length=200)] = []
    limits: Limits | None = None


class Want(Strict):
    kind: Literal["want"]
    to: Did
    sender: Did = Field(alias="from")
    ids: Annotated[list[ContainerId], Field(max_length=WANT_LIMIT)]


class Bodies(Strict):
    kind: Literal["bodies"]
    to: Did
    containers: Annotated[list[dict[str, Any]], Field(max_length=MAX_BODIES)]


SyncMessage = Annotated[Have | Want | Bodies, Field(discriminator="kind")]
_ADAPTER: TypeAdapter[Have | Want | Bodies] = TypeAdapter(SyncMessage)


def read_sync(raw: bytes) -> Have | Want | Bodies:
    """A sync message, read within bounds and validated; wire.WireError (reason `malformed` or `oversized`)
    otherwise."""
    value = wire.read(raw, max_bytes=MAX_SYNC_BYTES)
    try:
        return _ADAPTER.validate_python(value)
    except ValidationError as exc:
        raise wire.WireError("malformed", first_error(exc)) from None


__all__ = [
    "BODIES_BYTES",
    "HAVE_LIMIT",
    "MAX_SYNC_BYTES",
    "WANT_LIMIT",
    "Bodies",
    "Have",
    "Limits",
    "Want",
    "read_sync",
]
