"""Rendering pages and fragments: Jinja2 templates with what every page shows (persona, navigation, CSRF token,
approvals waiting, the language switcher). Every text people read is `{{ _("…") }}` (Jinja2's i18n extension over
the `web` gettext catalogue, i18n/); the request's language is `lang` in the template's context."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from jinja2 import pass_context
from jinja2.runtime import Context

import i18n
from i18n import N_
from managers.audience import OWNER

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
NAV = (
    ("talk", "/", N_("Talk")),
    ("thoughts", "/thoughts", N_("Thoughts")),
    ("inner_life", "/inner-life", N_("Inner life")),
    ("memory", "/memory", N_("Memory")),
    ("approvals", "/approvals", N_("Approvals")),
    ("sessions", "/sessions", N_("Sessions")),
    ("people", "/people", N_("People")),
    ("persona", "/persona", N_("Persona")),
    ("controls", "/controls", N_("Controls")),
    ("mesh", "/mesh", N_("Mesh")),
)


# How a note came (memory/note_kinds.py Door) and who its author is, as the Talk page's badges say it
DOOR_LABELS = {
    "web": N_("page"),
    "api": N_("API"),
    "mcp": N_("MCP"),
    "voice": N_("voice"),
    "cli": N_("terminal"),
    "matrix": N_("Matrix"),
    "telegram": N_("Telegram"),
    "email": N_("e-mail"),
    "channel": N_("channel"),
    "a2a": N_("A2A"),
    "mesh": N_("mesh"),
}
ROLE_LABELS = {"owner": N_("owner"), "trusted": N_("trusted"), "guest": N_("guest"), "peer": N_("peer")}
# the navigation's badges: what waits for the owner (managers/conversation.py `waiting_for_owner`), page by page
BADGES = {"talk": ("unread",), "approvals": ("approvals",), "people": ("contacts", "refused")}


def badge_count(key: str, waiting: dict[str, int] | None) -> int:
    return sum(int((waiting or {}).get(part, 0)) for part in BADGES.get(key, ()))


def request_language(request: Request, setting: str | None = None) -> str:
    """The language a page is rendered in: the page's switcher (its cookie), else the `language` setting unless
    `auto`, else the browser's Accept-Language, else English (i18n.negotiate)."""
    return i18n.negotiate(
        chosen=request.cookies.get(i18n.COOKIE), setting=setting, accept_language=request.headers.get("accept-language")
    )


def gettext_for(lang: str | None) -> Callable[[str], str]:
    """`_` for Python code rendering a text people read in `lang` (the `web` catalogue)."""
    return i18n.translations(lang or i18n.SOURCE, "web").gettext


def translated(request: Request, message: str, **values: Any) -> str:
    """`message` (marked with N_) in the request's language, its %(name)s placeholders filled."""
    text = gettext_for(language_of(request))(message)
    return text % values if values else text


@pass_context
def _gettext(context: Context, message: str) -> str:
    return i18n.translations(context.get("lang") or i18n.SOURCE, "web").gettext(message)


@pass_context
def _ngettext(context: Context, singular: str, plural: str, n: int) -> str:
    return i18n.translations(context.get("lang") or i18n.SOURCE, "web").ngettext(singular, plural, n)


def make_templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(TEMPLATES))
    templates.env.add_extension("jinja2.ext.i18n")
    # newstyle: `_("… %(n)s", n=3)` formats after translating, and the translation is autoescaped like any value
    templates.env.install_gettext_callables(_gettext, _ngettext, newstyle=True)  # type: ignore[attr-defined]
    templates.env.globals["languages"] = [(code, i18n.NAMES[code]) for code in i18n.LANGUAGES]
    templates.env.globals["door_labels"] = DOOR_LABELS
    templates.env.globals["role_labels"] = ROLE_LABELS
    templates.env.globals["badge_keys"] = tuple(BADGES)
    templates.env.globals["badge_count"] = badge_count
    templates.env.filters["short"] = lambda text, n=200: (
        (str(text or "")[:n] + "…") if len(str(text or "")) > n else str(text or "")
    )
    templates.env.filters["when"] = lambda value: (
        value.strftime("%Y-%m-%d %H:%M:%S") if hasattr(value, "strftime") else (value or "")
    )
    return templates


def render(
    request: Request, template: str, page: str | None = None, status_code: int = 200, **context: Any
) -> HTMLResponse:
    """A whole page (or, for a fragment template, just the fragment). `base`: the persona's prefix in a deployment
    (`/p/<name>`; empty for the one persona of a data dir) — every link of a page starts with it."""
    from web.context import DeploymentServices, get_services

    app_services = request.app.state.services
    deployed = isinstance(app_services, DeploymentServices)
    common: dict[str, Any] = {
        "page": page,
        "nav": NAV,
        "csrf_token": app_services.csrf_token,
        "base": request.scope.get("root_path", ""),
        "deployment": deployed,
        "lang": language_of(request),
    }
    if page is not None and deployed and not request.scope.get("anima_persona"):  # the deployment's own pages
        common.update(nav=(), persona_name=gettext_for(common["lang"])("Personas"), approvals_waiting=0, waiting={})
    elif page is not None:
        services = get_services(request)
        with services.managers.unit(OWNER) as house:
            common["waiting"] = house.conversation.waiting_for_owner()
            common["approvals_waiting"] = common["waiting"]["approvals"]
        common["persona_name"] = services.persona().display_name
    templates: Jinja2Templates = request.app.state.templates
    return templates.TemplateResponse(request, template, {**common, **context}, status_code=status_code)


def language_of(request: Request) -> str:
    """The request's language, worked out once per request (the setting is read from the persona's settings)."""
    cached = getattr(request.state, "lang", None)
    if cached:
        return str(cached)
    from web.context import DeploymentServices, get_services

    setting = None
    chosen_in_page = i18n.supported(request.cookies.get(i18n.COOKIE))  # it wins: then the settings need no reading
    persona_known = not isinstance(request.app.state.services, DeploymentServices) or request.scope.get("anima_persona")
    if not chosen_in_page and persona_known:
        try:
            setting = get_services(request).settings().language
        except Exception:  # noqa: BLE001 - a page that cannot read its settings still renders (in the browser's language)
            setting = None
    request.state.lang = request_language(request, setting)
    return str(request.state.lang)
