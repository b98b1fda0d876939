"""The API's reference page, /docs: Swagger UI over /openapi.json, its script, stylesheet and icon served from
web/static/vendor (the npm package swagger-ui-dist, pinned in VENDORED.json) — FastAPI's own /docs loads them from
a CDN, and is blank without a network. Nothing on the page leaves the app: Swagger UI's validator badge (which asks
validator.swagger.io about the spec) is off. ReDoc, FastAPI's second viewer, is not served (one viewer is enough).

Under a persona's prefix (/p/<name>/docs, web/context.py) every URL the page names keeps the prefix."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from starlette.responses import HTMLResponse

SWAGGER_UI = "/static/vendor/swagger-ui-dist-5.35.0"
DOCS_PATH = "/docs"


def install(app: FastAPI) -> None:
    """/docs on `app` (created with `docs_url=None, redoc_url=None`: FastAPI's CDN pages off)."""

    @app.get(DOCS_PATH, include_in_schema=False)
    def api_docs(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} — API",
            swagger_js_url=f"{root}{SWAGGER_UI}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{SWAGGER_UI}/swagger-ui.css",
            swagger_favicon_url=f"{root}{SWAGGER_UI}/favicon-32x32.png",
            swagger_ui_parameters={"validatorUrl": None},
        )
