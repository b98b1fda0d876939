"""Traces and metrics the ecosystem's way.

Traces: OpenTelemetry spans for each tick (graph/loop/driver.py), each step (graph/compiler.py) and each model call
(llm/tracing.py: the GenAI semantic conventions). `configure_tracing` installs the SDK with an OTLP exporter (HTTP,
protobuf) only when `OTEL_EXPORTER_OTLP_ENDPOINT` is set — the standard OTEL_* variables configure it further
(headers, service name…); otherwise nothing is installed and every span is OpenTelemetry's no-op.

Metrics: `/metrics` in Prometheus's text format (web/app.py), from `AnimaCollector`: at each scrape it reads the
persona's own accounting (every model call in `llm_calls`, every tick, the quiet ticks' records, the answers to its
humans) — so the web app alone (`run.py serve`) shows what a loop in another process spent, and nothing is counted
twice. Base units (seconds, tokens), bounded labels (persona, model, purpose, outcome, status).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)
LATENCY_BUCKETS_S = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
WAIT_BUCKETS_S = (1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0)


def configure_tracing(service_name: str = "anima") -> bool:
    """Install the OpenTelemetry SDK exporting over OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (once per
    process); False when it is not set (spans stay no-ops)."""
    if not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return False
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    if isinstance(trace.get_tracer_provider(), TracerProvider):
        return True
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    name = os.environ.get("OTEL_SERVICE_NAME") or service_name
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    log.info("OpenTelemetry traces go to %s", os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"])
    return True


def tick_span(thread_id: str, persona: str) -> Any:
    """The span of one tick (a context manager)."""
    from opentelemetry import trace

    return trace.get_tracer("anima").start_as_current_span(
        "tick", attributes={"anima.thread": thread_id, "anima.persona": persona}
    )


class AnimaCollector:
    """A prometheus_client collector reading one persona's accounting at each scrape (through its managers: a
    `ManagerFactory`)."""

    def __init__(self, managers: Any, persona: str) -> None:
        self.managers, self.persona = managers, persona

    def describe(self) -> list[Any]:
        return []  # collected at scrape time only (no metric names are reserved at registration)

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

        with self.managers.reading() as house:
            read = house.budget.metrics(LATENCY_BUCKETS_S)
        calls, ticks, quiet, waits = read["calls"], read["ticks"], read["quiet"], read["waits"]
        persona = self.persona
        count = CounterMetricFamily("anima_llm_calls", "Model calls", labels=["persona", "model", "purpose", "outcome"])
        prompt = CounterMetricFamily(
            "anima_llm_prompt_tokens",
            "Prompt tokens sent, new or served from a prompt cache",
            labels=["persona", "model", "cache"],
        )
        completion = CounterMetricFamily(
            "anima_llm_completion_tokens", "Completion tokens received", labels=["persona", "model"]
        )
        latency = HistogramMetricFamily(
            "anima_llm_call_duration_seconds", "Model call duration", labels=["persona", "model"], unit=""
        )
        for row in calls["by_purpose"]:
            count.add_metric([persona, row["model"], row["purpose"], "ok"], row["ok"])
            count.add_metric([persona, row["model"], row["purpose"], "error"], row["failed"])
        for row in calls["by_model"]:
            prompt.add_metric([persona, row["model"], "new"], row["prompt_tokens"] - row["cached_tokens"])
            prompt.add_metric([persona, row["model"], "cached"], row["cached_tokens"])
            completion.add_metric([persona, row["model"]], row["completion_tokens"])
            buckets = [(str(bound), n) for bound, n in zip(LATENCY_BUCKETS_S, row["buckets"])]
            buckets.append(("+Inf", row["calls"]))
            latency.add_metric([persona, row["model"]], buckets, row["latency_s"])
        yield count
        yield prompt
        yield completion
        yield latency
        tick = CounterMetricFamily("anima_ticks", "Ticks run (each calls the model)", labels=["persona", "status"])
        for status, n in sorted(ticks.items()):
            tick.add_metric([persona, status], n)
        yield tick
        skipped = CounterMetricFamily(
            "anima_quiet_ticks", "Ticks with nothing new to think about: no model call", labels=["persona"]
        )
        skipped.add_metric([persona], quiet)
        yield skipped
        replies = HistogramMetricFamily(
            "anima_reply_wait_seconds", "From a human's note to the persona's answer", labels=["persona"]
        )
        replies.add_metric(
            [persona],
            [(str(b), sum(1 for w in waits if w <= b)) for b in WAIT_BUCKETS_S] + [("+Inf", len(waits))],
            float(sum(waits)),
        )
        yield replies
