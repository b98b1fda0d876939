"""The JSON API against its own OpenAPI schema (/openapi.json), with schemathesis:

- its command line, as anyone runs it — `st run http://…/openapi.json --checks all` from the repository (which reads
  schemathesis.toml there) against `run.py serve` — passes: every status a route answers is documented, it takes
  what the schema says and refuses what the schema refuses, and nothing answers a server error;
- in process (ASGI), every operation, valid and invalid inputs, never answers a server error (5xx, or an exception
  escaping the app), over a persona that has ticked: at most MAX_EXAMPLES cases per operation and mode, and no more
  sent once BUDGET_S has passed; each xdist worker fuzzes its share of the operations over its own app.

The shapes of config text that once answered 500 (`{"text": "?"}`: a YAML key that is not a string) are explicit
cases in tests/unit/test_config_shapes.py, where a new one is one line.

The live stream (/api/events) never ends by design and is left out. The persona is a copy: the fuzzer may rewrite its
files, never the shipped ones. Hypothesis and hypothesis-jsonschema are pinned to a pair that works together
(pyproject.toml's `test` extra)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode

from persona.settings import Overrides
from web.app import create_app

pytestmark = (
    pytest.mark.integration
)  # in tests/conftest.py's SPREAD: each xdist worker fuzzes its share of the operations

MAX_EXAMPLES = 12  # per operation and mode (st run's coverage phase adds its ~2,400 systematic cases)
BUDGET_S = 6.0  # per operation and mode: past it, the examples drawn are not sent (a bound on the run, not a timing)…
AT_LEAST = 5  # …once this many were
ROOT = Path(__file__).resolve().parents[2]
SHIPPED_PERSONA = ROOT / "persona" / "default"
ST = Path(sys.executable).with_name("st")  # schemathesis's command line, beside this Python
ST_EXAMPLES = "5"  # per operation in the fuzzing phase (the coverage phase's cases are its own)
ST_SEED = "20261125"  # the same cases every run: a failure here is the API's, reproducible with this seed
ST_GUARD_S = 600  # a hang guard for the whole run, not a timing
SCHEMA = create_app().openapi()  # building the app opens nothing: the schema is known at collection time


def is_stream(path: str, operation: dict) -> bool:
    contents = [c for r in (operation.get("responses") or {}).values() for c in (r.get("content") or {})]
    return path == "/api/events" or "text/event-stream" in contents


OPERATIONS = sorted(
    f"{method.upper()} {path}"
    for path, item in SCHEMA["paths"].items()
    for method, operation in item.items()
    if method in ("get", "put", "post", "patch", "delete") and not is_stream(path, operation)
)
SKIPPED_STREAMS = sorted(
    f"{m.upper()} {p}"
    for p, item in SCHEMA["paths"].items()
    for m, o in item.items()
    if m in ("get", "post") and is_stream(p, o)
)


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    """The app over a persona ticking on a FakeLLM (as tests/conftest.py's `web`), one for the module."""
    from tests.conftest import make_agent
    from tests.fakes.llm import FakeLLM
    from web.context import WebServices

    base = tmp_path_factory.mktemp("fuzz")
    persona_dir = base / "persona"
    shutil.copytree(SHIPPED_PERSONA, persona_dir)
    shipped = tree_digest(SHIPPED_PERSONA)
    agent = make_agent(base / "data", FakeLLM("fake"), persona_dir=str(persona_dir))
    agent.tick()  # a tick, a thought, a message: something for the read operations to find
    services = WebServices(
        db=agent.services.db,
        overrides=Overrides.of(data_dir=str(base / "data"), persona_dir=str(persona_dir)),
        clock=agent.services.clock,
        _memory=agent.services.memory,
    )
    app = create_app(services=services)
    # the app answers only to the names it is served as (web/security.py): the schema is read as from 127.0.0.1
    schema = schemathesis.openapi.from_asgi("/openapi.json", app, headers={"Host": "127.0.0.1"})
    yield schema, app
    agent.services.db.close()
    assert tree_digest(SHIPPED_PERSONA) == shipped, "the fuzz run changed the shipped persona"


def test_schemathesis_command_line_passes_against_the_served_app(served_app):
    """`st run <url>/openapi.json --checks all` exits 0: all of its checks (undocumented statuses, positive data
    accepted, negative data refused, Allow on a 405, response schemas, …) pass against `run.py serve`."""
    assert ST.exists(), f"schemathesis's command line is not installed beside {sys.executable}"
    before = tree_digest(SHIPPED_PERSONA)
    command = [
        str(ST),
        "run",
        f"{served_app}/openapi.json",
        "--checks",
        "all",
        "--max-examples",
        ST_EXAMPLES,
        "--seed",
        ST_SEED,
        "--workers",
        "1",
        "--request-timeout",
        "20",
        "--generation-database",
        "none",
        "--no-color",
    ]  # one worker: two threads of Hypothesis parsing lambdas at once crash CPython 3.11.7
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=ST_GUARD_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"st run did not end within {ST_GUARD_S}s:\n{(exc.stdout or '')[-3000:]}")
    report = done.stdout + done.stderr
    summary = report[report.rfind("SUMMARY") :] if "SUMMARY" in report else report[-3000:]
    sections = [at for at in (report.find("= ERRORS ="), report.find("= FAILURES =")) if at >= 0]
    failures = report[min(sections) :][:6000] if sections else ""
    assert done.returncode == 0, f"st run exited {done.returncode}:\n{failures}\n{summary}"
    assert "Tested:" in summary and " passed" in report
    assert tree_digest(SHIPPED_PERSONA) == before, "the run changed the shipped persona"


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
        until, sent = time.monotonic() + BUDGET_S, [0]

        @settings(
            max_examples=MAX_EXAMPLES,
            deadline=None,
            database=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=found[0].as_strategy(generation_mode=mode))
        def fuzz(case) -> None:
            if sent[0] >= AT_LEAST and time.monotonic() > until:  # noqa: B023 - called within this iteration
                return
            sent[0] += 1  # noqa: B023 - called within this iteration
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
