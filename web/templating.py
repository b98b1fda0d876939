"""Rendering pages and fragments: Jinja2 templates with what every page shows (persona, navigation, CSRF token,
approvals waiting)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.templating import Jinja2Templates

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
NAV = (("talk", "/", "Talk"), ("thoughts", "/thoughts", "Thoughts"), ("inner_life", "/inner-life", "Inner life"),
       ("memory", "/memory", "Memory"), ("approvals", "/approvals", "Approvals"), ("sessions", "/sessions", "Sessions"),
       ("people", "/people", "People"), ("persona", "/persona", "Persona"), ("controls", "/controls", "Controls"),
       ("mesh", "/mesh", "Mesh"))


def make_templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(TEMPLATES))
    templates.env.filters["short"] = lambda text, n=200: (str(text or "")[:n] + "…") if len(str(text or "")) > n else str(text or "")
    templates.env.filters["when"] = lambda value: value.strftime("%Y-%m-%d %H:%M:%S") if hasattr(value, "strftime") else (value or "")
    return templates


def render(request: Request, template: str, page: str | None = None, status_code: int = 200, **context: Any):
    """A whole page (or, for a fragment template, just the fragment). `base`: the persona's prefix in a deployment
    (`/p/<name>`; empty for the one persona of a data dir) — every link of a page starts with it."""
    from web.context import DeploymentServices, get_services

    app_services = request.app.state.services
    deployed = isinstance(app_services, DeploymentServices)
    common: dict[str, Any] = {"page": page, "nav": NAV, "csrf_token": app_services.csrf_token,
                              "base": request.scope.get("root_path", ""), "deployment": deployed}
    if page is not None and deployed and not request.scope.get("anima_persona"):  # the deployment's own pages
        common.update(nav=(), persona_name="Personas", approvals_waiting=0)
    elif page is not None:
        services = get_services(request)
        with services.db.unit() as repos:
            common["approvals_waiting"] = len(repos.approvals.pending())
        common["persona_name"] = services.persona().display_name
    return request.app.state.templates.TemplateResponse(request, template, {**common, **context},
                                                        status_code=status_code)
