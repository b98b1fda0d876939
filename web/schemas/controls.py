from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from web.schemas.requests import JSON_BOOLEAN, JSON_NUMBER, REQUEST_BODY, SPACE, VISIBLE


class ControlIn(BaseModel):
    model_config = REQUEST_BODY
    want: Literal["running", "paused", "stopped"] = Field(description="What the loop should do from its next step.")


class LLMHealth(BaseModel):
    id: str
    provider: str
    model: str
    priority: int = Field(
        description="As chosen at run time (llm_registry.update, run.py llm, this page), else configured."
    )
    enabled: bool
    is_validator: bool = False
    selected: bool = Field(False, description="Chosen as the primary model at run time.")
    trust_score: float
    base_url: str | None = None
    calls: int = 0
    failures: int = 0
    last_ok: bool | None = None
    last_error: str | None = None
    last_latency_ms: float | None = None
    healthy: bool | None = Field(None, description="The last call succeeded (None: never called).")
    added: bool = Field(False, description="Added at run time (Controls, POST /api/llms, run.py llm add): removable.")


class LoopStatus(BaseModel):
    want: str
    requested_by: str | None = None
    state: str = Field(
        description="What the loop last reported: running, quiet (nothing new to think about: no model "
        "call until something arrives), paused, dreaming, stopped (or unknown)."
    )
    thread: str | None = None
    pid: int | None = None
    alive: bool | None = Field(None, description="The loop's process is running (None: another machine, or none yet).")
    reported_at: str | None = None
    ticks: int
    last_tick: dict[str, Any] | None = None
    llms: list[LLMHealth]


class Spend(BaseModel):
    today: dict[str, Any] = Field(
        description="Today's calls and tokens (prompt, of them cached, new; completion), "
        "and their cost when the models have prices."
    )
    hour: dict[str, Any] = Field(description="The same for the last 60 minutes.")
    by_model: list[dict[str, Any]] = Field(description="Today's spend per model.")
    currency: str
    budget: dict[str, Any] = Field(
        description="budget.tokens_per_day/hour, what is left, and the state: ok, low "
        "(no thought of its own) or spent (it only answers its humans)."
    )
    quiet_ticks_today: int = Field(description="Ticks with nothing new to think about today: no model call.")


class LLMSelectIn(BaseModel):
    model_config = REQUEST_BODY
    id: str | None = Field(description="The model to think with (null: back to the highest priority).", max_length=200)


class LLMUpdateIn(BaseModel):
    model_config = REQUEST_BODY
    priority: Annotated[int | None, JSON_NUMBER] = Field(None, ge=-1000, le=1000)
    enabled: Annotated[bool | None, JSON_BOOLEAN] = None
    is_validator: Annotated[bool | None, JSON_BOOLEAN] = None


class LLMAddIn(BaseModel):
    model_config = REQUEST_BODY
    base_url: str = Field(
        description="The OpenAI-compatible API root, e.g. http://127.0.0.1:11434/v1 (…/v1 is added "
        "to a bare host:port).",
        min_length=8,
        max_length=500,
        pattern=rf"^https?://[^{SPACE}/]+(/{VISIBLE}*)?$",
    )
    model: str = Field(
        description="The model the server runs, as its /models lists it.",
        min_length=1,
        max_length=200,
        pattern=rf"^{VISIBLE}(.*{VISIBLE})?$",
    )
    name: str | None = Field(
        None, description="What to call it here (its id is made from this, else from the model).", max_length=100
    )
    api_key: str | None = Field(
        None,
        description="Sent only to that server; kept in a 0600 file of the data dir's "
        "secrets/, never shown back or exported.",
        max_length=500,
    )


class LocalServer(BaseModel):
    name: str = Field(description="What the server probably is, from its port (Ollama, LM Studio, llama.cpp server…).")
    base_url: str
    models: list[str]
    offer: str = Field(description='"Ollama is running with qwen3:8b — think with it?"')
