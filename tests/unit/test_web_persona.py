"""The persona page and API: the human edits the persona's files (recorded, no consent gate), config.yaml only when
the settings loader accepts it (file:line otherwise, the file on disk unchanged), named seeds, skills; the whole
persona exported and imported elsewhere (zip-slip refused); a character card (PNG) imported as a new persona."""

from __future__ import annotations

import base64
import io
import json
import struct
import tarfile
import zipfile
import zlib
from pathlib import Path

import pytest

from memory import Database
from persona import default_persona_dir, load_persona
from persona.cards import read_card
from persona.scaffold import scaffold_persona


@pytest.fixture
def own(web, tmp_path, monkeypatch):
    """The web app over a persona of its own (the shipped default is read-only); new personas go to tmp/personas."""
    directory = tmp_path / "own" / "lumen"
    directory.parent.mkdir()
    scaffold_persona("Lumen", directory)
    web.services.overrides = web.services.overrides.replace(persona_dir=str(directory))
    monkeypatch.setenv("ANIMA_PERSONAS_ROOT", str(tmp_path / "personas"))
    web.persona_dir, web.personas = directory, tmp_path / "personas"
    return web


def test_the_first_edit_of_the_shipped_persona_copies_it_into_the_data_dir_and_the_loop_moves_to_the_copy(web):
    before = (default_persona_dir() / "IDENTITY.md").read_bytes()
    assert web.client.get("/api/persona").json()["editable"] is False
    assert 'data-testid="shipped-default"' in web.client.get("/persona").text
    editor = web.client.get("/persona/files/IDENTITY.md").text  # the page's editor takes the first edit too
    assert "<textarea" in editor and "readonly" not in editor and "disabled" not in editor
    saved = web.client.put("/api/persona/files/IDENTITY.md", json={"text": "# Identity\n\nI am Lumen of the dunes.\n"})
    assert saved.status_code == 200
    own = web.data_dir / "persona"
    assert (own / "IDENTITY.md").read_text() == "# Identity\n\nI am Lumen of the dunes.\n"
    assert (own / "SOUL.md").read_bytes() == (default_persona_dir() / "SOUL.md").read_bytes()  # the rest copied
    assert (default_persona_dir() / "IDENTITY.md").read_bytes() == before  # the repository's files never change
    overview = web.client.get("/api/persona").json()
    assert overview["editable"] is True and Path(overview["directory"]) == own.resolve()
    state = web.agent.tick()  # the running loop takes the data dir's copy at its next tick
    assert web.agent.services.persona.directory == own.resolve() and "I am Lumen of the dunes." in state["prompt"]


def test_a_bootstrap_file_is_edited_within_its_cap_and_the_edit_is_recorded(own):
    files = {f["name"]: f for f in own.client.get("/api/persona").json()["files"]}
    assert "IDENTITY.md" in files and files["IDENTITY.md"]["cap"] == 20_000
    saved = own.client.put("/api/persona/files/IDENTITY.md", json={"text": "# Identity\n\nI am Lumen, by the sea.\n"})
    assert saved.status_code == 200 and saved.json()["text"].endswith("by the sea.\n")
    assert (own.persona_dir / "IDENTITY.md").read_text() == "# Identity\n\nI am Lumen, by the sea.\n"
    assert own.services.persona().file("IDENTITY.md").endswith("by the sea.\n")
    too_long = own.client.put("/api/persona/files/SOUL.md", json={"text": "x" * 20_001})
    assert too_long.status_code == 422 and too_long.json()["field"] == "text"
    assert own.client.get("/api/persona/files/passwd").status_code == 404
    bad_ethics = own.client.put("/api/persona/files/ethics.yaml", json={"text": "principles: 3\n"})
    assert bad_ethics.status_code == 422 and "ethics.yaml:1" in bad_ethics.json()["error"]
    edits = own.client.get("/api/persona").json()["edits"]
    assert [e["what"] for e in edits] == ["IDENTITY.md"] and edits[0]["by"] == "owner (web, loopback)"
    with own.agent.services.db.unit() as repos:
        assert repos.processes.latest_named("persona.edited").value == "my human edited IDENTITY.md"


