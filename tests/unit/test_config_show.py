"""One configuration path (issue 28): every effective setting knows where it came from — `config.yaml:N`, an
`ANIMA_*` variable, a flag, the data dir's own overrides or the default — `run.py config show` prints them (secrets
masked), the `config` table is read and written only through its typed repository, and no module but
persona/settings.py reads an ANIMA_* variable."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import app
from memory import Database
from memory.repositories import config as config_repository
from persona import default_persona_dir
from persona.settings import DEFAULT, Overrides, load_settings, mask

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("cli", "web", "graph", "nodes", "managers", "persona", "memory", "llm", "reach")


@pytest.fixture(autouse=True)
def _no_anima_environment(no_anima_environment):
    """Settings resolved here see none of the machine's ANIMA_* variables."""


def add_config(persona: Path, text: str) -> int:
    """Append to config.yaml; the line number of the first appended line."""
    config = persona / "config.yaml"
    before = config.read_text()
    config.write_text(before + text)
    return len(before.splitlines()) + 1


# --- where each value came from ------------------------------------------------------------------------------


def test_every_value_names_its_source_and_the_later_layer_wins(persona, monkeypatch):
    line = add_config(persona, "user_name: Ada\nmemory:\n  recall_k: 7\n  episode_days: 4\n")
    config = str(persona / "config.yaml")
    settings = load_settings(persona)
    assert settings.source("user_name") == f"{config}:{line}"
    assert settings.source("memory.recall_k") == f"{config}:{line + 2}"  # the line of the key itself, not its section
    assert settings.source("memory.retrieval.mmr_lambda") == DEFAULT
    assert settings.source("persona_dir") == "flag --persona"

    changed = load_settings(persona, self_changes={"memory.recall_k": 8})
    assert changed.memory.recall_k == 8 and changed.source("memory.recall_k").startswith("data dir override")
    assert changed.source("memory.episode_days") == f"{config}:{line + 3}"

    monkeypatch.setenv("ANIMA_MEMORY__RECALL_K", "9")
    monkeypatch.setenv("ANIMA_DATA_DIR", "/srv/anima")
    by_env = load_settings(persona, self_changes={"memory.recall_k": 8})
    assert by_env.memory.recall_k == 9 and by_env.source("memory.recall_k") == "environment ANIMA_MEMORY__RECALL_K"
    assert by_env.source("data_dir") == "environment ANIMA_DATA_DIR"

    flagged = load_settings(
        overrides=Overrides.of(persona_dir=str(persona), data_dir="here", db_url="sqlite://"), memory={"recall_k": 11}
    )
    assert flagged.data_dir == "here" and flagged.source("data_dir") == "flag --data-dir"
    assert flagged.source("db_url") == "flag --db"
    assert flagged.memory.recall_k == 11 and flagged.source("memory.recall_k").startswith("flag memory.recall_k")


def test_a_section_given_whole_in_the_environment_counts_for_what_it_holds(persona, monkeypatch):
    monkeypatch.setenv("ANIMA_DRIVES", json.dumps({"inject_at": 0.3}))
    settings = load_settings(persona)
    assert settings.drives.inject_at == 0.3 and settings.source("drives.inject_at") == "environment ANIMA_DRIVES"
    assert settings.source("drives.reach_out_at") != "environment ANIMA_DRIVES"


def test_the_persona_directory_is_resolved_in_one_place(persona, tmp_path, monkeypatch):
    other = tmp_path / "other"
    shutil.copytree(default_persona_dir(), other)
    assert load_settings().source("persona_dir") == DEFAULT and not load_settings().persona_named
    recorded = load_settings(recorded_persona_dir=str(other))
    assert recorded.persona_dir == str(other) and recorded.source("persona_dir").startswith("data dir override")
    assert not recorded.persona_named
    monkeypatch.setenv("ANIMA_PERSONA_DIR", str(persona))
    by_env = load_settings(recorded_persona_dir=str(other))  # the run names one: the recorded one is not used
    assert by_env.persona_dir == str(persona) and by_env.persona_named
    assert by_env.source("persona_dir") == "environment ANIMA_PERSONA_DIR"
    flagged = load_settings(overrides=Overrides.of(persona_dir=str(other)))
    assert flagged.persona_dir == str(other) and flagged.source("persona_dir") == "flag --persona"


