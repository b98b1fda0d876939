from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from web.schemas.requests import REQUEST_BODY, VISIBLE

NO_REASON = "a denial needs a reason: the persona reads it in its next prompt"


class UntrustedSource(BaseModel):
    origin: str = Field(description="kb, feed, search, tool, mcp_client, script, model, peer or channel.")
    ref: str = Field(description="Which one: a document and chunk, a feed, a query, a tool, a note.")
    excerpt: str = ""
    via: str = Field(
        "",
        description=(
            'The row written from that text through which it reached the prompt ("goal 5", "my thought 812"), '
            "when it did not reach it directly."
        ),
    )


class Approval(BaseModel):
    id: int
    status: str = Field(description="pending, approved, denied, expired; an approved one becomes executed or failed.")
    type: str = Field(description="The command the persona wants to run.")
    args: dict[str, Any] = Field(default_factory=dict)
    effect: str = Field(description="modify_self or external: why it waits for the human.")
    description: str | None = Field(None, description="Why the persona wants it, in its own words.")
    reason: str | None = Field(None, description="Why the consent gate parked it.")
    thread_id: str | None = None
    tick: int | None = None
    requested_at: str | None = None
    decided_at: str | None = None
    decided_by: str | None = None
    decision_reason: str | None = None
    executed_at: str | None = None
    result: str | None = Field(None, description="What running it gave (executed / failed).")
    untrusted_sources: list[UntrustedSource] = Field(
        default_factory=list,
        description=(
            "The untrusted text the asking tick had read (knowledge base, feeds, search, tools, MCP clients, scripts, "
            "other models), when that is why it waits: it writes a tier shown in every prompt."
        ),
    )


class TaintedRow(BaseModel):
    id: int
    tier: str = Field(description="goal, task, note, diary, concept, abstract, llm_memory, message (a thought), …")
    ref: str = Field(description="The row's id in its tier.")
    text: str = Field(description="What the row says now (empty when it is gone).")
    thread_id: str | None = None
    tick: int | None = Field(None, description="The tick that wrote it.")
    at: str | None = None
    untrusted_sources: list[UntrustedSource] = Field(
        default_factory=list, description=("Where its words came from: the untrusted text the writing tick had read.")
    )
    trusted_at: str | None = None
    trusted_by: str | None = None


class TaintedList(BaseModel):
    items: list[TaintedRow] = Field(
        description=(
            "Rows written from untrusted text, newest first: fenced with their origin in every prompt that shows them, "
            "and a tick that shows one waits for the owner before it writes a tier in every prompt or speaks to a third "  # noqa: E501
            "person."
        )
    )
    count: int = Field(description="How many rows are tainted now.")


class TrustIn(BaseModel):
    model_config = REQUEST_BODY
    reason: str = Field("", max_length=2000, description="A note kept in the audit log.")


class AuditEntry(BaseModel):
    id: int
    at: str | None = None
    thread_id: str | None = None
    tick: int | None = None
    type: str
    effect: str | None = None
    decision: str
    actor: str
    reason: str | None = None
    approval_id: int | None = None


class ApprovalDetail(Approval):
    audit: list[AuditEntry] = Field(default_factory=list, description="This approval's trail in the audit log.")


class ApprovalList(BaseModel):
    items: list[Approval]
    pending: int = Field(description="How many wait for the human.")


class ApprovalsOverview(BaseModel):
    pending: list[Approval]
    tainted: list[TaintedRow] = Field(default_factory=list, description="Rows written from untrusted text.")
    recent: list[Approval] = Field(description="The latest decided, newest first.")
    audit: list[AuditEntry] = Field(description="The latest consent decisions, newest first.")


class ApproveIn(BaseModel):
    model_config = REQUEST_BODY
    reason: str = Field("", max_length=2000, description="A note kept in the audit log.")


class DenyIn(BaseModel):
    model_config = REQUEST_BODY
    reason: str = Field(
        min_length=1, max_length=2000, pattern=VISIBLE, description="Why — the persona reads it in its next prompt."
    )

    @field_validator("reason")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError(NO_REASON)
        return value.strip()