def test_a_broken_config_is_refused_with_its_line_and_the_file_stays_as_it_was(own):
    path = own.persona_dir / "config.yaml"
    before = path.read_bytes()
    config = own.client.get("/api/persona/config").json()
    assert config["name"] == "Lumen" and config["text"] == before.decode()
    for text, where in (
        ("name: Lumen\nmemory:\n  recall_k: [unclosed\n", "config.yaml:4 (yaml)"),
        ("name: Lumen\nmemory:\n  recall_k: -1\n", "config.yaml:3 memory.recall_k"),
        ("name: Lumen\ncolour: blue\n", "config.yaml:2 colour"),
        ("name: Lumen\ndata_dir: /etc\n", "config.yaml:2 data_dir"),
        ("name: Lumen\nconsent:\n  auto_approve: [identity.updat]\n", "config.yaml:3"),
        ("- a list\n", "config.yaml:1"),
        ("=", "config.yaml:1 (yaml)"),
    ):  # composes, but no constructor takes the `value` tag
        refused = own.client.put("/api/persona/config", json={"text": text})
        assert refused.status_code == 422, (text, refused.json())
        assert refused.json()["field"] == "text" and where in refused.json()["error"], refused.json()
        assert path.read_bytes() == before
    good = before.decode().replace("recall_k: 5", "recall_k: 7")
    saved = own.client.put("/api/persona/config", json={"text": good})
    assert saved.status_code == 200 and path.read_text() == good
    assert own.services.settings().memory.recall_k == 7
    page = own.client.put(
        "/persona/config", data={"text": "memory: {recall_k: -3}\n"}, headers={**own.csrf, "HX-Request": "true"}
    )
    assert page.status_code == 422 and "config.yaml:1 memory.recall_k" in page.text and path.read_text() == good


def test_named_seeds_are_saved_loaded_and_applied(own):
    current = (own.persona_dir / "seed.txt").read_text()
    assert own.client.put("/api/persona/seeds/morning", json={}).json()["text"] == current  # the current seed, named
    evening = own.client.put("/api/persona/seeds/evening", json={"text": "Lumen's evening notebook:\n"})
    assert evening.status_code == 200
    assert (own.persona_dir / "seeds" / "evening.txt").read_text() == "Lumen's evening notebook:\n"
    listing = own.client.get("/api/persona/seeds").json()
    assert [s["name"] for s in listing["items"]] == ["evening", "morning"] and listing["current"] == current
    assert own.client.get("/api/persona/seeds/evening").json()["text"] == "Lumen's evening notebook:\n"
    applied = own.client.post("/api/persona/seeds/evening/apply")
    assert applied.status_code == 200 and (own.persona_dir / "seed.txt").read_text() == "Lumen's evening notebook:\n"
    assert own.services.persona().seed == "Lumen's evening notebook:\n"
    assert own.client.post("/api/persona/seeds/morning/apply").status_code == 200
    assert (own.persona_dir / "seed.txt").read_text() == current
    for bad in ("bad name!", ".hidden", "a" * 65):
        refused = own.client.put(f"/api/persona/seeds/{bad}", json={"text": "x"})
        assert refused.status_code == 422 and refused.json()["field"] == "name", bad
    assert own.client.get("/api/persona/seeds/nothing").status_code == 404
    loaded = own.client.get("/persona/seeds/evening")
    assert loaded.status_code == 200 and "Lumen&#39;s evening notebook:" in loaded.text


def test_a_skill_is_listed_edited_and_added(own):
    skills = {s["name"]: s for s in own.client.get("/api/persona/skills").json()}
    journaling = skills["journaling"]
    assert journaling["own"] is True and journaling["text"].startswith("---")  # `persona new` copied the skills
    shipped = (default_persona_dir() / "skills" / journaling["directory"] / "SKILL.md").read_text()
    edited = journaling["text"] + "\nAlso note the weather.\n"
    saved = own.client.put("/api/persona/skills/journaling", json={"text": edited})
    assert saved.status_code == 200 and saved.json()["own"] is True
    assert (own.persona_dir / "skills" / journaling["directory"] / "SKILL.md").read_text() == edited
    assert (default_persona_dir() / "skills" / journaling["directory"] / "SKILL.md").read_text() == shipped
    added = own.client.put(
        "/api/persona/skills/knots",
        json={
            "text": "---\nname: knots\ndescription: Tie a knot for every promise.\ninvocation: manual\n---\nBowline first.\n"  # noqa: E501
        },
    )
    assert added.status_code == 200 and added.json()["directory"] == "knots"
    assert "knots" in [s.name for s in own.services.persona().skills]
    broken = own.client.put("/api/persona/skills/journaling", json={"text": "no frontmatter"})
    assert broken.status_code == 422 and "SKILL.md:1" in broken.json()["error"]
    renamed = own.client.put("/api/persona/skills/journaling", json={"text": "---\nname: other\ndescription: d\n---\n"})
    assert renamed.status_code == 422
    assert (own.persona_dir / "skills" / journaling["directory"] / "SKILL.md").read_text() == edited


