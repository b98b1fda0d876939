"""`run.py serve`: the web app and API alone, over a data dir whose loop runs elsewhere (or not at all)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from cli.options import ChromaUrl, DataDir, DbUrl, Lang, PersonaDir, WebAllowedHosts, WebHost, WebPort, err
from cli.startup import StartupError, preflight, starting

if TYPE_CHECKING:
    from persona.settings import Overrides


def check_web_binding(host: str, allowed_hosts: str | None = None) -> None:
    """Serving beyond this machine without a token is refused before an address is printed or anything is loaded:
    one message, exit 2 (cli/startup.py). So is a bad --allowed-hosts entry."""
    from persona.settings import load_settings
    from web.security import AllowedHosts, BindingError, check_binding

    with starting():
        settings = load_settings()  # ANIMA_API_TOKEN and ANIMA_ALLOWED_HOSTS, read by the settings
    try:
        check_binding(host, settings.api_token.get_secret_value() if settings.api_token else None)
        AllowedHosts.serving(host, allowed_hosts if allowed_hosts is not None else settings.allowed_hosts)
    except BindingError as exc:
        raise StartupError("the web app", str(exc)) from exc


def start_web(overrides: Overrides, host: str, port: int, allowed_hosts: str | None = None) -> Any:
    """The app beside the loop (`run.py`, `make run`). An unsafe binding stops the run (exit 2); a busy port only
    the app: the persona thinks on, and `run.py serve --port …` can serve it later."""
    from web.security import BindingError
    from web.server import PortInUse, start_in_thread

    try:
        web = start_in_thread(overrides, host, port, allowed_hosts=allowed_hosts)
    except BindingError as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(2) from None
    except PortInUse as exc:
        err.print(f"[yellow]web app not started: {escape(str(exc))} — the loop runs without it[/]")
        return None
    err.print(f"[bold]web app:[/] {web.url}  (API: {web.url}/docs · events: {web.url}/api/events)")
    return web


def serve(
    host: str | None = WebHost,
    port: int | None = WebPort,
    persona: str | None = PersonaDir,
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    chroma_url: str | None = ChromaUrl,
    allowed_hosts: str | None = WebAllowedHosts,
    lang: str | None = Lang,
) -> None:
    """Serve the web app and API over a data dir (talk, thoughts, inner life, memory, approvals, sessions, persona,
    controls). The loop may run in another process: the app reads and writes the same database."""
    from persona.settings import Overrides, load_settings
    from web.security import BindingError
    from web.server import serve as serve_app

    overrides = Overrides.of(
        persona_dir=persona,
        data_dir=data_dir,
        db_url=db,
        chroma_url=chroma_url,
        language=lang,
        web_host=host,
        web_port=port,
        allowed_hosts=allowed_hosts,
    )
    with starting():
        where = load_settings(overrides=overrides.replace(persona_dir=None))  # where it listens: flags, environment
    host, port = where.web_host, where.web_port
    check_web_binding(host, where.allowed_hosts)  # the refusal comes first: no address is printed for a server that
    settings = preflight(overrides)  # will not start
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    err.print(f"[bold]web app:[/] http://{shown}:{port}  (Ctrl-C stops)")
    try:
        serve_app(overrides, host, port, allowed_hosts=settings.allowed_hosts)
    except BindingError as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(2) from None
