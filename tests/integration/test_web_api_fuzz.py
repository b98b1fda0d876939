"""The JSON API fuzzed from its own OpenAPI schema (/openapi.json) with schemathesis, in process (ASGI): every
operation, valid and invalid inputs, must never answer a server error (5xx, or an exception escaping the app).
The live streams (text/event-stream) never end by design and are left out. The persona is a copy: the fuzzer may
rewrite its files, never the shipped ones."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode

from web.app import create_app
from persona.settings import Overrides

pytestmark = pytest.mark.integration

MAX_EXAMPLES = 20  # per operation and mode: bounded, a hang guard on the whole run
SHIPPED_PERSONA = Path(__file__).resolve().parents[2] / "persona" / "default"
SCHEMA = create_app().openapi()  # building the app opens nothing: the schema is known at collection time


def is_stream(path: str, operation: dict) -> bool:
    contents = [c for r in (operation.get("responses") or {}).values() for c in (r.get("content") or {})]
    return path == "/api/events" or "text/event-stream" in contents


OPERATIONS = sorted(f"{method.upper()} {path}" for path, item in SCHEMA["paths"].items()
                    for method, operation in item.items()
                    if method in ("get", "put", "post", "patch", "delete") and not is_stream(path, operation))
SKIPPED_STREAMS = sorted(f"{m.upper()} {p}" for p, item in SCHEMA["paths"].items() for m, o in item.items()
                         if m in ("get", "post") and is_stream(p, o))


class _IteratedMany:
    """hypothesis-jsonschema 0.23.1 drives `many(...)` with `.more()`; the pinned Hypothesis only iterates it inside a
    `with` block. The same draws, the old way round (used by the object strategy schemathesis builds on)."""

    def __init__(self, data, **kwargs) -> None:
        from hypothesis.internal.conjecture.utils import many

        self._many = many(data, **kwargs)
        self._many.__enter__()
        self._elements = iter(self._many)

    def more(self) -> bool:
        try:
            next(self._elements)
            return True
        except StopIteration:
            self._many.__exit__(None, None, None)
            return False

    def reject(self, why: str | None = None) -> None:
        self._many.reject(why)


@pytest.fixture(scope="module", autouse=True)
def _jsonschema_strategies_on_this_hypothesis():
    import types

    from hypothesis.internal.conjecture import utils
    from hypothesis_jsonschema import _from_schema

    if hasattr(utils.many, "more"):  # a Hypothesis that still has it: nothing to adapt
        yield
        return
    adapted = types.SimpleNamespace(**{name: getattr(utils, name) for name in dir(utils) if not name.startswith("__")})
    adapted.many = _IteratedMany
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_from_schema, "cu", adapted)
        yield


def tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    """The app over a persona ticking on a FakeLLM (as tests/conftest.py's `web`), one for the module."""
    from tests.fakes.llm import FakeLLM
    from tests.conftest import make_agent
    from web.context import WebServices

    base = tmp_path_factory.mktemp("fuzz")
    persona_dir = base / "persona"
    shutil.copytree(SHIPPED_PERSONA, persona_dir)
    shipped = tree_digest(SHIPPED_PERSONA)
    agent = make_agent(base / "data", FakeLLM("fake"), persona_dir=str(persona_dir))
    agent.tick()  # a tick, a thought, a message: something for the read operations to find
    services = WebServices(db=agent.services.db, overrides=Overrides.of(data_dir=str(base / "data"), persona_dir=str(persona_dir)),
                           clock=agent.services.clock, _memory=agent.services.memory)
    app = create_app(services=services)
    # the app answers only to the names it is served as (web/security.py): the schema is read as from 127.0.0.1
    schema = schemathesis.openapi.from_asgi("/openapi.json", app, headers={"Host": "127.0.0.1"})
    yield schema, app
    agent.services.db.close()
    assert tree_digest(SHIPPED_PERSONA) == shipped, "the fuzz run changed the shipped persona"


def test_the_schema_lists_the_api_and_only_the_streams_are_left_out():
    assert "GET /api/conversation" in OPERATIONS and "POST /api/notes" in OPERATIONS and "PUT /api/loop" in OPERATIONS
    assert SKIPPED_STREAMS == ["GET /api/events"]


def _describe(case) -> str:
    body = case.body if not isinstance(case.body, (bytes, bytearray)) else case.body[:200]
    parts = [f"{case.method} {case.formatted_path}"]
    for name in ("path_parameters", "query", "headers", "cookies"):
        value = getattr(case, name, None)
        if value:
            parts.append(f"{name}={value!r}"[:300])
    if body is not None and not repr(body).startswith("<"):
        parts.append(f"body={body!r}"[:400])
    return " ".join(parts)


@pytest.mark.parametrize("operation", OPERATIONS)
def test_no_operation_answers_a_server_error(api, operation):
    schema, app = api
    method, path = operation.split(" ", 1)
    found = [r.ok() for r in schema.get_all_operations() if r.ok().method.upper() == method and r.ok().path == path]
    assert found, f"{operation} is not in the schema the app serves"
    errors: list[str] = []

    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None, phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(case=found[0].as_strategy(generation_mode=mode))
        def fuzz(case) -> None:
            try:
                case.call_and_validate(app=app, checks=[not_a_server_error])
            except AssertionError as failure:  # schemathesis' FailureGroup: a 5xx
                errors.append(f"{_describe(case)} → {str(failure).strip()[:600]}")
            except Exception as exc:  # noqa: BLE001 - an exception escaping the app is a server error too
                errors.append(f"{_describe(case)} → {type(exc).__name__}: {str(exc)[:400]}")

        before = len(errors)
        try:
            fuzz()
        except Unsatisfiable:  # no parameter or body to make invalid (negative mode): nothing to fuzz
            assert mode is GenerationMode.NEGATIVE
        errors[before:] = [f"{mode.value}: {e}" for e in errors[before:]]
        if len(errors) >= 5:
            break
    assert not errors, "\n".join(errors[:5])