def test_a_reload_resolves_again_with_the_same_overrides(persona):
    settings = load_settings(overrides=Overrides.of(persona_dir=str(persona), window_ratio=0.5))
    assert settings.overrides.window_ratio == 0.5
    again = load_settings(overrides=settings.overrides, self_changes={"memory.recall_k": 3})
    assert again.window_ratio == 0.5 and again.memory.recall_k == 3
    assert settings.overrides.replace(window_ratio=None).window_ratio is None  # frozen: replace makes a copy


def test_the_deployed_persona_and_debug_are_settings_read_from_the_environment_and_the_flag_wins(persona, monkeypatch):
    from persona.settings import SettingsError, run_value

    plain = load_settings(persona)
    assert plain.persona_name is None and plain.debug is False and plain.source("debug") == DEFAULT
    monkeypatch.setenv("ANIMA_PERSONA_NAME", "ada")
    monkeypatch.setenv("ANIMA_DEBUG", "true")
    by_env = load_settings(persona)
    assert by_env.persona_name == "ada" and by_env.source("persona_name") == "environment ANIMA_PERSONA_NAME"
    assert by_env.debug is True and by_env.source("debug") == "environment ANIMA_DEBUG"
    flagged = load_settings(persona, overrides=Overrides.of(persona_name="bob", debug=True))
    assert flagged.persona_name == "bob" and flagged.source("persona_name") == "flag --name"
    assert flagged.source("debug") == "flag --debug"
    # read alone (the command line's --name and --debug need no persona): the same answers
    assert (run_value("persona_name"), run_value("persona_name", "bob"), run_value("debug")) == ("ada", "bob", True)
    monkeypatch.setenv("ANIMA_DEBUG", "maybe")
    with pytest.raises(SettingsError, match="environment ANIMA_DEBUG: Input should be a valid boolean"):
        run_value("debug")
    (persona / "config.yaml").write_text("debug: true\n")  # the operator's, never a persona's
    with pytest.raises(SettingsError, match="debug is the operator's"):
        load_settings(persona)


def test_secrets_are_masked():
    assert mask(("api_token",), "abc") == "***" and mask(("mcp", "servers", "gh", "env", "GITHUB_TOKEN"), "x") == "***"
    assert mask(("mcp", "servers", "x", "headers", "Authorization"), "Bearer s") == "***"
    assert mask(("api_key_env",), "OPENAI_API_KEY") == "OPENAI_API_KEY"  # names a variable, holds no secret
    assert mask(("sampling", "max_tokens"), 200) == 200
    assert mask(("db_url",), "postgresql://anima:s3cret@db:5432/anima") == "postgresql://anima:***@db:5432/anima"
    assert mask(("api_token",), None) is None


# --- run.py config show ------------------------------------------------------------------------------------


def show(*args: str, env: dict[str, str] | None = None):
    result = CliRunner().invoke(app, ["config", "show", *args], env=env)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return result


def test_config_show_prints_every_value_and_where_it_came_from(persona, tmp_path):
    line = add_config(persona, "user_name: Ada\n")
    data = str(tmp_path / "data")
    with Database.open(data, None).unit() as repos:  # the persona's own change, stored in the data dir
        repos.config.set_self_change("memory.recall_k", 6)
    text = show("--data-dir", data, "--persona", str(persona), env={"ANIMA_CYCLE__RESPONSES": "12"}).stdout
    rows = {r.split()[0]: r for r in text.splitlines() if r.strip()}
    assert '"Ada"' in rows["user_name"] and f"config.yaml:{line})" in rows["user_name"]
    assert "(flag --data-dir)" in rows["data_dir"] and "(flag --persona)" in rows["persona_dir"]
    assert "12" in rows["cycle.responses"] and "(environment ANIMA_CYCLE__RESPONSES)" in rows["cycle.responses"]
    assert "6" in rows["memory.recall_k"] and "data dir override" in rows["memory.recall_k"]
    assert "(default)" in rows["memory.retrieval.mmr_lambda"]

    # the same data dir remembers its persona: no --persona, and the source says so
    listed = json.loads(show("--data-dir", data, "--json").stdout)
    by_name = {row["name"]: row for row in listed}
    assert by_name["persona_dir"]["value"] == str(persona.resolve())
    assert by_name["persona_dir"]["source"].startswith("data dir override")
    assert by_name["user_name"] == {"name": "user_name", "value": "Ada", "source": f"{persona / 'config.yaml'}:{line}"}
    assert by_name["data_dir"]["source"] == "flag --data-dir" and by_name["model"]["source"] == "default"


