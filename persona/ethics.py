"""The persona's ethics.yaml (HMP `ethics_policies`): the principles, the ethics model, what a violation does and how
decisions are audited — all of it in every prompt and in every validator's question (HMP context 1: "added to the
request so that all reasoning and validation take the norms in force into account").

A violation is an output the validators rate at or below `violation_at` (they judged it wrong or harmful).
`on_violation: block_commands_and_log` (the default) runs none of its commands and logs it; `log_only` logs it
and leaves the commands to the usual gate. Without validators nothing is rated, so nothing is a violation — the
consent gate still holds every self-modifying command for the human.

`model_type` and `model_weights` name the ethics model (deontological, utilitarian, …) and its parameters (the weight
of each consideration): the persona and its validators are told them (`model_line`). `audit_json` sets the audit:
`record: decisions` (the default) keeps an audit entry of the commands of an output judged a violation (and of every
privileged command and refusal, as always); `record: all` of every command of every output the validators rated,
each with the ethics model it was decided under; `diary: true` also writes each ethics decision into the cognitive
diary (tagged `ethics`, `audit`). Other keys are kept as given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from persona.yaml_lines import YamlError, read_lined_yaml


class ViolationPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")
    on_violation: Literal["block_commands_and_log", "log_only"] = "block_commands_and_log"
    violation_at: float = Field(-2.0, ge=-3, le=0, description="a validator rating at or below this is a violation")


class Audit(BaseModel):
    """`audit_json`: what is audited (module doc); other keys are kept as given."""

    model_config = ConfigDict(extra="allow")
    record: Literal["decisions", "all"] = "decisions"
    diary: bool = False


class Ethics(BaseModel):
    """HMP's ethics_policies row: the principles, the ethics model (its type and weights), the violation policy
    and the audit settings (`audit_json`), all kept on each audit entry of an ethics decision."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())
    principles: list[str] = Field(default_factory=list)
    model_type: str = Field(
        "principles",
        max_length=64,
        description="the ethics model: principles, deontological, utilitarian, virtue, hybrid, …",
    )
    model_weights: dict[str, float] = Field(default_factory=dict, description="the model's parameters, by name")
    violation_policy: ViolationPolicy = Field(default_factory=ViolationPolicy)
    audit_json: Audit = Field(default_factory=Audit, description="the audit settings (module doc)")

    def decision_record(self, rating: float | None) -> dict[str, Any]:
        """What an audit entry of an ethics decision keeps: the model it was decided under, and the rating."""
        return {
            "model_type": self.model_type,
            "model_weights": dict(self.model_weights),
            "violation_policy": self.violation_policy.model_dump(),
            "audit_json": self.audit_json.model_dump(exclude_unset=True),
            "rating": rating,
        }

    def weights_text(self) -> str:
        """The model's weights as a line shows them, heaviest first: `honesty 0.9, care 0.6`."""
        return ", ".join(
            f"{name} {value:g}"
            for name, value in sorted(self.model_weights.items(), key=lambda item: (-item[1], item[0]))
        )

    @property
    def stated(self) -> bool:
        """Whether ethics.yaml names a model beyond the plain principles (a type, weights or audit settings)."""
        return (
            self.model_type != "principles"
            or bool(self.model_weights)
            or bool(self.audit_json.model_dump(exclude_unset=True))
        )


class EthicsError(ValueError):
    pass


def load_ethics(path: str | Path) -> Ethics:
    try:
        doc = read_lined_yaml(path)
    except YamlError as exc:
        raise EthicsError(str(exc)) from None
    try:
        return Ethics.model_validate(doc.data)
    except ValidationError as exc:
        raise EthicsError("\n".join(f"{doc.where(tuple(e['loc']))}: {e['msg']}" for e in exc.errors())) from None
