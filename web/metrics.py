"""`/metrics`: the persona's spend and pace in Prometheus's text format (graph/telemetry.py `AnimaCollector`: read from
its accounting at each scrape). Over a deployment, `/p/<name>/metrics` is that persona's."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from graph.telemetry import AnimaCollector
from managers import ManagerFactory

METRICS_PATH = "/metrics"


def _scrape(managers: ManagerFactory, persona: str) -> bytes:
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)  # one per scrape: nothing global, nothing kept
    registry.register(AnimaCollector(managers, persona))
    return generate_latest(registry)


async def metrics(request: Request) -> Response:
    from prometheus_client import CONTENT_TYPE_LATEST

    from web.context import get_services

    services = get_services(request)
    settings = services.settings()
    body = await run_in_threadpool(_scrape, services.managers, str(getattr(settings, "name", None) or "persona"))
    return Response(body, media_type=CONTENT_TYPE_LATEST)