def test_config_show_reports_the_deployed_persona_and_debug_with_their_source(persona, tmp_path):
    data = str(tmp_path / "data")
    env = {"ANIMA_PERSONA_NAME": "ada", "ANIMA_DEBUG": "1"}
    listed = {
        row["name"]: row
        for row in json.loads(show("--data-dir", data, "--persona", str(persona), "--json", env=env).stdout)
    }
    assert listed["persona_name"] == {
        "name": "persona_name",
        "value": "ada",
        "source": "environment ANIMA_PERSONA_NAME",
    }
    assert listed["debug"] == {"name": "debug", "value": True, "source": "environment ANIMA_DEBUG"}
    result = CliRunner().invoke(
        app, ["--debug", "config", "show", "--data-dir", data, "--json"], env={"ANIMA_DEBUG": "0"}
    )
    assert result.exit_code == 0, (result.stdout, result.stderr)
    flagged = {row["name"]: row for row in json.loads(result.stdout)}
    assert flagged["debug"] == {"name": "debug", "value": True, "source": "flag --debug"}
    assert flagged["persona_name"]["source"] == DEFAULT


def test_config_show_names_what_a_threads_own_cycle_settings_override(persona, tmp_path):
    data = str(tmp_path / "data")
    with Database.open(data, None).unit() as repos:  # what the persona's cycle.pause and cycle.responses stored
        repos.config.set_cycle("main", {"pause_s": 42.0, "responses": 3})
    listed = {
        row["name"]: row for row in json.loads(show("--data-dir", data, "--persona", str(persona), "--json").stdout)
    }
    assert listed["cycle.pause_s"]["value"] == 42.0 and listed["cycle.responses"]["value"] == 3
    assert listed["cycle.pause_s"]["source"].startswith("thread main's cycle")
    assert not listed["cycle.notes_mode"]["source"].startswith("thread")  # not set for the thread: as configured
    other = {row["name"]: row for row in json.loads(show("--data-dir", data, "--thread", "t2", "--json").stdout)}
    assert not other["cycle.pause_s"]["source"].startswith("thread")  # another thread keeps the configured value


def test_config_show_masks_secrets(persona, tmp_path):
    add_config(
        persona, "mcp:\n  servers:\n    gh:\n      command: gh-mcp\n      env:\n        GITHUB_TOKEN: ghp_secret\n"
    )
    env = {"ANIMA_API_TOKEN": "tok-very-secret", "ANIMA_LLM_URL": "http://me:pw-secret@127.0.0.1:9/v1"}
    result = show("--data-dir", str(tmp_path / "data"), "--persona", str(persona), "--json", env=env)
    assert not any(secret in result.stdout for secret in ("tok-very-secret", "pw-secret", "ghp_secret"))
    by_name = {row["name"]: row for row in json.loads(result.stdout)}
    assert by_name["api_token"] == {"name": "api_token", "value": "***", "source": "environment ANIMA_API_TOKEN"}
    assert by_name["llm_url"]["value"] == "http://me:***@127.0.0.1:9/v1"
    assert by_name["mcp.servers.gh.env.GITHUB_TOKEN"]["value"] == "***"


# --- the config table behind one typed repository ------------------------------------------------------------


def test_the_typed_accessors_read_what_they_wrote(tmp_path):
    database = Database.open(str(tmp_path), None)
    try:
        with database.unit() as repos:
            config = repos.config
            config.persona_dir, config.selected_llm, config.fetch_now = "/p", "big", True
            config.set_llm_override("big", {"priority": 3})
            config.set_self_change("memory.recall_k", 4)
            config.set_cycle("main", {"pause_s": 2})
            config.reach_outs = [{"drive": "boredom"}]
            config.set_session_export(7, {"json": {}})
        with database.unit() as repos:
            config = repos.config
            assert (config.persona_dir, config.selected_llm, config.fetch_now) == ("/p", "big", True)
            assert config.llm_overrides() == {"big": {"priority": 3}}
            assert config.self_changes() == {"memory.recall_k": 4}
            assert config.cycle("main") == {"pause_s": 2} and config.cycle("other") == {}
            assert config.reach_outs == [{"drive": "boredom"}] and config.session_export(7) == {"json": {}}
            assert config.emotion_vocabulary is None and config.memory_manager_cursor == 0
            config.fetch_now = False
        with database.unit() as repos:
            assert repos.config.fetch_now is False
    finally:
        database.close()


