"""YAML a parser accepts but settings cannot take — keys that are not strings, a top level that is not a mapping, alias
loops and bombs, tags the safe loader refuses, values their tag cannot take — is the same clean refusal as any bad
config, naming file, line and field: YamlError/SettingsError from the reader and the settings loader, a 422 from the
API and the persona page (the file on disk unchanged), one line and exit 2 from `run.py` — never a 500 or a
traceback. The same reader serves ethics.yaml, skills' frontmatter, playbooks and the persona loader; JSON uploads
(character cards, session exports) get the same guarantee.

A new shape is one line in SHAPES (or JSON_SHAPES): every door below runs it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cli import app
from graph.playbook.loader import parse_playbook
from graph.playbook.model import PlaybookError
from persona import PersonaError, load_persona
from persona.settings import SettingsError, load_settings
from persona.yaml_lines import YamlError, parse_json, parse_lined_yaml, parse_yaml
from tests.unit.test_startup_errors import refused, run_args
from tests.unit.test_web_persona import own  # noqa: F401 - the fixture: the web app over a persona of its own

# the "billion laughs": nine levels of ten aliases each, a billion values once expanded, a few hundred bytes
BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 10)}]\n" for a, b in zip("abcdefgh", "bcdefghi")
)

# (what it is, config.yaml's text, where the refusal points — file:line field —, a words of why); `reader`: refused
# by the YAML reader itself, so every YAML door refuses it too
SHAPES = [
    ("a null key (`?`)", "?", "config.yaml:1 (top level)", "a key must be a string, not null", True),
    ("a null key with a value", "? \n: 1\n", "config.yaml:1 (top level)", "a key must be a string", True),
    ("a key with no value (`? a`)", "? a", "config.yaml:1 a", "Extra inputs are not permitted", False),
    ("an integer key", "1: 2", "config.yaml:1 (top level)", "a key must be a string, not int '1'", True),
    ("a boolean key", "true: 1", "config.yaml:1 (top level)", "not bool 'true'", True),
    ("`null` as a key", "null: 1", "config.yaml:1 (top level)", "not null 'null'", True),
    (
        "an integer key inside a section",
        "name: x\nmemory:\n  1: 2\n",
        "config.yaml:3 memory",
        "a key must be a string",
        True,
    ),
    ("a list as a key", "? [1]\n: 2\n", "config.yaml:1 (top level)", "not a list", True),
    ("a binary key", "!!binary aGk=: 1", "config.yaml:1 (top level)", "not binary", True),
    ("a list at the top level", "[1]", "config.yaml:1 (top level)", "expected a mapping, got list", True),
    ("a number at the top level", "42", "config.yaml:1 (top level)", "expected a mapping, got int", True),
    (
        "binary at the top level",
        "!!binary aGVsbG8=",
        "config.yaml:1 (top level)",
        "expected a mapping, got bytes",
        True,
    ),
    ("a set at the top level", "!!set {a}", "config.yaml:1 (top level)", "expected a mapping, got set", True),
    (
        "binary where text is wanted",
        "name: x\nuser_name: !!binary //79\n",
        "config.yaml:2 user_name",
        "valid string",
        False,
    ),
    ("an alias inside its own anchor (a list)", "a: &x [*x]", "config.yaml:1 a[0]", "(a loop)", True),
    ("an alias inside its own anchor (a mapping)", "memory: &m\n  x: *m\n", "config.yaml:2 memory.x", "(a loop)", True),
    ("a merge of itself", "<<: &a {<<: *a}", "config.yaml:1 (top level)", "(a loop)", True),
    ("the billion laughs", BOMB, "config.yaml:", "an alias bomb", True),
    ("five thousand levels of nesting", "a: " + "[" * 5000, "config.yaml:1 (yaml)", "nested deeper", True),
    ("a hundred and one levels of nesting", "a: " + "[" * 101 + "]" * 101, "config.yaml:1", "nested deeper", True),
    (
        "a Python object tag",
        "!!python/object/apply:os.system [echo]",
        "config.yaml:1 (yaml)",
        "could not determine a constructor",
        True,
    ),
    ("a local tag", "name: !secret x", "config.yaml:1 (yaml)", "could not determine a constructor", True),
    ("a bare `=` (the value tag)", "=", "config.yaml:1 (yaml)", "could not determine a constructor", True),
    (
        "an integer tag on a word",
        "memory:\n  recall_k: !!int many\n",
        "config.yaml:2 (yaml)",
        "'many' cannot be read as !!int",
        True,
    ),
    (
        "a boolean tag on a word",
        "reflexes:\n  enabled: !!bool maybe\n",
        "config.yaml:2 (yaml)",
        "cannot be read as !!bool",
        True,
    ),
    (
        "a float tag on a word",
        "name: x\nwindow: !!float wide\n",
        "config.yaml:2 (yaml)",
        "cannot be read as !!float",
        True,
    ),
    (
        "a timestamp that is no date",
        "name: !!timestamp 2001-13-45",
        "config.yaml:1 (yaml)",
        "cannot be read as !!timestamp",
        True,
    ),
    (
        "an integer of 5,000 digits",
        "memory:\n  recall_k: " + "1" * 5000 + "\n",
        "config.yaml:2 (yaml)",
        "(5,000 characters) cannot be read as !!int",
        True,
    ),
    ("an ordered map of scalars", "name: x\nllms: !!omap [1]\n", "config.yaml:2 (yaml)", "a mapping of length 1", True),
    ("a string tag on a list", "name: !!str [1]", "config.yaml:1 (yaml)", "expected a scalar node", True),
    ("a lone surrogate escape", 'name: "\\ud800"', "config.yaml:1 name", "lone surrogate", True),
    ("a lone surrogate escape as a key", '"\\udfff": 1', "config.yaml:1 (top level)", "lone surrogate", True),
    ("two documents", "name: a\n---\nname: b\n", "config.yaml:2 (yaml)", "another document", True),
    ("a merge of a scalar", "<<: 5", "config.yaml:1 (yaml)", "for merging", True),
    (
        "a merged value out of range",
        "name: x\nmemory:\n  <<: {recall_k: -1}\n",
        "config.yaml:3 memory.recall_k",
        "greater than or equal to 0",
        False,
    ),
    ("a tab indentation", "name: x\nmemory:\n\trecall_k: 5\n", "config.yaml:3 (yaml)", "'\\t' that cannot start", True),
]
READER_SHAPES = [shape for shape in SHAPES if shape[4]]


def _ids(shapes) -> list[str]:
    return [shape[0] for shape in shapes]


# --- the reader and the settings loader ----------------------------------------------------------------------------


@pytest.mark.parametrize(("what", "text", "where", "why", "reader"), SHAPES, ids=_ids(SHAPES))
def test_the_settings_loader_refuses_the_shape_naming_file_line_and_field(what, text, where, why, reader, persona):
    with pytest.raises((YamlError, SettingsError)) as refused_by:
        load_settings(persona, config=parse_lined_yaml(text, str(persona / "config.yaml"), empty_ok=True))
    assert where in str(refused_by.value) and why in str(refused_by.value), str(refused_by.value)
    assert isinstance(refused_by.value, YamlError) == reader, "the reader refuses it, or the settings do"
    (persona / "config.yaml").write_text(text, encoding="utf-8")  # from disk, as every run reads it
    with pytest.raises(SettingsError, match="config.yaml:"):
        load_settings(persona)


@pytest.mark.parametrize(("what", "text", "where", "why", "reader"), READER_SHAPES, ids=_ids(READER_SHAPES))
def test_every_yaml_door_refuses_what_the_reader_refuses(what, text, where, why, reader, persona):
    """parse_yaml (skills' frontmatter, secrets files), playbooks, and the persona loader's config.yaml."""
    line = where.partition(":")[2].partition(" ")[0]
    if what not in (
        "a list at the top level",
        "a number at the top level",
        "binary at the top level",
        "a set at the top level",
    ):  # any top level is YAML to parse_yaml; the others want a mapping
        with pytest.raises(YamlError, match=f"^t.yaml:{line}"):
            parse_yaml(text, "t.yaml")
        with pytest.raises(YamlError, match=f"^t.yaml:{int(line or 1) + 1 if line else ''}"):
            parse_yaml(text, "t.yaml", first_line=2)  # a frontmatter starts on line 2 of its file
    with pytest.raises(PlaybookError) as playbook:
        parse_playbook(text, "t.yaml")
    assert f"t.yaml:{line}" in str(playbook.value) and why in str(playbook.value)
    (persona / "config.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(PersonaError, match=f"config.yaml:{line}"):
        load_persona(persona)
    (persona / "config.yaml").write_text("name: x\n", encoding="utf-8")
    (persona / "ethics.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(PersonaError, match=f"ethics.yaml:{line}"):
        load_persona(persona)


def test_a_mapping_merged_from_an_anchor_keeps_its_fields_and_their_lines():
    """Anchors, aliases and merge keys that expand to a sane size are YAML like any other."""
    doc = parse_lined_yaml("base: &b\n  recall_k: 3\nmemory:\n  <<: *b\n  abstract_every: 9\n", "config.yaml")
    assert doc.data["memory"] == {"recall_k": 3, "abstract_every": 9}
    assert doc.where(("memory", "recall_k")) == "config.yaml:2 memory.recall_k"
    assert doc.where(("memory", "abstract_every")) == "config.yaml:5 memory.abstract_every"
    assert parse_yaml("a: &a [1, 2]\nb: [*a, *a]\n") == {"a": [1, 2], "b": [[1, 2], [1, 2]]}


# --- the API and the page --------------------------------------------------------------------------------------------


def test_the_api_and_the_page_refuse_every_shape_with_a_422_and_keep_the_file(own, subtests):  # noqa: F811
    path = own.persona_dir / "config.yaml"
    before = path.read_bytes()
    page_headers = {**own.csrf, "HX-Request": "true"}
    for what, text, where, why, _ in SHAPES:
        with subtests.test(msg=what):
            answer = own.client.put("/api/persona/config", json={"text": text})
            assert answer.status_code == 422, (answer.status_code, answer.text[:300])
            assert answer.json()["field"] == "text"
            assert where in answer.json()["error"] and why in answer.json()["error"], answer.json()
            page = own.client.put("/persona/config", data={"text": text}, headers=page_headers)
            assert page.status_code == 422 and 'role="alert"' in page.text, (page.status_code, page.text[:300])
            assert where in page.text, page.text[:300]
            assert path.read_bytes() == before


def test_ethics_and_skills_through_the_api_refuse_what_the_reader_refuses(own, subtests):  # noqa: F811
    ethics = own.persona_dir / "ethics.yaml"
    before = ethics.read_bytes()
    for what, text, where, _why, _ in READER_SHAPES:
        with subtests.test(msg=what):
            line = where.partition(":")[2].partition(" ")[0]
            answer = own.client.put("/api/persona/files/ethics.yaml", json={"text": text})
            assert answer.status_code == 422 and answer.json()["field"] == "text", answer.text[:300]
            assert f"ethics.yaml:{line}" in answer.json()["error"], answer.json()
            assert ethics.read_bytes() == before
            skill = own.client.put("/api/persona/skills/shaped", json={"text": f"---\n{text}\n---\nDo it.\n"})
            assert skill.status_code == 422 and skill.json()["field"] == "text", skill.text[:300]
            assert "SKILL.md:" in skill.json()["error"], skill.json()
    assert not (own.persona_dir / "skills" / "shaped").exists()


# --- run.py ----------------------------------------------------------------------------------------------------------


def test_run_py_refuses_every_shape_in_one_line_with_exit_2(persona, tmp_path, subtests, no_anima_environment):
    for what, text, where, why, _ in SHAPES:
        with subtests.test(msg=what):
            (persona / "config.yaml").write_text(text, encoding="utf-8")
            named = where.replace("config.yaml", str(persona / "config.yaml"), 1)
            refused(CliRunner().invoke(app, run_args(persona, tmp_path / "data")), named, why)
            refused(
                CliRunner().invoke(
                    app, ["config", "show", "--persona", str(persona), "--data-dir", str(tmp_path / "data")]
                ),
                named,
            )


# --- JSON uploads ----------------------------------------------------------------------------------------------------

# (what it is, the file's bytes, a word of why); each a JSON object as far as its first byte says
JSON_SHAPES = [
    ("nesting past the recursion limit", b'{"name": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    ("an integer of 5,000 digits", b'{"name": "x", "description": ' + b"1" * 5000 + b"}", "4300 digits"),
    ("a lone surrogate escape", b'{"name": "x", "description": "\\ud800"}', "lone surrogate"),
    ("a lone surrogate escape as a key", b'{"name": "x", "\\udc00": 1}', "lone surrogate"),
    ("not JSON at all", b"{name: x", "Expecting property name"),
]


@pytest.mark.parametrize(("what", "raw", "why"), JSON_SHAPES, ids=[s[0] for s in JSON_SHAPES])
def test_parse_json_refuses_the_shape_as_a_decode_error(what, raw, why):
    with pytest.raises(json.JSONDecodeError, match=why.replace("(", r"\(")):
        parse_json(raw.decode())


def test_a_card_or_a_session_export_in_any_shape_is_a_422(own, subtests):  # noqa: F811
    for what, raw, why in JSON_SHAPES:
        with subtests.test(msg=what):
            card = own.client.post("/api/persona/cards", files={"file": ("card.json", raw, "application/json")})
            assert card.status_code == 422 and card.json()["field"] == "file", card.text[:300]
            assert why in card.json()["error"], card.json()
            export = own.client.post("/api/sessions/revive", files={"file": ("s.json", raw, "application/json")})
            assert export.status_code == 422 and export.json()["field"] == "file", export.text[:300]
            assert why in export.json()["error"], export.json()
    assert not own.personas.exists() or not any(own.personas.iterdir())
