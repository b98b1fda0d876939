"""The persona's ethics.yaml: the principles in every prompt, and what a violation does.

A violation is an output the validators rate at or below `violation_at` (they judged it wrong or harmful).
`on_violation: block_commands_and_log` (the default) runs none of its commands and logs it; `log_only` logs it
and leaves the commands to the usual gate. Without validators nothing is rated, so nothing is a violation — the
consent gate still holds every self-modifying command for the human.
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


class Ethics(BaseModel):
    """HMP's ethics_policies row: the principles, the ethics model (its type and weights), the violation policy
    and the audit settings (`audit_json`), all kept on each audit entry of an ethics decision."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())
    principles: list[str] = Field(default_factory=list)
    model_type: str = Field("principles", max_length=64,
                            description="the ethics model: principles, deontological, utilitarian, virtue, hybrid, …")
    model_weights: dict[str, float] = Field(default_factory=dict, description="the model's parameters, by name")
    violation_policy: ViolationPolicy = Field(default_factory=ViolationPolicy)
    audit_json: dict[str, Any] = Field(default_factory=dict, description="the audit settings, kept as given")

    def decision_record(self, rating: float | None) -> dict[str, Any]:
        """What an audit entry of an ethics decision keeps: the model it was decided under, and the rating."""
        return {"model_type": self.model_type, "model_weights": dict(self.model_weights),
                "violation_policy": self.violation_policy.model_dump(), "audit_json": dict(self.audit_json),
                "rating": rating}


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