# --- the rules, checked on the source ------------------------------------------------------------------------


def product_files() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py")) + [ROOT / "run.py"]


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _string_constants() -> dict[str, str]:
    """Module-level NAME = "text" across the product (a variable's name may be held in a constant)."""
    out = {}
    for path in product_files():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        out[target.id] = node.value.value
    return out


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def _environment_reads(tree: ast.AST, constants: dict[str, str]) -> list[tuple[int, str]]:
    """(line, variable) of every read of a named variable: os.environ.get(X) / [X] / X in os.environ, os.getenv(X)."""

    def name_of(node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return constants.get(node.id, f"<{node.id}>")
        return None

    found = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            if node.func.attr in ("get", "pop", "setdefault") and _is_environ(node.func.value):
                key = node.args[0]
            elif node.func.attr == "getenv":
                key = node.args[0]
        elif isinstance(node, ast.Subscript) and _is_environ(node.value):
            key = node.slice
        elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators):
            key = node.left
        name = name_of(key) if key is not None else None
        if name is not None:
            found.append((node.lineno, name))
    return found


# ANIMA_* variables read outside persona/settings.py, and why
ENVIRONMENT_ALLOWED: dict[str, str] = {}


def test_no_anima_variable_is_read_outside_the_settings():
    constants = _string_constants()
    offenders = []
    for path in product_files():
        relative = str(path.relative_to(ROOT))
        if relative == "persona/settings.py":
            continue
        for line, name in _environment_reads(ast.parse(path.read_text(encoding="utf-8")), constants):
            if name.upper().startswith("ANIMA_") and not (
                relative in ENVIRONMENT_ALLOWED and name.startswith("ANIMA_TEST_")
            ):
                offenders.append(f"{relative}:{line} {name}")
    assert offenders == [], "ANIMA_* is read by persona/settings.py only:\n" + "\n".join(offenders)


def test_no_cli_option_binds_a_setting_to_its_variable():
    """A setting's variable is read by the settings (one resolution, reported by `config show`), not by typer."""
    from persona.settings import Settings

    variables = {f"ANIMA_{name.upper()}" for name in Settings.model_fields}
    offenders = []
    for path in sorted((ROOT / "cli").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.keyword) and node.arg == "envvar" and isinstance(node.value, ast.Constant):
                if node.value.value in variables:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value.value}")
    assert offenders == []


def _is_config_table(node: ast.AST) -> bool:
    """`repos.config`, `self.repos.config`, `ctx.repos.config`, `house.repos.config` …"""
    if not (isinstance(node, ast.Attribute) and node.attr == "config"):
        return False
    owner = node.value
    return (isinstance(owner, ast.Name) and owner.id == "repos") or (
        isinstance(owner, ast.Attribute) and owner.attr == "repos"
    )


# files that spell a key's text for something else, and why
KEY_TEXT_ALLOWED = {"persona/archive.py": "'persona/' is the archive's folder of persona files, not a config key"}


def test_the_config_table_is_read_only_through_its_typed_repository():
    keys = {key for key in config_repository.KEYS if "/" in key}  # "emotions" is also a settings field's name
    home = ROOT / "memory" / "repositories" / "config.py"
    offenders = []
    for path in product_files():
        if path == home or str(path.relative_to(ROOT)) in KEY_TEXT_ALLOWED:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = _docstrings(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and _is_config_table(node.func.value)
                and node.func.attr in ("get", "set", "many", "with_prefix", "preload")
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} repos.config.{node.func.attr}(…)")
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value in keys
                and id(node) not in docstrings
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} the key {node.value!r}")
    assert offenders == [], "the config table's keys live in memory/repositories/config.py:\n" + "\n".join(offenders)
