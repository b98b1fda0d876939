"""OpenTelemetry spans for model calls, by the GenAI semantic conventions (`gen_ai.*` attributes).

Through OpenTelemetry's API only: without a configured SDK (graph/telemetry.py configures one when
`OTEL_EXPORTER_OTLP_ENDPOINT` is set) every span is a no-op and nothing leaves the process. Message content is not
recorded unless `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` (the conventions' own switch): prompts hold
the persona's memories and its humans' words.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

TRACER = "anima"
PROVIDER_NAMES = {"llamacpp": "llama.cpp", "openai": "openai"}


def capture_content() -> bool:
    return os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "").strip().lower() == "true"


@contextmanager
def model_call_span(
    purpose: str,
    entry: dict[str, Any],
    *,
    chat: bool,
    sampling: Any,
    messages: list[dict[str, str]] | None,
    prompt: str | None,
) -> Iterator[Any]:
    """A client span around one model call; the caller sets the response's attributes (`answered`)."""
    from opentelemetry import trace

    operation = "chat" if chat else "text_completion"
    model = str(entry.get("model") or entry.get("id") or "")
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": PROVIDER_NAMES.get(str(entry.get("provider", "")), str(entry.get("provider", ""))),
        "gen_ai.request.model": model,
        "gen_ai.request.max_tokens": int(getattr(sampling, "max_tokens", 0) or 0),
        "gen_ai.request.temperature": float(getattr(sampling, "temperature", 0.0) or 0.0),
        "gen_ai.request.top_p": float(getattr(sampling, "top_p", 0.0) or 0.0),
        "anima.llm.id": str(entry.get("id", "")),
        "anima.llm.purpose": purpose,
    }
    if capture_content():
        attributes["gen_ai.input.messages"] = json.dumps(
            messages if messages is not None else [{"role": "user", "content": prompt or ""}]
        )
    tracer = trace.get_tracer(TRACER)
    with tracer.start_as_current_span(
        f"{operation} {model}", kind=trace.SpanKind.CLIENT, attributes=attributes
    ) as span:
        yield span


def answered(span: Any, gen: Any) -> None:
    """The response's attributes on a model call's span."""
    span.set_attribute("gen_ai.response.model", str(gen.model))
    span.set_attribute("gen_ai.usage.input_tokens", int(gen.prompt_tokens))
    span.set_attribute("gen_ai.usage.output_tokens", int(gen.completion_tokens))
    span.set_attribute("gen_ai.usage.cache_read.input_tokens", int(gen.cached_tokens))
    if capture_content():
        span.set_attribute("gen_ai.output.messages", json.dumps([{"role": "assistant", "content": gen.text}]))


def failed(span: Any, kind: str) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR))
