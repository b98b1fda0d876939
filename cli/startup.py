"""Start-up failures: a bad configuration is one message naming the file and key (or the host and port), exit code
2, and no traceback unless `run.py --debug …`.

`starting()` wraps what a command does to open its persona and data dir, and turns the failures a user can fix
(invalid settings, an unreadable persona file, a database that cannot be opened, a data dir that cannot be written)
into a StartupError; `AnimaGroup`, the app's command group, prints it and exits 2. Anything else keeps its
traceback: a bug is not a configuration problem. `preflight()` checks a run's configuration before a model is
installed or loaded.
"""

from __future__ import annotations

import functools
import inspect
import tempfile
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape
from typer._click import Context as ClickContext  # typer vendors click: TyperGroup.invoke takes its Context

from cli.lazy import LazyGroup

if TYPE_CHECKING:
    from persona.settings import Overrides, Settings

DEBUG = "anima.debug"  # ctx.meta key: --debug was given


class StartupError(Exception):
    """anima cannot start with this configuration; `str()` is what to tell the user."""

    def __init__(self, what: str, detail: str):
        super().__init__(f"{what}: {detail}" if "\n" not in detail else f"{what}:\n  " + detail.replace("\n", "\n  "))


def _in_directory(message: str, directory: str | Path | None) -> str:
    """'config.yaml:3 memory.recall_k: …' names the file in the persona directory; say which directory."""
    if not directory:
        return message
    lines = []
    for line in message.splitlines():
        name, sep, rest = line.partition(":")
        if sep and "/" not in name and " " not in name and (Path(directory) / name).is_file():
            line = f"{Path(directory) / name}:{rest}"
        lines.append(line)
    return "\n".join(lines)


@contextmanager
def starting() -> Iterator[None]:
    """Opening a persona or a data dir: the failures a user can fix become StartupError."""
    from managers.errors import NotFound
    from memory import DatabaseOpenError, SchemaError  # what a command opens anyway: not imported before it runs
    from memory.fleet import FleetError
    from persona import PersonaError
    from persona.settings import SettingsError

    try:
        yield
    except SettingsError as exc:
        raise StartupError("invalid settings", _in_directory(str(exc), exc.directory)) from exc
    except PersonaError as exc:
        raise StartupError("invalid persona", _in_directory(str(exc), exc.directory)) from exc
    except (DatabaseOpenError, SchemaError) as exc:
        raise StartupError("cannot open the database", str(exc)) from exc
    except FleetError as exc:
        raise StartupError("deployment", str(exc)) from exc
    except NotFound as exc:
        raise StartupError("no such persona", str(exc)) from exc
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        raise StartupError("cannot open the data", f"{where}{exc.strerror or exc}") from exc


def check_data_dir(data_dir: str | Path) -> None:
    """The data dir exists (or can be made) and takes files: checkpoints and the index are written there."""
    path = Path(data_dir).expanduser().resolve()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StartupError("the data dir is not usable", f"{path}: cannot create it ({exc.strerror or exc})") from exc
    try:
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise StartupError(
            "the data dir is not usable", f"{path}: cannot write files in it ({exc.strerror or exc})"
        ) from exc


def preflight(overrides: Overrides) -> Settings:
    """A run's configuration, checked before any model is installed or loaded: settings, data dir, database and
    persona files — each failure one message (StartupError). Returns the run's settings."""
    from graph.services import open_settings
    from memory import Database
    from persona import load_persona
    from persona.settings import load_settings

    with starting():
        located = load_settings(overrides=overrides)
        check_data_dir(located.data_dir)
        database = Database.open(located.data_dir, located.db_url)
        try:
            settings = open_settings(database, overrides)
            load_persona(settings.persona_dir)
        finally:
            database.close()
    return settings


def _remember_debug(ctx: typer.Context, _param: Any, value: bool) -> bool:
    if value:
        ctx.meta[DEBUG] = True
    return value


def with_debug_option(callback: Callable[..., Any]) -> Callable[..., Any]:
    """`callback` (the app's own command) with a global `--debug` option; the option is not passed to it."""

    @functools.wraps(callback)
    def wrapped(*args: Any, debug: bool = False, **kwargs: Any) -> Any:  # typer passes it even if not exposed
        return callback(*args, **kwargs)

    option = typer.Option(
        False,
        "--debug",
        expose_value=False,
        callback=_remember_debug,
        help="Show the traceback when a configuration error stops anima (default: $ANIMA_DEBUG).",
    )
    signature = inspect.signature(callback, eval_str=True)
    wrapped.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[
            *signature.parameters.values(),
            inspect.Parameter("debug", inspect.Parameter.KEYWORD_ONLY, default=option, annotation=bool),
        ]
    )
    wrapped.__annotations__ = {**getattr(callback, "__annotations__", {}), "debug": bool}
    return wrapped


def debugging(ctx: ClickContext) -> bool:
    """--debug, else the setting `debug` (ANIMA_DEBUG) — read alone: the rest of the settings may be what failed."""
    from persona.settings import SettingsError, run_value

    if ctx.meta.get(DEBUG):
        return True
    try:
        return bool(run_value("debug"))
    except SettingsError:  # ANIMA_DEBUG=maybe: no traceback, the start-up error is the message that matters
        return False


class AnimaGroup(LazyGroup):
    """The app's command group: a StartupError anywhere below it is one message and exit code 2."""

    def invoke(self, ctx: ClickContext) -> Any:
        try:
            return super().invoke(ctx)
        except StartupError as exc:
            err = Console(stderr=True)
            if debugging(ctx):
                err.print("".join(traceback.format_exception(exc)), markup=False, highlight=False, soft_wrap=True)
            err.print(f"[red]anima cannot start[/] — {escape(str(exc))}", soft_wrap=True, highlight=False)
            raise typer.Exit(2) from None
