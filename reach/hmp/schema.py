"""The shapes a container may have, as pydantic models with strict types (no coercion: `"5"` is not 5, `true` is not
1, a list is not a string): the container's own fields (`Envelope`) and the payload of each type (`PAYLOADS`).

`containers.check()` validates the envelope before anything else reads a field (a `topic` that is a list, a
`recipient` that is an object: malformed, refused before a database sees it) and the payload once the signature
holds (a CogSync entry whose `tags` is 5 is its signer's malformed container). Unknown fields are refused in the
envelope (nothing unsigned travels with a container); a payload may carry fields this version does not read, but
every field it reads has its type and bounds here."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator

DID_PATTERN = r"^did:key:z[1-9A-HJ-NP-Za-km-z]{40,60}$"
ID_PATTERN = r"^sha256:[0-9a-f]{64}$"
MAX_SAFE_INT = 2**53  # RFC 8785 (I-JSON): integers beyond are not interoperable
TEXT_CHARS = 1_048_576  # a text field at most: the container itself is bounded first (mesh.max_container_bytes)

Did = Annotated[str, StringConstraints(pattern=DID_PATTERN)]
ContainerId = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
Text = Annotated[str, StringConstraints(max_length=TEXT_CHARS)]
Short = Annotated[str, StringConstraints(max_length=200)]
Topic = Annotated[str, StringConstraints(min_length=1, max_length=120)]
Mark = Annotated[str, StringConstraints(max_length=60)]
Score = Annotated[float, Field(ge=-1.0, le=1.0, allow_inf_nan=False)]
Weight = Annotated[float, Field(ge=0.0, le=100.0, allow_inf_nan=False)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=150)]
Relation = Annotated[str, StringConstraints(min_length=1, max_length=100)]
Slug = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_-]{1,63}$")]  # a strategy's or a method's name
Instruction = Annotated[str, StringConstraints(min_length=8, max_length=600)]
Url = Annotated[str, StringConstraints(pattern=r"^https?://[^\s/?#]+[^\s]*$", max_length=500)]


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


class LinkOut(Strict):
    """One edge of a concept's semantic graph as it travels: the relation and the other concept, by its name."""

    relation: Relation
    target: Name
    weight: Weight = 1.0


class CogSyncPayload(Payload):
    kind: Literal["diary", "concept", "abstract"] = "diary"
    text: Text
    tags: Annotated[list[Mark], Field(max_length=12)] = []
    name: Short | None = None
    title: Annotated[str, StringConstraints(max_length=300)] | None = None
    local: Short | None = None
    links: Annotated[list[LinkOut], Field(max_length=20)] = []  # a concept's edges to other concepts (by name)

    @model_validator(mode="after")
    def _links_are_a_concepts(self) -> CogSyncPayload:
        if self.links and self.kind != "concept":
            raise ValueError("only a concept carries links")
        return self


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


class GoalPayload(Payload):
    """HMP GMP: a goal a persona puts to its peers (its own goal's words; `local` names it at the publisher)."""

    title: Annotated[str, StringConstraints(min_length=1, max_length=300)]
    description: Annotated[str, StringConstraints(max_length=4000)] = ""
    horizon: Literal["short", "long"] = "short"
    priority: Annotated[int, Field(ge=0, le=10)] = 1
    success_criteria: Annotated[list[Annotated[str, StringConstraints(max_length=300)]], Field(max_length=10)] = []
    constraints: Annotated[list[Annotated[str, StringConstraints(max_length=300)]], Field(max_length=10)] = []
    tags: Annotated[list[Mark], Field(max_length=12)] = []
    local: Short | None = None


class GoalStatusPayload(Payload):
    """What became of a peer's goal here: accepted (now one of this persona's goals), declined, done or given up."""

    goal: ContainerId
    status: Literal["accepted", "declined", "completed", "failed"]


class StrategyPayload(Payload):
    """A loop-breaking strategy offered to peers (HMP's exchange of stagnation strategies)."""

    name: Slug
    instruction: Instruction
    mechanism_class: Literal["external", "context", "internal", "radical"] = "internal"
    cost: Annotated[int, Field(ge=1, le=5)] = 2


class ThinkingMethodPayload(Payload):
    """A way of thinking offered to peers ("check the converse")."""

    name: Slug
    instruction: Instruction


class ModelAddressPayload(Payload):
    """A model's address offered to peers (HMP's exchange of LLM addresses): an OpenAI-compatible server and the
    model it runs, with what the offerer says of it. Never a key: a payload field this version does not read is
    never stored anywhere but in the container."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=60)]
    base_url: Url
    model: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    notes: Annotated[str, StringConstraints(max_length=1000)] = ""  # its strengths, parameters, limits


PAYLOADS: dict[str, type[Payload]] = {
    "message": TextPayload,
    "ask": TextPayload,
    "answer": TextPayload,
    "cogsync": CogSyncPayload,
    "evaluation": EvaluationPayload,
    "ethics_case": CasePayload,
    "claim": CasePayload,
    "solution": SolutionPayload,
    "vote": VotePayload,
    "rotation": RotationPayload,
    "revocation": RevocationPayload,
    "hello": HelloPayload,
    "goal": GoalPayload,
    "goal_status": GoalStatusPayload,
    "strategy": StrategyPayload,
    "thinking_method": ThinkingMethodPayload,
    "model_address": ModelAddressPayload,
}
OFFERS = ("strategy", "thinking_method", "model_address")  # what a peer offers and the owner approves before use


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


__all__ = [
    "DID_PATTERN",
    "ID_PATTERN",
    "OFFERS",
    "PAYLOADS",
    "CasePayload",
    "CogSyncPayload",
    "ContainerId",
    "Did",
    "Envelope",
    "EvaluationPayload",
    "GoalPayload",
    "GoalStatusPayload",
    "HelloPayload",
    "LinkOut",
    "ModelAddressPayload",
    "NoteEnvelopePayload",
    "NotePayload",
    "Payload",
    "StrategyPayload",
    "TextPayload",
    "ThinkingMethodPayload",
    "first_error",
    "parse_payload",
    "payload_model",
]
