"""The language switcher of every page: `/language/<code>?next=/path` remembers the choice in a cookie (a year) and
goes back to the page; the choice wins over the `language` setting and the browser's Accept-Language."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse

import i18n
from web.errors import ServiceError

router = APIRouter()
YEAR_S = 365 * 24 * 3600


@router.get("/language/{code}")
def choose_language(request: Request, code: str, next: str = "/") -> RedirectResponse:  # noqa: A002 - the query parameter's name
    language = i18n.supported(code)
    if language is None or language != code.lower():
        raise ServiceError(f"no language {code!r}: one of {', '.join(i18n.LANGUAGES)}", field="code", status=404)
    base = request.scope.get("root_path", "")
    target = next if next.startswith("/") and not next.startswith("//") and "\\" not in next else base + "/"
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(i18n.COOKIE, language, max_age=YEAR_S, path="/", samesite="lax")
    return response