def test_the_persona_is_exported_and_imported_elsewhere(own):
    with own.agent.services.db.unit() as repos:
        repos.diary.add("The night the lighthouse went dark.")
    own.client.put("/api/persona/files/SOUL.md", json={"text": "# Soul\n\nI keep the light.\n"})
    exported = own.client.get("/api/persona/export")
    assert exported.status_code == 200 and exported.headers["content-type"] == "application/gzip"
    assert (
        "attachment" in exported.headers["content-disposition"] and ".tar.gz" in exported.headers["content-disposition"]
    )
    with tarfile.open(fileobj=io.BytesIO(exported.content)) as tar:
        names = set(tar.getnames())
    assert {"manifest.json", "persona/IDENTITY.md", "persona/config.yaml", "data/anima.sqlite"} <= names

    imported = own.client.post(
        "/api/persona/import", files={"file": ("lumen.tar.gz", exported.content, "application/gzip")}
    )
    assert imported.status_code == 201, imported.json()
    created = imported.json()
    persona_dir, data_dir = Path(created["persona_dir"]), Path(created["data_dir"])
    assert persona_dir.is_relative_to(own.personas) and created["name"] == "Lumen"
    assert (persona_dir / "SOUL.md").read_text() == "# Soul\n\nI keep the light.\n"
    assert load_persona(persona_dir).files["IDENTITY.md"] == (own.persona_dir / "IDENTITY.md").read_text()
    database = Database.open(data_dir)
    try:
        with database.unit() as repos:
            assert [e.text for e in repos.diary.list()] == ["The night the lighthouse went dark."]
    finally:
        database.close()
    again = own.client.post(
        "/api/persona/import", files={"file": ("lumen.tar.gz", exported.content, "application/gzip")}
    )
    assert again.status_code == 201 and again.json()["persona_dir"] != created["persona_dir"]  # a new directory


def zipped(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_an_archive_that_escapes_its_directory_is_refused(own, tmp_path):
    for name in ("../escaped.txt", "persona/../../escaped.txt", "/tmp/escaped.txt"):
        archive = zipped({"persona/IDENTITY.md": b"# Identity\n", name: b"gotcha"})
        refused = own.client.post("/api/persona/import", files={"file": ("evil.zip", archive, "application/zip")})
        assert refused.status_code == 422 and refused.json()["field"] == "file", refused.json()
        assert "unsafe path" in refused.json()["error"]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        link = tarfile.TarInfo("persona/IDENTITY.md")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    linked = own.client.post("/api/persona/import", files={"file": ("x.tar.gz", buffer.getvalue(), "application/gzip")})
    assert linked.status_code == 422 and "link" in linked.json()["error"]
    assert not list(tmp_path.rglob("escaped.txt")) and not Path("/tmp/escaped.txt").exists()
    assert [p.name for p in own.personas.iterdir()] == [] if own.personas.exists() else True  # nothing left behind
    wrong = own.client.post("/api/persona/import", files={"file": ("notes.txt", b"hello", "text/plain")})
    assert wrong.status_code == 415 and wrong.json()["field"] == "file"
    fake = own.client.post("/api/persona/import", files={"file": ("x.zip", b"not a zip at all", "application/zip")})
    assert fake.status_code == 415 and fake.json()["field"] == "file"


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_card(card: dict, keyword: bytes = b"chara") -> bytes:
    payload = base64.b64encode(json.dumps(card).encode())
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
        + chunk(b"tEXt", keyword + b"\0" + payload)
        + chunk(b"IDAT", zlib.compress(b"\0\0\0\0"))
        + chunk(b"IEND", b"")
    )


CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Mira Vale",
        "description": "{{char}} keeps a lighthouse and writes to {{user}} at dusk.",
        "personality": "patient, wry, fond of knots",
        "scenario": "A storm is coming in.",
        "first_mes": "*{{char}} lights the lamp.* You came back.",
        "mes_example": "",
        "tags": ["sea"],
    },
}


