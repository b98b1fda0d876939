"""The shapes a container may have, as pydantic models with strict types (no coercion: `"5"` is not 5, `true` is not
1, a list is not a string): the container's own fields (`Envelope`) and the payload of each type (`PAYLOADS`).

`containers.check()` validates the envelope before anything else reads a field (a `topic` that is a list, a
`recipient` that is an object: malformed, refused before a database sees it) and the payload once the signature
holds (a CogSync entry whose `tags` is 5 is its signer's malformed container). Unknown fields are refused in the
envelope (nothing unsigned travels with a container); a payload may carry fields this version does not read, but
every field it reads has its type and bounds here."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

DID_PATTERN = r"^did:key:z[1-9A-HJ-NP-Za-km-z]{40,60}$"
ID_PATTERN = r"^sha256:[0-9a-f]{64}$"
MAX_SAFE_INT = 2 ** 53  # RFC 8785 (I-JSON): integers beyond are not interoperable
TEXT_CHARS = 1_048_576  # a text field at most: the container itself is bounded first (mesh.max_container_bytes)

Did = Annotated[str, StringConstraints(pattern=DID_PATTERN)]
ContainerId = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
Text = Annotated[str, StringConstraints(max_length=TEXT_CHARS)]
Short = Annotated[str, StringConstraints(max_length=200)]
Topic = Annotated[str, StringConstraints(min_length=1, max_length=120)]
Mark = Annotated[str, StringConstraints(max_length=60)]
Score = Annotated[float, Field(ge=-1.0, le=1.0, allow_inf_nan=False)]


class Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class Payload(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow", frozen=True)


class Envelope(Strict):
    """Every field of a container (reach/hmp/containers.py), typed and bounded."""

    v: Annotated[int, Field(ge=1, le=1)]
    type: Annotated[str, StringConstraints(min_length=1, max_length=32)]
    sender: Annotated[str, StringConstraints(max_length=120)]
    ts: Annotated[int, Field(ge=0, le=MAX_SAFE_INT)]
    ttl: Annotated[int, Field(ge=-MAX_SAFE_INT, le=MAX_SAFE_INT)]
    nonce: Annotated[str, StringConstraints(max_length=64)]
    recipient: Did | None
    topic: Topic | None
    lineage: Annotated[list[ContainerId], Field(max_length=32)]
    payload: dict[str, Any]
    id: ContainerId
    sig: Annotated[str, StringConstraints(min_length=1, max_length=200)]


class TextPayload(Payload):  # message, ask, answer
    text: Text


class NotePayload(Payload):
    """A distributed note as its author sealed it."""

    text: Text
    mentions: Annotated[list[Mark], Field(max_length=12)] = []
    hashtags: Annotated[list[Mark], Field(max_length=12)] = []
    priority: Annotated[int, Field(ge=-10, le=10)] = 0


class NoteEnvelopePayload(Payload):
    """A friend's envelope around a note (`note` is a whole container, checked again on its own)."""

    note: dict[str, Any]
    hops: Annotated[int, Field(ge=1, le=10)]


class CogSyncPayload(Payload):
    kind: Literal["diary", "concept", "abstract"] = "diary"
    text: Text
    tags: Annotated[list[Mark], Field(max_length=12)] = []
    name: Short | None = None
    title: Annotated[str, StringConstraints(max_length=300)] | None = None
    local: Short | None = None


class EvaluationPayload(Payload):
    subject: Did
    score: Score
    about: ContainerId | None = None
    reason: Annotated[str, StringConstraints(max_length=1000)] = ""


class CasePayload(Payload):  # ethics_case, claim
    question: Annotated[str, StringConstraints(min_length=1, max_length=4000)]


class SolutionPayload(Payload):
    case: ContainerId
    text: Annotated[str, StringConstraints(min_length=1, max_length=4000)]


class VotePayload(Payload):
    case: ContainerId
    solution: ContainerId | None = None
    score: Score | None = None


class RotationPayload(Payload):
    old: Did
    new: Did
    new_sig: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{128}$")]


class RevocationPayload(Payload):
    did: Did


class HelloPayload(Payload):
    """A persona saying who it is on the mesh: what it listens to (its CogSync topics) and what it runs."""

    topics: Annotated[list[Topic], Field(max_length=64)] = []
    agent: Short = ""


PAYLOADS: dict[str, type[Payload]] = {
    "message": TextPayload, "ask": TextPayload, "answer": TextPayload, "cogsync": CogSyncPayload,
    "evaluation": EvaluationPayload, "ethics_case": CasePayload, "claim": CasePayload, "solution": SolutionPayload,
    "vote": VotePayload, "rotation": RotationPayload, "revocation": RevocationPayload, "hello": HelloPayload,
}


def payload_model(type_: str, payload: dict[str, Any]) -> type[Payload]:
    if type_ == "note":
        return NoteEnvelopePayload if "note" in payload else NotePayload
    return PAYLOADS[type_]


def parse_payload(type_: str, payload: dict[str, Any]) -> Payload:
    """The payload of a container of `type_` as its model (ValidationError when it is not of that shape)."""
    return payload_model(type_, payload).model_validate(payload)


def first_error(exc: ValidationError) -> str:
    """One line: where and what (`topic: Input should be a valid string`)."""
    error = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in error.get("loc", ())) or "container"
    return f"{where}: {error.get('msg', 'invalid')}"[:200]


__all__ = ["DID_PATTERN", "ID_PATTERN", "PAYLOADS", "HelloPayload", "CogSyncPayload", "ContainerId", "Did",
           "Envelope",
           "EvaluationPayload", "NoteEnvelopePayload", "NotePayload", "Payload", "TextPayload", "first_error",
           "parse_payload", "payload_model"]
