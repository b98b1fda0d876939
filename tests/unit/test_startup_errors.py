"""A bad configuration stops every command with one message naming the file and key (or the host and port), exit
code 2 and no traceback — `--debug` shows it. Nothing here loads a model: runs use an LLM server that is not there
and no fallback, and every case fails before a model would be needed."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import app
from persona import default_persona_dir

ROOT = Path(__file__).resolve().parents[2]
NO_MODEL = ("--llm-url", "http://127.0.0.1:9/v1", "--no-fallback")


@pytest.fixture(autouse=True)
def _no_anima_environment(no_anima_environment):
    """Settings resolved here see none of the machine's ANIMA_* variables."""


@pytest.fixture
def free_port():
    """A loopback port nothing listens on: connecting to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(app, list(args), env=env)


def refused(result, *needles: str) -> str:
    """Exit code 2, a handled exit (not an exception escaping the app), one message with every needle in it."""
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2, (result.exit_code, result.stderr, result.stdout)
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("anima cannot start"), result.stderr
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr)
    return result.stderr


def run_args(persona_dir: Path, data_dir: Path, *more: str) -> list[str]:
    return ["--persona", str(persona_dir), "--data-dir", str(data_dir), *NO_MODEL, "--ticks", "0", *more]


# --- the persona's files -------------------------------------------------------------------------------------------


def test_config_yaml_with_a_wrong_type_names_file_line_and_key(persona, tmp_path):
    (persona / "config.yaml").write_text("name: Tester\nmemory:\n  recall_k: lots\n")
    where = f"{persona / 'config.yaml'}:3 memory.recall_k"
    data = str(tmp_path / "data")
    refused(invoke(*run_args(persona, tmp_path / "data")), where, "valid integer")
    refused(invoke("inspect", "--data-dir", data, "--persona", str(persona)), where)
    refused(invoke("dream", "--data-dir", data, "--persona", str(persona), *NO_MODEL), where)
    refused(invoke("persona", "show", "--data-dir", data, "--persona", str(persona)), where)
    refused(invoke("kb", "search", "x", "--data-dir", data, "--persona", str(persona)), where)


def test_config_yaml_syntax_error_names_file_and_line(persona, tmp_path):
    (persona / "config.yaml").write_text("name: Tester\nmemory:\n  recall_k: [5\n")
    refused(invoke(*run_args(persona, tmp_path / "data")), f"{persona / 'config.yaml'}:4 (yaml)")


def test_config_yaml_that_is_not_a_mapping(persona, tmp_path):
    (persona / "config.yaml").write_text("- just\n- a list\n")
    refused(invoke(*run_args(persona, tmp_path / "data")), f"{persona / 'config.yaml'}:1", "expected a mapping")


def test_an_unknown_config_key_is_named(persona, tmp_path):
    (persona / "config.yaml").write_text("name: Tester\nmemory:\n  recal_k: 5\n")
    refused(
        invoke(*run_args(persona, tmp_path / "data")),
        f"{persona / 'config.yaml'}:3 memory.recal_k",
        "Extra inputs are not permitted",
    )


def test_ethics_yaml_wrongly_typed_names_file_line_and_key(persona, tmp_path):
    (persona / "ethics.yaml").write_text("principles:\n  - Be kind.\nviolation_policy:\n  violation_at: high\n")
    refused(
        invoke(*run_args(persona, tmp_path / "data")),
        "invalid persona",
        f"{persona / 'ethics.yaml'}:4 violation_policy.violation_at",
        "valid number",
    )


def test_ethics_yaml_syntax_error_names_file_and_line(persona, tmp_path):
    (persona / "ethics.yaml").write_text("principles:\n  - Be kind.\n  oops: [\n")
    refused(invoke(*run_args(persona, tmp_path / "data")), f"{persona / 'ethics.yaml'}:")


def test_a_missing_persona_directory_is_named_and_not_recorded(tmp_path):
    missing = tmp_path / "no-such-persona"
    data = tmp_path / "data"
    refused(invoke(*run_args(missing, data)), f"persona directory {missing}: no such directory")
    refused(invoke("inspect", "--data-dir", str(data), "--persona", str(missing)), str(missing))
    result = invoke("inspect", "--data-dir", str(data), "--json")  # the data dir did not adopt the missing persona
    assert result.exit_code == 0, result.stderr


def test_a_binary_identity_file_is_named(persona, tmp_path):
    (persona / "IDENTITY.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe binary")
    refused(invoke(*run_args(persona, tmp_path / "data")), f"{persona / 'IDENTITY.md'}: not UTF-8 text")
    refused(
        invoke("persona", "show", "--data-dir", str(tmp_path / "data"), "--persona", str(persona)),
        f"{persona / 'IDENTITY.md'}: not UTF-8 text",
    )


def test_a_binary_config_yaml_is_named(persona, tmp_path):
    (persona / "config.yaml").write_bytes(b"name: \xff\xfe\x00\n")
    refused(
        invoke("inspect", "--data-dir", str(tmp_path / "data"), "--persona", str(persona)),
        f"{persona / 'config.yaml'}: not UTF-8 text",
    )


# --- URLs ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flag,value",
    [
        ("--llm-url", "notaurl"),
        ("--llm-url", "ftp://host/v1"),
        ("--llm-url", "http://"),
        ("--chroma-url", "localhost:8000"),
        ("--embed-url", "http://host:port/v1"),
    ],
)
def test_server_urls_must_be_http_urls_with_a_host(tmp_path, flag, value):
    args = ["--data-dir", str(tmp_path / "data"), "--ticks", "0", "--no-fallback"]
    args += [flag, value] if flag == "--llm-url" else [*NO_MODEL, flag, value]
    refused(invoke(*args), f"{flag} ", repr(value), "is not an http(s) URL with a host")


def test_a_bad_url_from_the_environment_names_the_variable(tmp_path):
    stderr = refused(
        invoke("kb", "search", "x", "--data-dir", str(tmp_path / "data"), env={"ANIMA_EMBED_URL": "notaurl"}),
        "ANIMA_EMBED_URL",
    )
    assert "'notaurl' is not an http(s) URL" in stderr


# --- the database --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["run", "say", "inspect", "approvals"])
def test_postgres_that_refuses_names_host_and_port_and_hides_the_password(tmp_path, free_port, command):
    url = f"postgresql://anima:s3cret@127.0.0.1:{free_port}/anima"
    stderr = refused(
        invoke(*_command(command, tmp_path, "--db", url)),
        f"127.0.0.1:{free_port} refused the connection",
        "anima:***@127.0.0.1",
    )
    assert "s3cret" not in stderr


@pytest.mark.parametrize("command", ["run", "say", "inspect"])
def test_postgres_host_that_does_not_resolve_is_named(tmp_path, command):
    url = "postgresql://anima@nosuchhost.invalid:5432/anima"
    refused(invoke(*_command(command, tmp_path, "--db", url)), "'nosuchhost.invalid' does not resolve")


@pytest.mark.parametrize("url", ["mysql://x/y", "foo://bar"])
def test_an_unknown_database_scheme_is_named(tmp_path, url):
    scheme = url.split(":")[0]
    refused(invoke("say", "hi", "--data-dir", str(tmp_path), "--db", url), f"unsupported scheme '{scheme}'")
    refused(invoke(*run_args(default_persona_dir(), tmp_path / "data", "--db", url)), f"unsupported scheme '{scheme}'")


@pytest.mark.parametrize("command", ["run", "say", "inspect", "approvals", "sessions", "kb"])
def test_a_corrupt_sqlite_file_is_named_and_left_untouched(tmp_path, command):
    data = tmp_path / "data"
    data.mkdir()
    garbage = bytes(range(256)) * 64
    (data / "anima.sqlite").write_bytes(garbage)
    refused(
        invoke(*_command(command, tmp_path)),
        f"{data / 'anima.sqlite'} is not a usable SQLite database",
        "file is not a database",
        "move it aside",
    )
    assert (data / "anima.sqlite").read_bytes() == garbage  # the user's data is never overwritten or "repaired"
    assert sorted(p.name for p in data.iterdir() if p.name.startswith("anima.sqlite")) == ["anima.sqlite"]


def _command(command: str, tmp_path: Path, *more: str) -> list[str]:
    data = str(tmp_path / "data")
    return {
        "run": ["--data-dir", data, *NO_MODEL, "--ticks", "0", *more],
        "say": ["say", "hello", "--data-dir", data, *more],
        "inspect": ["inspect", "--data-dir", data, *more],
        "approvals": ["approvals", "--data-dir", data, *more],
        "sessions": ["sessions", "list", "--data-dir", data, *more],
        "kb": ["kb", "list", "--data-dir", data, *more],
    }[command]


# --- the data dir --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["run", "say", "inspect"])
def test_a_data_dir_under_a_regular_file_is_named(tmp_path, command):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    data = blocker / "data"
    args = _command(command, tmp_path)
    args[args.index("--data-dir") + 1] = str(data)
    refused(invoke(*args), str(data), "Not a directory")
    assert blocker.read_text() == "not a directory"


def test_an_unwritable_data_dir_is_named(tmp_path):
    refused(
        invoke("--data-dir", "/proc", *NO_MODEL, "--ticks", "0"),
        "the data dir is not usable: /proc: cannot write files",
    )
    refused(invoke("say", "hi", "--data-dir", "/proc"), "/proc/anima.sqlite", "unable to open database file")


# --- a good configuration still starts, and --debug keeps the traceback --------------------------------------------


def test_a_good_configuration_is_not_refused(persona, tmp_path):
    data = str(tmp_path / "data")
    assert invoke("say", "hello", "--data-dir", data).exit_code == 0
    result = invoke("inspect", "--data-dir", data, "--persona", str(persona), "--json")
    assert result.exit_code == 0, result.stderr
    from cli.startup import preflight
    from persona.settings import Overrides

    preflight(Overrides.of(data_dir=data, persona_dir=str(persona), llm_url="https://models.example/v1"))


def _run_py(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANIMA_")}
    return subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_run_py_prints_one_message_and_exits_2(persona, tmp_path):
    (persona / "config.yaml").write_text("name: Tester\nmemory:\n  recall_k: lots\n")
    done = _run_py(*run_args(persona, tmp_path / "data"), cwd=tmp_path)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and 'File "' not in done.stderr
    assert done.stderr.strip().splitlines() == [
        (
            f"anima cannot start — invalid settings: {persona / 'config.yaml'}:3 memory.recall_k: Input should be a valid "  # noqa: E501
            "integer, unable to parse string as an integer"
        )
    ]


def test_debug_shows_the_traceback(tmp_path):
    done = _run_py("--debug", "say", "hi", "--data-dir", str(tmp_path), "--db", "foo://bar", cwd=tmp_path)
    assert done.returncode == 2
    assert "Traceback (most recent call last)" in done.stderr and "DatabaseOpenError" in done.stderr
    assert done.stderr.rstrip().endswith(
        "anima cannot start — cannot open the database: foo://bar: unsupported "
        "scheme 'foo' — anima stores its memory in PostgreSQL "
        "(postgresql://user@host:port/name) or SQLite (a file path)"
    )


# --- the web app's binding and the playbook ------------------------------------------------------------------------


def test_serve_beyond_loopback_without_a_token_is_refused_before_any_address_is_printed(tmp_path):
    done = _run_py("serve", "--host", "0.0.0.0", "--port", "9", "--data-dir", str(tmp_path / "data"), cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "http://" not in done.stdout + done.stderr  # no address of a server that does not start
    assert done.stderr.strip().splitlines() == [
        "anima cannot start — the web app: refusing to serve on 0.0.0.0: beyond this machine every request needs a "
        "token — set ANIMA_API_TOKEN (e.g. `export ANIMA_API_TOKEN=$(openssl rand -hex 16)`) or bind to 127.0.0.1"
    ]


def test_the_loop_beside_a_web_app_beyond_loopback_is_refused_first_too(persona, tmp_path):
    result = invoke(*run_args(persona, tmp_path / "data", "--host", "0.0.0.0"))
    stderr = refused(result, "refusing to serve on 0.0.0.0", "ANIMA_API_TOKEN")
    assert len(stderr.strip().splitlines()) == 1 and "http://" not in stderr + result.stdout
    assert "playbook repl" not in stderr  # refused before the run's header line, not after it


BAD_PLAYBOOK = "name: bad\nloop: true\nstart: a\nnodes:\n  - id: a\n    type: update_process_log\n    next: nowhere\n"


def test_an_invalid_playbook_is_one_message_naming_file_line_and_field_and_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD_PLAYBOOK)
    done = _run_py(
        "--playbook", str(bad), "--data-dir", str(tmp_path / "data"), *NO_MODEL, "--ticks", "0", cwd=tmp_path
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"anima cannot start — invalid playbook: {bad}:7 nodes[0].next: unknown node 'nowhere'"
    ]
    refused(
        invoke("--playbook", str(bad), "--data-dir", str(tmp_path / "data"), *NO_MODEL, "--ticks", "0"),
        f"{bad}:7 nodes[0].next",
    )
    missing = tmp_path / "missing.yaml"
    refused(
        invoke("--playbook", str(missing), "--data-dir", str(tmp_path / "data"), *NO_MODEL, "--ticks", "0"),
        f"invalid playbook: {missing}: no such playbook file",
    )


# --- --debug and --name are settings: ANIMA_DEBUG and ANIMA_PERSONA_NAME read by them, the flag wins -----------------


def test_anima_debug_shows_the_traceback_even_when_the_rest_of_the_settings_is_what_failed(tmp_path):
    missing = str(tmp_path / "no-such-persona")
    quiet = invoke("say", "hi", "--data-dir", str(tmp_path), env={"ANIMA_PERSONA_DIR": missing})
    refused(quiet, "no such directory")
    loud = invoke("say", "hi", "--data-dir", str(tmp_path), env={"ANIMA_PERSONA_DIR": missing, "ANIMA_DEBUG": "1"})
    assert loud.exit_code == 2
    assert "Traceback (most recent call last)" in loud.stderr and "SettingsError" in loud.stderr
    assert loud.stderr.rstrip().endswith("no such directory")
    # the flag wins over the variable; a variable that is no boolean shows no traceback and hides nothing
    flagged = invoke("--debug", "say", "hi", "--data-dir", str(tmp_path), env={"ANIMA_PERSONA_DIR": missing})
    assert "Traceback (most recent call last)" in flagged.stderr
    refused(invoke("say", "hi", "--data-dir", str(tmp_path), env={"ANIMA_PERSONA_DIR": missing, "ANIMA_DEBUG": "x"}))


def test_anima_persona_name_names_the_deployed_persona_and_name_wins(tmp_path):
    data = str(tmp_path / "data")
    by_env = invoke("users", "list", "--data-dir", data, env={"ANIMA_PERSONA_NAME": "ada"})
    refused(by_env, "--name ada: give the deployment's database (--db postgresql://…)")
    by_flag = invoke("users", "list", "--data-dir", data, "--name", "bob", env={"ANIMA_PERSONA_NAME": "ada"})
    refused(by_flag, "--name bob: give the deployment's database")
    assert invoke("users", "list", "--data-dir", data, "--json").exit_code == 0  # neither: the data dir's persona