def test_a_png_character_card_becomes_a_new_persona(own):
    assert read_card(png_card(CARD)).name == "Mira Vale"
    answer = own.client.post("/api/persona/cards", files={"file": ("mira.png", png_card(CARD), "image/png")})
    assert answer.status_code == 201, answer.json()
    created = answer.json()
    directory = Path(created["persona_dir"])
    assert created["name"] == "Mira Vale" and directory == own.personas / "mira-vale"
    persona = load_persona(directory)
    assert persona.display_name == "Mira Vale"
    assert "Mira Vale keeps a lighthouse and writes to User at dusk." in persona.files["IDENTITY.md"]
    assert "patient, wry, fond of knots" in persona.files["SOUL.md"]
    assert "A storm is coming in." in persona.seed and "*Mira Vale lights the lamp.* You came back." in persona.seed
    assert "Lumen" not in persona.files["IDENTITY.md"]
    v3 = {**CARD, "spec": "chara_card_v3", "data": {**CARD["data"], "name": "Mira Vale"}}
    second = own.client.post("/api/persona/cards", files={"file": ("mira.png", png_card(v3, b"ccv3"), "image/png")})
    assert second.status_code == 201 and second.json()["persona_dir"].endswith("mira-vale-2")
    as_json = own.client.post(
        "/api/persona/cards", files={"file": ("c.json", json.dumps(CARD).encode(), "application/json")}
    )
    assert as_json.status_code == 201


def test_a_card_upload_is_type_and_size_checked(own):
    gif = own.client.post("/api/persona/cards", files={"file": ("c.gif", b"GIF89a....", "image/gif")})
    assert gif.status_code == 415 and gif.json()["field"] == "file"
    disguised = own.client.post("/api/persona/cards", files={"file": ("c.png", b"GIF89a....", "image/png")})
    assert disguised.status_code == 415
    plain_png = (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)) + chunk(b"IEND", b"")
    )
    no_card = own.client.post("/api/persona/cards", files={"file": ("c.png", plain_png, "image/png")})
    assert no_card.status_code == 422 and "no character card" in no_card.json()["error"]
    huge = own.client.post(
        "/api/persona/cards", files={"file": ("c.png", b"\x89PNG" + b"\0" * (10 * 1024 * 1024), "image/png")}
    )
    assert huge.status_code == 413 and huge.json()["field"] == "file"
    assert not own.personas.exists() or not any(own.personas.iterdir())


def test_the_persona_page_shows_files_seeds_skills_and_imports(own):
    page = own.client.get("/persona")
    assert page.status_code == 200
    for needle in (
        'hx-get="/persona/files/IDENTITY.md"',
        'hx-get="/persona/config"',
        'hx-get="/persona/skills/journaling"',
        'href="/api/persona/export"',
        'hx-post="/persona/cards"',
        'hx-post="/persona/import"',
    ):
        assert needle in page.text, needle
    editor = own.client.get("/persona/files/SOUL.md")
    assert editor.status_code == 200 and 'hx-put="/persona/files/SOUL.md"' in editor.text
    saved = own.client.put("/persona/files/SOUL.md", data={"text": "# Soul\n\nCalm.\n"}, headers=own.csrf)
    assert saved.status_code == 200 and "SOUL.md saved" in saved.text
    seeds = own.client.post("/persona/seeds", data={"name": "dawn", "text": "Dawn notebook:"}, headers=own.csrf)
    assert seeds.status_code == 200 and "seed dawn saved" in seeds.text and 'id="seed-dawn"' in seeds.text
    card = own.client.post("/persona/cards", files={"file": ("m.png", png_card(CARD), "image/png")}, headers=own.csrf)
    assert card.status_code == 200 and "Mira Vale" in card.text and "python run.py --persona" in card.text


def test_the_shipped_persona_a_run_names_explicitly_is_shown_read_only(web):
    web.services.overrides = web.services.overrides.replace(persona_dir=str(default_persona_dir()))
    editor = web.client.get("/persona/config").text
    assert "readonly" in editor and "disabled" in editor
    refused = web.client.put("/api/persona/files/IDENTITY.md", json={"text": "# Identity\n\nSomeone else.\n"})
    assert refused.status_code == 409 and refused.json()["field"] == "persona"
    assert not (web.data_dir / "persona").exists()


def test_a_refused_edit_of_the_shipped_persona_adopts_nothing(web):
    for path, body in (
        ("/api/persona/config", {"text": "memory:\n  recall_k: [unclosed\n"}),
        ("/api/persona/files/ethics.yaml", {"text": "principles: 3\n"}),
        ("/api/persona/skills/journaling", {"text": "no frontmatter"}),
    ):
        assert web.client.put(path, json=body).status_code == 422, path
    assert not (web.data_dir / "persona").exists()
    overview = web.client.get("/api/persona").json()
    assert overview["editable"] is False and Path(overview["directory"]) == default_persona_dir().resolve()
